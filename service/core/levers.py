"""The physics of three serving levers: speculative decoding, prefix caching and CPU weight offload.

Pure numpy over arrays of candidates (scalars broadcast), no catalog or engine knowledge: the callers pass the
acceptance rate, host-link bandwidth and step-time function they looked up. Units are in the names: ``_s``
seconds, ``_tok`` tokens, ``_bytes`` bytes, ``_gb_s`` GB/s (1e9 bytes per second), ``_seqs`` sequences.
docs/levers.md derives each formula and says where it enters the step model, the search and the launch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from service.core.candidates import MODE_RATE
from service.core.types import F
from service.units import GB_BYTES

if TYPE_CHECKING:
    from service.core.step_model import StepModel

# Target-model time of one forward step carrying ``query_tok`` new tokens in total (summed over the batch).
StepTimeFn = Callable[[F], F]


def _f64(x: ArrayLike) -> F:
    return np.asarray(x, dtype=np.float64)


# ---- speculative decoding -------------------------------------------------------------------------------


def expected_tokens_per_step_tok(acceptance_rate: ArrayLike, num_speculative_tokens: ArrayLike) -> F:
    """Tokens one sequence emits per verify step: (1 - a^(k+1)) / (1 - a), which is k + 1 at a = 1.

    Draft token i is kept only if tokens 1..i-1 were, each with probability a; the step always adds the target
    model's own next token (the bonus token). a = 0 gives 1: no better than plain decoding.
    """
    a = np.clip(_f64(acceptance_rate), 0.0, 1.0)
    k = _f64(num_speculative_tokens)
    near_one = a > 1.0 - 1e-12
    safe_a = np.where(near_one, 0.5, a)
    geometric = (1.0 - safe_a ** (k + 1.0)) / (1.0 - safe_a)
    return np.where(near_one, k + 1.0, geometric)


def verify_query_tok(batch_seqs: ArrayLike, num_speculative_tokens: ArrayLike) -> F:
    """Tokens the target model processes in one verify step: each sequence's last token plus its k drafts."""
    return _f64(batch_seqs) * (_f64(num_speculative_tokens) + 1.0)


def draft_time_per_step_s(draft_step_s: ArrayLike, num_speculative_tokens: ArrayLike) -> F:
    """Drafting time per verify step: k sequential draft forward passes (EAGLE heads, MTP modules, draft model).

    n-gram lookup runs on the CPU between steps: pass ``draft_step_s = 0`` for it.
    """
    return _f64(draft_step_s) * _f64(num_speculative_tokens)


@dataclass(frozen=True)
class SpeculativeTiming:
    tokens_per_step_tok: F  # tokens each sequence emits per verify step
    verify_step_s: F  # target-model step over batch x (k + 1) tokens
    draft_s: F  # drafting time per verify step
    tpot_s: F  # time per output token with speculation
    base_tpot_s: F  # time per output token without it (one token per sequence per step)
    speedup: F  # base_tpot_s / tpot_s; <= 1 whenever acceptance is 0


def speculative_tpot_s(
    step_time_s: StepTimeFn,
    batch_seqs: ArrayLike,
    acceptance_rate: ArrayLike,
    num_speculative_tokens: ArrayLike,
    draft_s: ArrayLike,
) -> SpeculativeTiming:
    """TPOT with speculative decoding: (verify step over batch x (k+1) tokens + drafting) / tokens per step.

    While the batch is small the step reads the weights once whatever its token count (memory-bound), so the
    k extra tokens are nearly free and TPOT falls by up to the tokens per step; once the batch fills the GPU's
    compute, the verify step grows with batch x (k + 1) and the rejected drafts are pure loss.
    A step over more tokens is never taken as faster than one over fewer (the step-time function may not be
    monotone between its fitted points), so acceptance 0 never helps.
    """
    batch = _f64(batch_seqs)
    base_step_s = _f64(step_time_s(batch))
    verify_s = np.maximum(_f64(step_time_s(verify_query_tok(batch, num_speculative_tokens))), base_step_s)
    drafting_s = np.maximum(_f64(draft_s), 0.0)
    tokens = expected_tokens_per_step_tok(acceptance_rate, num_speculative_tokens)
    tpot = (verify_s + drafting_s) / tokens
    return SpeculativeTiming(
        tokens_per_step_tok=tokens,
        verify_step_s=verify_s,
        draft_s=drafting_s,
        tpot_s=tpot,
        base_tpot_s=base_step_s,
        speedup=base_step_s / tpot,
    )


# ---- prefix caching -------------------------------------------------------------------------------------


def cached_prefix_tok(prompt_tok: ArrayLike, hit_rate: ArrayLike, block_tok: ArrayLike) -> F:
    """Prompt tokens served from the prefix cache: the hit share, rounded down to whole KV blocks.

    Engines cache and match whole blocks only, and always compute at least the prompt's last token (its
    logits start the output), so at most prompt - 1 tokens are cached.
    """
    prompt = _f64(prompt_tok)
    block = _f64(block_tok)
    hit_tok = np.minimum(np.clip(_f64(hit_rate), 0.0, 1.0) * prompt, prompt - 1.0)
    return np.floor(np.maximum(hit_tok, 0.0) / block) * block


def prefill_computed_tok(prompt_tok: ArrayLike, hit_rate: ArrayLike, block_tok: ArrayLike) -> F:
    """Prompt tokens the prefill still computes: the prompt less its cached prefix (hit rate 0: all of it)."""
    return _f64(prompt_tok) - cached_prefix_tok(prompt_tok, hit_rate, block_tok)


def kv_blocks_per_seq(
    prompt_tok: ArrayLike,
    output_tok: ArrayLike,
    hit_rate: ArrayLike,
    block_tok: ArrayLike,
    seqs_sharing_prefix: ArrayLike,
) -> F:
    """KV blocks one running sequence holds, shared prefix blocks split over the sequences that share them.

    A sequence needs ceil((prompt + output) / block) blocks; its cached prefix blocks are the same physical
    blocks for every running sequence with that prefix, so they count once per ``seqs_sharing_prefix``
    (1: a hit on blocks an earlier, finished request left behind saves compute but no memory).
    """
    block = _f64(block_tok)
    total_blocks = np.ceil((_f64(prompt_tok) + _f64(output_tok)) / block)
    shared_blocks = cached_prefix_tok(prompt_tok, hit_rate, block_tok) / block
    sharing = np.maximum(_f64(seqs_sharing_prefix), 1.0)
    return total_blocks - shared_blocks + shared_blocks / sharing


def host_prefix_load_s(cached_tok: ArrayLike, kv_bytes_per_tok: ArrayLike, host_link_bw_gb_s: ArrayLike) -> F:
    """Time to bring a cached prefix's KV back from host memory (KV offload tier) over the host link.

    A hit on host-resident blocks pays this instead of recomputing the prefix; worth it while it is shorter
    than the prefill of those tokens.
    """
    return _f64(cached_tok) * _f64(kv_bytes_per_tok) / (_f64(host_link_bw_gb_s) * GB_BYTES)


# ---- the prefix working set and the KV offload tier --------------------------------------------------------


def free_prefix_pool_tok(kv_pool_bytes: ArrayLike, running_seqs: ArrayLike, seq_bytes: ArrayLike,
                         kv_tok_bytes: ArrayLike) -> F:
    """Tokens of reusable prefixes the GPU's KV pool keeps beside the running batch: the pool less the running
    sequences' KV, in tokens (all per GPU)."""
    free = np.maximum(_f64(kv_pool_bytes) - _f64(running_seqs) * _f64(seq_bytes), 0.0)
    return free / np.maximum(_f64(kv_tok_bytes), 1e-30)


def prefix_tier_shares(free_tok: ArrayLike, host_tok: ArrayLike, working_set_tok: ArrayLike) -> tuple[F, F]:
    """Shares of prefix-cache hits served from GPU blocks and from the host tier, of a working set of
    ``working_set_tok`` tokens of reusable prefixes (distinct prefixes x their tokens).

    Assumed: LRU eviction with every prefix of the set equally likely to be reused next, so the tier of
    ``free_tok`` GPU tokens holds the most recent ``free_tok`` of the set: a hit finds its prefix on the GPU
    with probability min(1, F / W), in the GPU or the host tier (``host_tok``) with min(1, (F + H) / W). The
    rest is recomputed. A working set of 0 (not described) is served all from the GPU, as before.
    """
    w = _f64(working_set_tok)
    known = w > 0.0
    safe_w = np.where(known, w, 1.0)
    gpu = np.where(known, np.minimum(1.0, _f64(free_tok) / safe_w), 1.0)
    both = np.where(known, np.minimum(1.0, (_f64(free_tok) + _f64(host_tok)) / safe_w), 1.0)
    return gpu, both - gpu


# ---- CPU weight offload ---------------------------------------------------------------------------------


def offload_needed_bytes(required_bytes: ArrayLike, available_bytes: ArrayLike) -> F:
    """Weight bytes per GPU that must live in host memory for the rest to fit (0 when it already fits)."""
    return np.maximum(_f64(required_bytes) - _f64(available_bytes), 0.0)


def offload_step_floor_s(offloaded_bytes: ArrayLike, host_link_bw_gb_s: ArrayLike) -> F:
    """Shortest possible step with offloaded weights: every forward pass streams them over the host link.

    ``host_link_bw_gb_s`` is the link's bandwidth in the host-to-GPU direction (levers.yaml host_links).
    """
    return _f64(offloaded_bytes) / (_f64(host_link_bw_gb_s) * GB_BYTES)


def offloaded_step_s(
    step_s: ArrayLike, offloaded_bytes: ArrayLike, host_link_bw_gb_s: ArrayLike, overlapped: ArrayLike
) -> F:
    """Step time with offloaded weights: the transfer added to the step, or hidden behind it when prefetched.

    The offloaded weights are still read from GPU memory once copied in, so the on-GPU step is unchanged;
    ``overlapped`` (a prefetching backend) takes the longer of step and transfer, otherwise they add up.
    Either way the result is at least ``step_s`` and at least the transfer: offload never lowers TPOT.
    """
    step = _f64(step_s)
    floor = offload_step_floor_s(offloaded_bytes, host_link_bw_gb_s)
    return np.where(np.asarray(overlapped, dtype=bool), np.maximum(step, floor), step + floor)


# ---- the levers in the step model ---------------------------------------------------------------------------


def prefix_cached_prefill_tok_s(sm: StepModel, prompt_tok: ArrayLike) -> F:
    """``StepModel.prefill_tok_s`` with the prefix cache: the time per prompt token of a ``prompt_tok``-token
    prompt whose cached prefix is not computed. Linear FLOPs and all-reduces scale with the computed tokens;
    the computed suffix still attends over the whole prompt (causal), so attention is attn(prompt) -
    attn(cached). Cached tokens are whole tokens (engines match whole KV blocks: at most a block per prompt
    more is computed than here)."""
    s = sm.s
    prompt = _f64(prompt_tok)
    cached = cached_prefix_tok(prompt, sm.prefix_hit_rate, 1.0)
    computed = prompt - cached
    attn = s.attn_prefill(prompt) - s.attn_prefill(cached)
    return ((s.lin_flops_tok * computed / sm.gemm_rate_flops_s + attn / sm.attn_rate_flops_s) / s.n_gpu
            + sm.comm_per_tok_s * computed / sm.pp) / prompt


def prefix_cached_prompt_compute_s(sm: StepModel, prompt_tok: ArrayLike) -> F:
    """``StepModel.prompt_compute_s`` with the prefix cache: the compute of the prompt's uncached suffix."""
    s = sm.s
    prompt = _f64(prompt_tok)
    cached = cached_prefix_tok(prompt, sm.prefix_hit_rate, 1.0)
    return (s.lin_flops_tok * (prompt - cached) / (s.tp * sm.gemm_rate_flops_s)
            + (s.attn_prefill(prompt) - s.attn_prefill(cached)) / (s.tp * sm.attn_rate_flops_s))


# Fixed-point steps of Little's law for an open loop's running batch: from 0 the iterate rises monotonically
# towards the least fixed point; a bound on work (the iterate is capped by the pool anyway), not a fitted figure
RUNNING_BATCH_STEPS = 30


def running_seqs(sm: StepModel) -> F:
    """Sequences each serving unit runs in steady state, for the free-pool estimate: a closed loop's clients (or
    an offline job's requests) per unit up to what the pool holds at mean context (``cap_mean``); an offline job
    without a count fills the pool; an open loop solves Little's law b = rate x (TTFT + output x step(b))
    on ``sm`` (the step model without levers), by fixed-point steps from 0."""
    s = sm.s
    per = _f64(s.load) / np.maximum(_f64(s.replicas), 1.0)
    cap = _f64(s.cap_mean)
    mode = np.asarray(s.mode)
    out = np.where(per > 0.0, np.minimum(per, cap), cap)
    rate = mode == MODE_RATE
    if np.any(rate):
        b = np.zeros_like(out)
        for _ in range(RUNNING_BATCH_STEPS):
            step_s = sm.decode_step(b)[0] + b * (s.isl / s.osl) * sm.c_prefill_s
            b = np.minimum(per * (sm.ttft_fixed_s + sm.prefill_alone_s + s.osl * step_s), cap)
        out = np.where(rate, b, out)
    return out


@dataclass(frozen=True)
class PrefixTiers:
    """Where the prefix-cache hits of a described working set are served from (per candidate)."""

    running_seqs: F     # sequences running per serving unit
    free_tok: F         # reusable-prefix tokens the GPU pool keeps beside them
    host_tok: F         # tokens the host tier holds (kv_offload_bytes over KV bytes per token)
    gpu_share: F        # of the hits: found in GPU blocks
    host_share: F       # loaded from the host tier; the rest (1 - both) is recomputed
    host_load_s: F      # per request: the host-tier share of its cached prefix over the host link
    recompute_s: F      # per request: prefilling those tokens instead (the marginal prompt-token time)
    kv_tok_bytes: F     # KV bytes per token per GPU (at the workload's mean context)
    prefill_tok_s: F    # marginal replica time of one prompt token (``c_prefill_s`` without levers)


def prefix_tiers(sm: StepModel) -> PrefixTiers:
    """The tiers of ``sm``'s candidates (their ``Static.prefix_working_set_tok`` > 0; ``sm`` without levers).

    KV bytes per token per GPU are the running sequences' at the workload's mean context; each GPU loads its own
    shard of a prefix over its own host link, so the load time is per GPU."""
    s = sm.s
    kv_tok = _f64(s.seq_mean) / (s.isl + s.osl / 2.0)
    running = running_seqs(sm)
    free = free_prefix_pool_tok(s.kv_pool, running, s.seq_mean, kv_tok)
    host = _f64(s.kv_offload_bytes) / kv_tok
    gpu_share, host_share = prefix_tier_shares(free, host, s.prefix_working_set_tok)
    cached = cached_prefix_tok(s.isl, s.prefix_hit_rate, 1.0)
    load_s = host_prefix_load_s(cached * host_share, kv_tok, _f64(s.host_link_bytes_s) / GB_BYTES)
    return PrefixTiers(running_seqs=running, free_tok=free, host_tok=host, gpu_share=gpu_share,
                       host_share=host_share, host_load_s=load_s, recompute_s=cached * host_share * sm.c_prefill_s,
                       kv_tok_bytes=kv_tok, prefill_tok_s=_f64(sm.c_prefill_s))


def kv_tier_gb(tiers: PrefixTiers, working_set_tok: ArrayLike, link_gb_s: ArrayLike) -> F:
    """The host KV tier worth giving each candidate, GB per GPU in whole GB (0: none): the part of the prefix
    working set its free KV blocks do not hold, where the GPU has a host link (``link_gb_s`` > 0, GB/s) and
    reloading a token over it is faster than prefilling it."""
    link = _f64(link_gb_s)
    kv_tok = tiers.kv_tok_bytes
    missing_tok = _f64(working_set_tok) - tiers.free_tok
    with np.errstate(divide="ignore"):
        worth = (link > 0) & (kv_tok / (link * GB_BYTES) < tiers.prefill_tok_s)
    return np.where(worth & (missing_tok > 0), np.ceil(np.maximum(missing_tok, 0.0) * kv_tok / GB_BYTES), 0.0)


def with_levers(sm: StepModel) -> StepModel:
    """The step model of candidates with levers (``Static.spec_tokens``, ``prefix_hit_rate``,
    ``offload_bytes``): the one latency model the serving solve and the simulation both use.

    - Offload: every forward pass streams the offloaded bytes over the host link, stage after stage, added to
      the step (no prefetch overlap: ``offloaded_step_s`` with ``overlapped`` false); a prefill step too.
    - Speculative decoding: a decode step becomes a verify step over ``k + 1`` tokens per sequence plus ``k``
      draft passes, divided by the tokens each sequence emits per step (``expected_tokens_per_step_tok``):
      the weight and KV reads (the draft's KV read by each draft pass), fixed all-reduce latency and per-step
      time are shared by ``tau`` tokens; the
      compute, all-reduce traffic and routed experts grow with ``k + 1``. Each term is scaled alone, and the
      smooth maximum is homogeneous, so ``decode_step(b)`` is ``(t_verify(b) + t_draft) / tau``
      (``speculative_tpot_s``); with acceptance 0 every term is at least the plain one (never faster).
      A draft pass reads ``draft_pass_bytes`` at the fitted bandwidth (memory-bound at decode batches), and an
      MoE draft (MTP) the routed experts of ``draft_expert_bytes`` its batch routes to (``draft_expert_s``,
      ``StepModel.draft_read_s``).
    - The token budget: a verify step's decodes take ``k + 1`` tokens each of it (``verify_tok``), and its
      prompt tokens are shared by the ``tau`` tokens it emits (``tok_per_step``; ``sim_kernel.prompt_budget_f``).
    - Prefix cache: the prompt costs leave the cached prefix out (``prefix_cached_prefill_tok_s``). With a
      working set of reusable prefixes (``Static.prefix_working_set_tok``), only the hits the GPU pool or the
      host tier holds are cached (``prefix_tiers``): the rest are recomputed, and each request waits for its
      host-tier share to load before its prefill (added to ``ttft_fixed_s``: the load runs over the host link,
      not on the GPU's compute, while the other requests keep stepping).
    The prompt tokens a step carries keep their per-token cost: per emitted token they are unchanged.
    """
    s = sm.s
    hit: F | float = s.prefix_hit_rate
    ttft_fixed = sm.ttft_fixed_s
    tiers = None
    if np.any(_f64(s.prefix_working_set_tok) > 0.0) and np.any(_f64(hit) > 0.0):
        tiers = prefix_tiers(sm)
        hit = _f64(hit) * (tiers.gpu_share + tiers.host_share)
        ttft_fixed = ttft_fixed + tiers.host_load_s
    offload_s = sm.pp * _f64(s.offload_bytes) / _f64(s.host_link_bytes_s)
    k = _f64(s.spec_tokens)
    tau = expected_tokens_per_step_tok(s.spec_acceptance, k)
    q = k + 1.0
    draft_s = draft_time_per_step_s(_f64(s.draft_pass_bytes) / sm.bw_bytes_s, k)
    # an MoE draft (MTP) reads, per pass over the batch's b tokens, the routed experts they route to:
    # draft_expert_s x (1 - (1 - experts per token / experts)^b), with the target's routing (log_miss before
    # the verify step's k + 1 scaling); 0 for a dense draft
    draft_expert = draft_time_per_step_s(_f64(s.draft_expert_bytes) / sm.bw_bytes_s, k)
    draft_log_miss = np.where(draft_expert > 0, np.where(sm.moe, sm.log_miss, 0.0), 0.0)
    # per sequence, the verify step reads the target's KV of the mean context (not the k empty draft slots
    # memory holds for it), and each of the k draft passes the draft's own KV of it
    ctx_mean = s.isl + s.osl / 2.0
    seq_s = (s.kv_seq_bytes(ctx_mean) + k * _f64(s.draft_kv_tok_bytes) * ctx_mean) / sm.bw_bytes_s
    pp_handoff = sm.pp_handoff_s + offload_s
    out = replace(
        sm, pp_handoff_s=pp_handoff, dense_s=sm.dense_s / tau, expert_s=sm.expert_s / tau,
        log_miss=sm.log_miss * q, seq_s=seq_s / tau, flop_s_seq=sm.flop_s_seq * q / tau,
        comm_fixed_s=sm.comm_fixed_s / tau, comm_seq_s=sm.comm_seq_s * q / tau,
        step_fixed_s=(sm.step_fixed_s + offload_s + draft_s) / tau, seq_scale=1.0 / tau, flop_scale=q / tau,
        draft_expert_s=draft_expert / tau, draft_log_miss=draft_log_miss, verify_tok=q, tok_per_step=tau,
        prefix_hit_rate=hit, ttft_fixed_s=ttft_fixed, prefix_tiers=tiers)
    isl = s.isl
    out.c_prefill_s = out.prefill_tok_s(isl)
    out.prefill_compute_s = out.prompt_compute_s(isl)
    out.prefill_alone_s = out.prefill_only_s(out.prefill_compute_s, isl - cached_prefix_tok(isl, hit, 1.0))
    return out
