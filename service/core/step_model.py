"""Time of one engine step of a replica under fitted parameters (``step_model``), over arrays of candidates.

Prefill: linear FLOPs of the active parameters plus the causal attention term (quadratic in the prompt), over
dense FLOPS x ``eff_flops``, floored by reading the weights once; two ring all-reduces per layer under TP
(one where attention and MLP run in parallel and their sum is reduced once).
Decode step: (weights touched + KV read for every sequence) over bandwidth x ``eff_bw`` against the batch's
FLOPs over compute, smoothly whichever binds, plus all-reduces and a software overhead per step and per layer.
MoE layers read only the experts the batch routes to (expected distinct experts of ``b`` tokens).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from service.core.candidates import Params, take_rows
from service.core.levers import PrefixTiers, prefix_cached_prefill_tok_s, prefix_cached_prompt_compute_s, with_levers
from service.core.memory import Static
from service.core.step_kernels import carried_prefill_f
from service.core.types import B_, F


def smooth_max(a: F, b: F) -> F:
    """Smooth maximum of the memory and compute times of a step, (a^4 + b^4)^(1/4): a hard max has no gradient
    where the two cross, which the fit needs; the 4th power stays within 19% of max(a, b) at a = b. Written
    with products and square roots (faster than powers); on floats, compiled: ``step_kernels.smooth_max_f``."""
    hi = np.maximum(np.maximum(a, b), 1e-30)
    r = np.minimum(a, b) / hi
    r *= r
    r *= r
    return hi * np.sqrt(np.sqrt(1.0 + r))


@dataclass
class StepModel:
    """Time of one engine step of a replica, per candidate, under fitted parameters: what the serving
    solve (serve.py) and the scheduler simulation (service/core/simulate.py) are both built from.

    A step decodes one token for each of ``batch`` sequences and may carry prompt tokens (chunked prefill):
    its time is ``decode_step(batch)`` plus ``prefill_tok_s`` per prompt token carried; a step with no
    decodes is a prefill on its own (``prefill_only_s``). Fields are per-candidate arrays (``one`` gives
    the same model of one candidate with plain floats, for scalar use in a loop)."""

    s: Static
    pp: F
    gemm_rate_flops_s: F         # GEMM FLOPS reached per GPU
    attn_rate_flops_s: F         # 16-bit attention FLOPS reached per GPU
    bw_bytes_s: F                # memory bandwidth reached per GPU
    link_bytes_s: F              # GPU-GPU bandwidth reached
    comm_per_tok_s: F            # all-reduce traffic time of one token through the whole model
    ar_latency_s: F              # fixed latency of a forward pass's all-reduces
    pp_handoff_s: F              # pipeline stage hand-offs of one forward pass
    ar_bytes_tok: F
    weights_read_s: F            # reading every stage's weights once (what a step reads of them: no lookup table)
    c_prefill_s: F               # prefill_tok_s at the workload's prompt length
    prefill_compute_s: F         # compute of the workload's whole prompt alone
    prefill_alone_s: F           # the workload's prompt alone on an idle replica (no step overhead)
    log_miss: F                  # ln(1 - experts per token / experts); -inf for dense models
    moe: B_
    dense_s: F
    expert_s: F
    seq_s: F                     # KV read of one sequence at the workload's mean context
    flop_s_seq: F                # compute of one decoded token at the workload's mean context
    comm_fixed_s: F
    comm_seq_s: F
    step_fixed_s: F              # pipeline hand-offs + per-step overhead
    step_overhead_s: F           # per step and per layer: a forward pass's software overhead
    ttft_fixed_s: F              # per request: the front end, and each MoE layer's dispatch in its prefill
    # levers (service/core/levers.py): per-context decode terms scaled to a verify step per emitted token, and
    # the prefix-cache hit rate that prompt costs leave out; the defaults change nothing
    seq_scale: F | float = 1.0
    flop_scale: F | float = 1.0
    prefix_hit_rate: F | float = 0.0
    # an MoE draft's routed experts read by its k passes per emitted token, and its routing (0: no such draft)
    draft_expert_s: F | float = 0.0
    draft_log_miss: F | float = 0.0
    # speculation: token-budget tokens a decoding sequence takes per verify step (k + 1), and tokens it emits
    # per verify step (tau); a step here is a verify step per emitted token
    verify_tok: F | float = 1.0
    tok_per_step: F | float = 1.0
    # with a described working set of reusable prefixes: where the hits are served from (levers.prefix_tiers)
    prefix_tiers: PrefixTiers | None = None

    def decode_step(self, batch: F, ctx_tok: F | None = None) -> tuple[F, F]:
        """Replica step time with ``batch`` sequences decoding at mean context ``ctx_tok`` (default: the
        workload's, input + output / 2); and its compute share. Broadcasts ``batch`` against ``ctx_tok``."""
        seq_s, flop_s_seq = (self.seq_s, self.flop_s_seq) if ctx_tok is None else self.context_terms(ctx_tok)
        pp = self.pp
        b = np.maximum(batch / pp, 1e-9)                     # micro-batch per pipeline stage
        # expected share of experts the batch routes to: 1 - P(an expert is missed by all b tokens)
        t_mem = self.dense_s + b * seq_s
        if self.moe.any():
            t_mem = t_mem + np.where(self.moe, self.expert_s * -np.expm1(b * self.log_miss), 0.0)
        t_cmp = b * flop_s_seq
        stage = smooth_max(t_mem, t_cmp) + self.comm_fixed_s + b * self.comm_seq_s
        return pp * stage + self.step_fixed_s + self.draft_read_s(batch), t_cmp / (t_cmp + t_mem)

    def draft_read_s(self, batch: F) -> F:
        """Routed experts an MoE draft's passes read per emitted token with ``batch`` sequences decoding: each
        pass runs the whole batch through the draft once, and reads the experts its tokens route to."""
        return self.draft_expert_s * -np.expm1(np.maximum(batch, 1e-9) * self.draft_log_miss)

    def context_terms(self, ctx_tok: F) -> tuple[F, F]:
        """At mean context ``ctx_tok``: the time to read one sequence's KV cache, and the compute of one decoded
        token (``seq_s`` and ``flop_s_seq`` at the workload's mean context)."""
        # with speculation, each of the k draft passes also reads the draft's own KV of the sequence
        kv_read = self.s.kv_seq_bytes(ctx_tok) + self.s.spec_tokens * self.s.draft_kv_tok_bytes * ctx_tok
        return (kv_read / self.bw_bytes_s * self.seq_scale,
                self.s.dec_flops(ctx_tok) / (self.s.n_gpu * self.gemm_rate_flops_s) * self.flop_scale)

    def prefill_tok_s(self, prompt_tok: F) -> F:
        """Marginal replica time of one token of a ``prompt_tok``-token prompt carried by a decode step
        (inside a full pipeline)."""
        s = self.s
        if np.any(self.prefix_hit_rate):
            return prefix_cached_prefill_tok_s(self, prompt_tok)
        return ((s.lin_flops_tok / self.gemm_rate_flops_s + s.attn_prefill(prompt_tok) / prompt_tok
                 / self.attn_rate_flops_s) / s.n_gpu + self.comm_per_tok_s / self.pp)

    def prompt_compute_s(self, prompt_tok: F) -> F:
        """Compute time of a whole ``prompt_tok``-token prompt prefilled alone (all stages in turn)."""
        s = self.s
        if np.any(self.prefix_hit_rate):
            return prefix_cached_prompt_compute_s(self, prompt_tok)
        return (s.lin_flops_tok * prompt_tok / (s.tp * self.gemm_rate_flops_s)
                + s.attn_prefill(prompt_tok) / (s.tp * self.attn_rate_flops_s))

    def prefill_only_s(self, compute_s: Any, tokens: Any) -> Any:
        """A step that only prefills ``tokens`` prompt tokens whose compute takes ``compute_s``: compute
        against reading the weights once per stage, plus all-reduces and stage hand-offs (no per-step
        overhead). Plain arithmetic, so it takes arrays or, on ``one(i)``, floats."""
        return (smooth_max(compute_s, self.weights_read_s) + self.comm_per_tok_s * tokens + self.ar_latency_s
                + self.pp_handoff_s + (self.pp - 1.0) * tokens * self.ar_bytes_tok / self.link_bytes_s)

    def carried_prefill_s(self, batch: float, tokens: float, compute_s: float) -> float:
        """Time a decode step of ``batch`` sequences gains by carrying ``tokens`` prompt tokens whose marginal
        compute is ``compute_s`` (tokens x ``prefill_tok_s``): that compute, against reading the routed experts
        the prompt tokens touch beyond those the decodes read (MoE; a dense step already reads every weight,
        so there it is the compute). Floats, on ``one(i)``; the simulation's compiled loop calls the function."""
        return float(carried_prefill_f(float(batch), float(tokens), float(compute_s), float(self.pp),
                                        float(self.log_miss), float(self.expert_s), bool(self.moe)))

    def one(self, i: int) -> StepModel:
        """Candidate ``i`` alone: its Static as one-row arrays, every other field a float."""
        out: dict[str, Any] = {"s": self.s if len(self.s.isl) == 1 else take_rows(self.s, np.asarray([i]))}
        for f in fields(self):
            if f.name == "prefix_tiers":
                tiers = self.prefix_tiers
                out[f.name] = None if tiers is None or len(self.s.isl) == 1 else take_rows(tiers, np.asarray([i]))
            elif f.name != "s":
                v = getattr(self, f.name)
                out[f.name] = v[i].item() if isinstance(v, np.ndarray) and v.ndim else v
        return StepModel(**out)


def step_model(s: Static, p: Params) -> StepModel:
    """The step-time model of candidates whose static terms are known, under parameters ``p``."""
    isl, tp, pp = s.isl, s.tp, s.pp
    gemm_rate = s.gemm_flops_s * p.eff_flops
    attn_rate = s.attn_flops_s * p.eff_flops
    bw = s.bw_bytes_s * p.eff_bw
    link = s.link_bytes_s * p.comm_eff
    comm_per_tok = s.ar_count * s.ar_ring_factor * s.ar_bytes_tok / link
    # expert all-to-all (attention DP / expert parallelism): bytes per token of a DP rank over the link, and a
    # collective's latency for each dispatch and combine of the stage's MoE layers
    a2a_tok = (s.a2a_bytes_tok if s.a2a_bytes_tok is not None else 0.0) / link
    a2a_fixed = (s.a2a_count if s.a2a_count is not None else 0.0) / pp * p.a2a_latency_s
    comm_per_tok = comm_per_tok + a2a_tok * pp
    # marginal replica time of one prompt token inside a full pipeline (chunks mixed into decode steps)
    c_prefill = (s.lin_flops_tok / gemm_rate + s.attn_prefill_flops / isl / attn_rate) / s.n_gpu + comm_per_tok / pp
    # one prompt alone: all stages in turn, weights read once per stage
    prefill_compute = s.lin_flops_tok * isl / (tp * gemm_rate) + s.attn_prefill_flops / (tp * attn_rate)
    pp_handoff = (pp - 1.0) * p.allreduce_latency_s
    with np.errstate(divide="ignore"):
        log_miss = np.log(1.0 - s.experts_per_token / s.experts)   # -inf for dense models (every expert)
    if s.dp is not None:
        # all DP ranks' tokens meet in the MoE layers: a step of b sequences per rank routes b x dp tokens
        log_miss = log_miss * s.dp
    # a forward pass's software overhead: once per step (scheduling, sampling) and once per layer (its kernels'
    # launches and the gaps between them, whatever the bytes moved: more layers, more of it)
    overhead = p.step_overhead_s + s.layers * p.layer_overhead_s
    sm = StepModel(
        s=s, pp=pp, gemm_rate_flops_s=gemm_rate, attn_rate_flops_s=attn_rate, bw_bytes_s=bw, link_bytes_s=link,
        comm_per_tok_s=comm_per_tok, ar_latency_s=s.ar_count * p.allreduce_latency_s, pp_handoff_s=pp_handoff,
        ar_bytes_tok=s.ar_bytes_tok, weights_read_s=(s.dense_weights + s.expert_weights) * pp / bw,
        c_prefill_s=c_prefill,
        prefill_compute_s=prefill_compute, prefill_alone_s=prefill_compute, log_miss=log_miss,
        moe=s.expert_weights > 0, dense_s=s.dense_weights / bw, expert_s=s.expert_weights / bw,
        seq_s=s.seq_mean / bw, flop_s_seq=s.dec_flops_tok / (s.n_gpu * gemm_rate),
        comm_fixed_s=(s.ar_count / pp) * p.allreduce_latency_s + a2a_fixed,
        comm_seq_s=(s.ar_count / pp) * s.ar_ring_factor * s.ar_bytes_tok / link + a2a_tok,
        step_fixed_s=pp_handoff + overhead, step_overhead_s=overhead,
        ttft_fixed_s=p.ttft_fixed_s + s.moe_layers * p.moe_layer_prefill_s)
    sm.prefill_alone_s = sm.prefill_only_s(prefill_compute, isl)
    return with_levers(sm) if s.has_levers() else sm
