"""What a candidate holds in memory and the operations it runs, before any fitted parameter (``static_terms``).

Memory per GPU: weights (bits per weight from the dtype, scales included; embeddings in 16 bits; split over
TP x PP, experts included), activations of one forward pass of ``max_num_batched_tokens`` tokens plus FP32
sampling logits, a fixed reserve (CUDA context, graphs, workspaces) and NCCL buffers. The KV budget follows
the engine: a share of total memory (vLLM) or of what is free (TensorRT-LLM). KV per token and GPU:
2 x layers/PP x ceil(KV heads / TP) x head dim x bytes; MLA latents are not split by TP; sliding-window
layers hold at most the window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from service.core.candidates import BUDGET_SHARE_OF_TOTAL, MODE_OFFLINE, Candidates
from service.core.tables import Tables
from service.core.types import B_, I_, F

# Requests a closed-loop benchmark run (or an offline job) sends per client (per sequence admitted) when its
# source does not say: InferenceX's runs use num_prompts = 10 x concurrency (the assumption for every stored
# run: none states its count). The first wave (every client at once) is then a tenth of the measured requests.
ASSUMED_REQUESTS_PER_CLIENT = 10.0


@dataclass
class Static:
    """Everything about a candidate that does not depend on the fitted parameters (computed once)."""

    runnable: B_
    fits: B_
    gemm_flops_s: F              # peak dense FLOPS of the GEMM dtype, per GPU
    attn_flops_s: F              # peak 16-bit FLOPS (attention), per GPU
    bw_bytes_s: F
    link_bytes_s: F
    weights: F                   # bytes per GPU
    dense_weights: F             # bytes per GPU that every step reads (an untied input embedding: not the table)
    expert_weights: F            # bytes per GPU of routed experts
    activations: F
    overhead: F
    kv_pool: F
    seq_full: F                  # KV bytes per GPU of one sequence at context_tok
    seq_mean: F                  # KV bytes per GPU of one sequence at isl + osl/2
    max_conc_replica: F
    cap_mean: F                  # sequences that fit at mean occupancy, within max_num_seqs
    isl: F
    osl: F
    tp: F
    pp: F
    n_gpu: F
    replicas: F
    max_batched_tok: F
    mode: I_
    load: F
    lin_flops_tok: F             # prompt token, linear layers
    dec_flops_tok: F             # decoded token: linear layers + LM head + attention over the mean context
    attn_prefill_flops: F        # one whole prompt's causal attention
    ar_bytes_tok: F              # bytes of one all-reduce per token (hidden x activation bytes)
    ar_count: F                  # all-reduces per forward pass of the replica (1 or 2 per layer under TP)
    ar_ring_factor: F            # 2 (tp-1)/tp: ring all-reduce traffic per byte reduced
    layers: F
    experts: F
    experts_per_token: F
    # per-token coefficients, for contexts and prompts other than the workload's mean (the simulator)
    kv_tok_layer_bytes: F        # KV bytes per GPU of one token in one full-attention layer (before PP)
    full_layers: F
    window_layers: F
    window_tok: F                # 0 = no sliding window
    heads_dims: F                # attention heads x (qk + v) per-head dimensions
    dec_fixed_flops_tok: F       # decoded token: linear layers + LM head (attention excluded)
    max_num_seqs: F
    context_tok: F               # longest sequence the deployment holds (max_model_len)
    first_wave_share: F          # Candidates.first_wave_share
    # levers (service/core/levers.py, docs/levers.md); the defaults are no lever, and scalars broadcast
    spec_tokens: F | float = 0.0           # k, draft tokens per verify step (0: no speculative decoding)
    spec_acceptance: F | float = 0.0       # each draft token's acceptance rate, given the previous one's
    draft_pass_bytes: F | float = 0.0      # bytes per GPU one draft forward pass reads (0: n-gram lookup)
    draft_expert_bytes: F | float = 0.0    # routed-expert bytes per GPU of an MoE draft (MTP), read as routed
    draft_kv_tok_bytes: F | float = 0.0    # KV bytes per GPU the draft keeps (and each draft pass reads) per token
    prefix_hit_rate: F | float = 0.0       # share of each prompt's tokens served from the prefix cache
    offload_bytes: F | float = 0.0         # weight bytes per GPU streamed from host memory every forward pass
    host_link_bytes_s: F | float = 1.0     # host-to-GPU bandwidth, bytes/s (used with offload_bytes, kv_offload_bytes)
    prefix_working_set_tok: F | float = 0.0  # tokens of reusable prefixes the hits come from (0: not described)
    kv_offload_bytes: F | float = 0.0      # host-memory KV tier per GPU, bytes (held prefixes reload over the link)

    # attention data parallelism and expert parallelism (service/core/moe_layout.py): DP ranks per replica
    # (``replicas`` counts DP ranks: each serves its own share of the load), and the bytes one GPU sends in
    # the expert all-to-all (dispatch + combine, all MoE layers of its stage) per token of its DP rank
    dp: F | None = None
    a2a_bytes_tok: F | None = None
    a2a_count: F | None = None   # all-to-alls per forward pass of the replica (dispatch + combine per MoE layer)
    moe_layers: F | float = 0.0  # layers with routed experts (0 for a dense model)

    def has_levers(self) -> bool:
        """Whether any lever is set (without one the step model is exactly the plain one)."""
        return bool(np.any(self.spec_tokens) or np.any(self.prefix_hit_rate) or np.any(self.offload_bytes))

    def kv_seq_bytes(self, ctx_tok: F) -> F:
        """KV bytes per GPU of one sequence holding ``ctx_tok`` tokens."""
        return _kv_seq_bytes(self.kv_tok_layer_bytes, self.full_layers, self.window_layers, self.window_tok,
                             self.pp, ctx_tok)

    def dec_flops(self, ctx_tok: F) -> F:
        """FLOPs of one decoded token that attends to ``ctx_tok`` tokens."""
        return self.dec_fixed_flops_tok + 2.0 * self.heads_dims * _attended(
            ctx_tok, self.full_layers, self.window_layers, self.window_tok)

    def attn_prefill(self, prompt_tok: F) -> F:
        """FLOPs of the causal attention of one whole ``prompt_tok``-token prompt."""
        return _attn_prefill(self.heads_dims, self.full_layers, self.window_layers, self.window_tok, prompt_tok)


def _windowed(ctx: F, win: F) -> F:
    return np.where(win > 0, np.minimum(ctx, win), ctx)


def _attended(ctx: F, full_l: F, win_l: F, win: F) -> F:
    """Layer-tokens of a sequence of ``ctx`` tokens: full-attention layers hold all, sliding ones the window."""
    return full_l * ctx + win_l * _windowed(ctx, win)


def _kv_seq_bytes(kv_tok_layer: F, full_l: F, win_l: F, win: F, pp: F, ctx: F) -> F:
    return kv_tok_layer * _attended(ctx, full_l, win_l, win) / pp


def _attn_prefill(heads_dims: F, full_l: F, win_l: F, win: F, isl: F) -> F:
    # causal attention over an isl-token prompt: per layer heads x isl^2/2 MACs for QK and as many for PV
    return heads_dims * (full_l * isl * isl + win_l * isl * _windowed(isl, win))


@dataclass
class Capacity:
    """What the engine settings (max_num_seqs, max_batched_tok) decide of a candidate's memory."""

    activations: F
    kv_pool: F
    fits: B_
    max_conc: F                  # sequences of the full context the KV pool holds (up to max_num_seqs)
    cap_mean: F                  # sequences it holds as the engine admits them (1 to max_num_seqs): of the workload's
                                 # mean context, or whole sequences where admission reserves them (reserve_full)


def capacity(t: Tables, c: Candidates, weights: F, overhead: F, runnable: B_, seq_full: F,
             seq_mean: F) -> Capacity:
    """Activations, KV pool and what fits, given the terms ``static_terms`` computes before them (none of which
    depends on the engine settings: the search computes them once per layout and this per setting)."""
    m, tp = c.model, c.tp
    activations = (c.max_batched_tok * (2.0 * t.mlp_width[m] / tp + 4.0 * t.hidden[m]) * t.act_bytes
                   + c.max_num_seqs * t.vocab[m] * t.logits_bytes)
    total_mem = t.mem_bytes[c.gpu]
    non_kv = weights + activations + overhead
    kv_pool = np.where(c.budget == BUDGET_SHARE_OF_TOTAL, total_mem * c.mem_fraction - non_kv,
                       (total_mem - non_kv) * c.mem_fraction)
    kv_pool = np.maximum(kv_pool, 0.0)
    # KV a running sequence holds on average: its mean context, or its whole sequence where admission reserves it
    admitted = np.where(c.reserve_full > 0, seq_full, seq_mean)
    return Capacity(
        activations=activations, kv_pool=kv_pool, fits=(non_kv < total_mem) & (kv_pool >= seq_full) & runnable,
        max_conc=np.minimum(np.floor(kv_pool / np.maximum(seq_full, 1.0)), c.max_num_seqs),
        cap_mean=np.maximum(np.minimum(np.floor(kv_pool / np.maximum(admitted, 1.0)), c.max_num_seqs), 1.0))


def a2a_bytes_per_token(t: Tables, c: Candidates, dp: F) -> F:
    """Bytes one GPU sends in the expert all-to-all per token of its DP rank, all MoE layers of its stage:
    ``moe_layout.all_to_all_bytes_per_step_per_rank`` per token (per-expert routing, BF16 dispatch and
    combine). The token is split over its rank's ``tp`` GPUs, sent to ``k (ep - 1) / ep`` remote groups on
    average, to each of a group's ``moe_tp = tp x dp / ep`` GPUs. 0 without expert parallelism."""
    m = c.model
    ep = np.maximum(c.ep, 1.0)
    copies = t.experts_per_token[m] * (ep - 1.0) / ep * (c.tp * dp / ep)
    return np.where(ep > 1.0, copies / c.tp * t.hidden[m] * 2.0 * t.act_bytes * t.moe_layers[m] / c.pp, 0.0)


def static_terms(t: Tables, c: Candidates) -> Static:
    """Memory, capacity and operation counts of each candidate (parameter-free)."""
    m, g = c.model, c.gpu
    tp, pp = c.tp, c.pp
    n_gpu = tp * pp
    hidden = t.hidden[m]
    isl, osl = np.maximum(c.input_tok, 1.0), np.maximum(c.output_tok, 1.0)

    native = t.w_native_compute[c.wdtype]
    fallback = t.w_fallback_compute[c.wdtype]
    rate_native = t.flops[g, native]
    rate_fallback = np.where(fallback >= 0, t.flops[g, np.maximum(fallback, 0)], 0.0)
    gemm = np.where(rate_native > 0, rate_native, rate_fallback)
    runnable = gemm > 0

    dp = c.dp_ranks
    # the routed experts of a stage are spread over all tp x dp GPUs of it, whatever the EP split
    expert_bytes = t.expert_params[m] * t.routed_w_bytes[m, c.wdtype] / (np.maximum(tp * dp, c.ep) * pp)
    dense_bytes = ((t.linear_params[m] - t.expert_params[m]) * t.nonrouted_w_bytes[m, c.wdtype]
                   + t.embedding_params[m] * t.act_bytes) / n_gpu
    # MLA down-projections stay whole on every TP rank (ReplicatedLinear): the share TP does not split
    dense_bytes = dense_bytes + t.replicated_params[m] * t.attn_w_bytes[m, c.wdtype] * (1.0 - 1.0 / tp) / pp
    weights = dense_bytes + expert_bytes
    # what a step reads of them: an untied input embedding is a lookup of one row per token, not the table
    # (a tied one is read whole as the LM head's GEMM, which the LM head bytes already count)
    lookup_bytes = np.maximum(t.embedding_params[m] - t.lm_head_params[m], 0.0) * t.act_bytes / n_gpu
    dense_read = dense_bytes - lookup_bytes
    kv_bytes_el = t.kv_bits[c.kvdtype] / 8.0
    kv_heads_gpu = np.ceil(t.kv_heads[m] / tp)
    elems_layer_gpu = np.where(t.is_mla[m], t.kv_elems_per_layer[m],
                               t.kv_elems_per_layer[m] * kv_heads_gpu / t.kv_heads[m])
    full_l, win_l, win = t.full_layers[m], t.window_layers[m], t.window_tokens[m]
    kv_tok_layer = kv_bytes_el * elems_layer_gpu

    def kv_seq_bytes(ctx: F) -> F:
        return _kv_seq_bytes(kv_tok_layer, full_l, win_l, win, pp, ctx)

    nccl = np.zeros_like(tp)
    for k, v in sorted(t.nccl_bytes_by_tp.items()):
        nccl = np.where(n_gpu >= k, v, nccl)
    overhead = t.other_overhead_bytes + nccl
    seq_full = kv_seq_bytes(np.maximum(c.context_tok, 1.0))
    ctx_mean = isl + osl / 2.0
    seq_mean = kv_seq_bytes(ctx_mean)
    cap = capacity(t, c, weights, overhead, runnable, seq_full, seq_mean)
    activations, kv_pool, fits, max_conc, cap_mean = cap.activations, cap.kv_pool, cap.fits, cap.max_conc, cap.cap_mean
    # an offline job's first wave is the batch each replica admits at once, of the job's requests (its load; a
    # job that does not say: ASSUMED_REQUESTS_PER_CLIENT per sequence admitted, as a closed-loop run)
    first_wave = np.where(c.mode == MODE_OFFLINE,
                          np.where(c.load > 0, np.minimum(cap_mean * np.maximum(c.replicas, 1.0) * dp
                                                          / np.maximum(c.load, 1.0), 1.0),
                                   1.0 / ASSUMED_REQUESTS_PER_CLIENT), c.first_wave_share)

    heads_dims = t.heads[m] * t.attn_dims[m]
    attn_prefill = _attn_prefill(heads_dims, full_l, win_l, win, isl)
    lin_tok = 2.0 * t.active_linear_params[m]
    dec_fixed = lin_tok + 2.0 * t.lm_head_params[m]
    dec_tok = dec_fixed + 2.0 * heads_dims * _attended(ctx_mean, full_l, win_l, win)
    return Static(
        runnable=runnable, fits=fits, gemm_flops_s=np.maximum(gemm, 1.0),
        attn_flops_s=np.maximum(t.flops[g, 0], 1.0), bw_bytes_s=t.bw_bytes_s[g], link_bytes_s=t.link_bytes_s[g],
        weights=weights, dense_weights=dense_read, expert_weights=expert_bytes, activations=activations,
        overhead=overhead, kv_pool=kv_pool, seq_full=seq_full, seq_mean=seq_mean, max_conc_replica=max_conc,
        cap_mean=cap_mean, isl=isl, osl=osl, tp=tp, pp=pp, n_gpu=n_gpu, replicas=np.maximum(c.replicas, 1.0) * dp,
        max_batched_tok=c.max_batched_tok, mode=c.mode, load=c.load, lin_flops_tok=lin_tok, dec_flops_tok=dec_tok,
        attn_prefill_flops=attn_prefill, ar_bytes_tok=hidden * t.act_bytes,
        ar_count=np.where(tp > 1, t.allreduces_per_layer[m] * t.layers[m], 0.0), ar_ring_factor=2.0 * (tp - 1.0) / tp,
        layers=t.layers[m], experts=t.num_experts[m], experts_per_token=t.experts_per_token[m],
        kv_tok_layer_bytes=kv_tok_layer, full_layers=full_l, window_layers=win_l, window_tok=win,
        heads_dims=heads_dims, dec_fixed_flops_tok=dec_fixed, max_num_seqs=c.max_num_seqs,
        context_tok=np.maximum(c.context_tok, 1.0), first_wave_share=first_wave,
        dp=dp, a2a_bytes_tok=a2a_bytes_per_token(t, c, dp), a2a_count=np.where(c.ep > 1.0, 2.0 * t.moe_layers[m], 0.0),
        moe_layers=t.moe_layers[m],
    )
