"""The analytic cost model: memory, prefill, decode step and serving dynamics, over arrays of candidates.

Pure numpy: no web framework or database here. A candidate is one (model, GPU, weight dtype, KV dtype,
engine, parallel layout, engine settings, workload); a batch of candidates is a struct of equal-length
arrays (``Candidates``), scored in one pass by ``evaluate``. Catalog facts are gathered once into
``Tables`` (one row per model, GPU, dtype), and candidates hold integer indices into them.

Units are in the names: ``_s`` seconds, ``_bytes`` bytes, ``_flops`` floating-point operations
(a multiply-add counts 2), ``_tok`` tokens. Times are per replica unless the name says otherwise.

The physics (each term is a roofline over the catalog's datasheet figures, scaled by fitted efficiencies):

* Memory per GPU: weights (bits per weight from the dtype, scales included; embeddings in 16 bits; split
  over TP x PP, experts included), activations of one forward pass of ``max_num_batched_tokens`` tokens
  plus FP32 sampling logits, a fixed reserve (CUDA context, graphs, workspaces) and NCCL buffers. The KV
  budget follows the engine: a share of total memory (vLLM) or of what is free (TensorRT-LLM).
* KV per token and GPU: 2 x layers/PP x ceil(KV heads / TP) x head dim x bytes; MLA latents are not
  split by TP; sliding-window layers hold at most the window.
* Prefill: linear FLOPs of the active parameters plus the causal attention term (quadratic in the
  prompt), over dense FLOPS x ``eff_flops``, floored by reading the weights once; two ring all-reduces
  per layer under TP.
* Decode step: (weights touched + KV read for every sequence) over bandwidth x ``eff_bw`` against the
  batch's FLOPs over compute, smoothly whichever binds, plus all-reduces and a per-step overhead. MoE
  layers read only the experts the batch routes to (expected distinct experts of ``b`` tokens).
* Serving (continuous batching): with ``B`` sequences decoding, each step also carries on average
  ``B x I / O`` prompt tokens (I, O: input and output lengths) of arriving requests (chunked prefill), so
  ``TPOT = t_decode(B) + B x (I/O) x c_prefill``. Closed loops solve Little's law for ``B``; open loops
  (request rate) add M/D/1 queueing to TTFT; when the load exceeds what ``max_num_seqs`` or the KV cache
  holds, requests queue and TTFT absorbs the wait. The first wave of a closed loop (all clients at once)
  is the fitted ``wave`` share of that wave's prefill queue, weighted by the workload's
  ``first_wave_share`` (clients / requests of a benchmark run; 0 in a steady state). A decoding request's
  steps carry the prompts of the other requests only: ``TPOT = t_decode(B) + B x (I/O) x c_prefill x (C-1)/C``
  in a closed loop of C clients.

``step_model`` gathers the step-time terms of each candidate (``StepModel``: a decode step at any batch and
context, the added time of prompt tokens carried by a step, a prefill on its own); the serving solvers here
and the scheduler simulation (simulate.py) both time steps with it.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit
from numpy.typing import NDArray

from gpu_catalog.loader import Catalog
from gpu_catalog.schema import CostConstants
from service.core.architecture import arch_numbers

F = NDArray[np.float64]
I_ = NDArray[np.int64]

GIB_BYTES = 1024**3           # bytes in one GiB (binary unit, as engines log memory)
GB_BYTES = 1e9                # bytes in one GB (decimal unit, as datasheets state memory)
MB_BYTES = 1e6

COMPUTE_DTYPES = ("fp16", "bf16", "fp8", "int8", "fp4")

MODE_OFFLINE, MODE_CONCURRENCY, MODE_RATE, MODE_STATIC = 0, 1, 2, 3
MODES = {"offline": MODE_OFFLINE, "concurrency": MODE_CONCURRENCY, "request_rate": MODE_RATE,
         "static_batch": MODE_STATIC}

BUDGET_SHARE_OF_TOTAL, BUDGET_SHARE_OF_FREE = 0, 1

PARAM_NAMES = ("eff_flops", "eff_bw", "step_overhead_s", "ttft_fixed_s", "comm_eff", "allreduce_latency_s", "wave")

# Smooth maximum of the memory and compute times of a step: (a^4 + b^4)^(1/4) (``_smooth_max``). A hard
# max has no gradient where the two cross, which the fit needs; the 4th power stays within 19% of
# max(a, b) at a = b.
# Root-finding steps of the closed- and open-loop batch (Illinois regula falsi: the residual of
# Little's law is below 1e-6 of the load after 12 on the catalog's models; benchmarks/predict_speed.py
# --check-root measures it), the share of the saturated rate an overloaded open loop is evaluated at,
# and the floor on decode steps (a one-token output still occupies the batch for part of a step).
_ROOT_STEPS = 12
# Candidates per block of the root finding (_root_block): a block's 32 working rows (16 KB) stay in the L1
# cache over its steps, and each step runs on 4 candidates at once (AVX2). Measured on the 634,029 serving
# solves of the 24 search_speed requirements, against the loop before blocks: 64 ~0.6 of its time; 32 and
# 128 ~0.67; 512 slower than no blocks.
_ROOT_BLOCK = 64
_SATURATION_SHARE = 0.999
_MIN_DECODE_STEPS = 0.5
# Smallest prefill chunk an engine schedules when decodes fill the token budget (vLLM and TensorRT-LLM
# always make progress on a waiting prompt; the size is a modelling choice, not an engine constant, and
# the fitted efficiencies absorb it); and the utilisation at which the prefill queue is capped (beyond
# it the steady state does not exist and the closed loop's own limit, Little's law, takes over).
_MIN_CHUNK_TOK = 512.0
_MAX_PREFILL_UTILISATION = 0.95
# Requests a closed-loop benchmark run (or an offline job) sends per client (per sequence admitted) when its
# source does not say: InferenceX's runs use num_prompts = 10 x concurrency (the assumption for every stored
# run: none states its count). The first wave (every client at once) is then a tenth of the measured requests.
ASSUMED_REQUESTS_PER_CLIENT = 10.0
# No bound on the requests ahead (open loops); finite so that a zero utilisation times it stays zero.
_NO_LIMIT = 1e30


@dataclass(frozen=True)
class Tables:
    """Catalog facts as arrays, indexed by position in the id lists."""

    model_ids: list[str]
    gpu_ids: list[str]
    wdtype_ids: list[str]
    kvdtype_ids: list[str]
    # models
    layers: F
    hidden: F
    heads: F
    kv_heads: F
    head_dim: F
    attn_dims: F                # qk + v per-head dimensions
    vocab: F
    linear_params: F            # all non-embedding weights, elements
    active_linear_params: F     # non-embedding weights one token uses
    expert_params: F            # routed experts (part of linear_params)
    lm_head_params: F
    embedding_params: F         # input embedding + untied LM head, stored in 16 bits
    num_experts: F
    experts_per_token: F
    mlp_width: F                # MLP intermediate elements one token materialises
    kv_elems_per_layer: F       # K+V elements per token per full-attention layer (whole model)
    is_mla: NDArray[np.bool_]
    full_layers: F
    window_layers: F
    window_tokens: F            # 0 = no window
    max_context_tok: F
    # GPUs
    mem_bytes: F
    bw_bytes_s: F
    flops: F                    # (gpu, compute dtype) dense FLOPS; 0 = no tensor path
    link_bytes_s: F             # one-direction GPU-GPU bandwidth
    gpus_per_node: F
    price_usd_per_gpu_hour: F   # NaN where the catalog has no price
    # dtypes
    w_bits: F
    w_native_compute: I_        # index into COMPUTE_DTYPES
    w_fallback_compute: I_      # -1 = none
    kv_bits: F
    # constants
    other_overhead_bytes: float
    nccl_bytes_by_tp: dict[int, float]
    act_bytes: float
    logits_bytes: float

    def index(self) -> dict[str, dict[str, int]]:
        return {"model": {m: i for i, m in enumerate(self.model_ids)},
                "gpu": {g: i for i, g in enumerate(self.gpu_ids)},
                "wdtype": {d: i for i, d in enumerate(self.wdtype_ids)},
                "kvdtype": {d: i for i, d in enumerate(self.kvdtype_ids)}}


def build_tables(catalog: Catalog, constants: CostConstants, extra_models: list[Any] | None = None) -> Tables:
    """Gather the catalog (and any inline model specs) into arrays, once."""
    models = [*catalog.models, *(extra_models or [])]
    a = [arch_numbers(m) for m in models]

    def arr(values: list[float]) -> F:
        return np.asarray(values, dtype=np.float64)

    mlp = []
    for m in models:
        if m.num_experts and m.experts_per_token:
            width = (m.moe_intermediate_size or m.intermediate_size) * (
                m.experts_per_token + (m.num_shared_experts or 0))
        else:
            width = m.intermediate_size
        mlp.append(float(width))
    flops = np.zeros((len(catalog.gpus), len(COMPUTE_DTYPES)))
    for gi, g in enumerate(catalog.gpus):
        for di, d in enumerate(COMPUTE_DTYPES):
            flops[gi, di] = (g.dense_tflops.get(d) or 0.0) * 1e12  # type: ignore[call-overload]
        if flops[gi, 1] == 0:       # no BF16 tensor path (Volta, Turing): engines run BF16 models in FP16
            flops[gi, 1] = flops[gi, 0]
    cidx = {d: i for i, d in enumerate(COMPUTE_DTYPES)}
    mem = constants.memory
    return Tables(
        model_ids=[m.id for m in models], gpu_ids=[g.id for g in catalog.gpus],
        wdtype_ids=[d.id for d in catalog.weight_dtypes], kvdtype_ids=[d.id for d in catalog.kv_dtypes],
        layers=arr([x.num_layers for x in a]), hidden=arr([x.hidden_size for x in a]),
        heads=arr([x.num_attention_heads for x in a]), kv_heads=arr([x.num_kv_heads for x in a]),
        head_dim=arr([x.head_dim for x in a]), attn_dims=arr([x.attn_qk_dim + x.attn_v_dim for x in a]),
        vocab=arr([m.vocab_size for m in models]),
        linear_params=arr([max(x.total_params - x.embedding_params, 0.5 * x.total_params) for x in a]),
        active_linear_params=arr([max(x.active_params - x.embedding_params, 0.5 * x.active_params) for x in a]),
        expert_params=arr([x.expert_params for x in a]), lm_head_params=arr([x.lm_head_params for x in a]),
        embedding_params=arr([min(x.embedding_params, 0.5 * x.total_params) for x in a]),
        num_experts=arr([x.num_experts for x in a]), experts_per_token=arr([x.experts_per_token for x in a]),
        mlp_width=arr(mlp), kv_elems_per_layer=arr([x.kv_elems_per_token_per_layer for x in a]),
        is_mla=np.asarray([x.is_mla for x in a]), full_layers=arr([x.full_attn_layers for x in a]),
        window_layers=arr([x.window_layers for x in a]), window_tokens=arr([x.window_tokens for x in a]),
        max_context_tok=arr([x.max_context_tokens for x in a]),
        mem_bytes=arr([g.memory_gb * GB_BYTES for g in catalog.gpus]),
        bw_bytes_s=arr([g.memory_bw_gb_s * GB_BYTES for g in catalog.gpus]),
        flops=flops,
        link_bytes_s=arr([g.interconnect_bw_gb_s_bidir / 2 * GB_BYTES for g in catalog.gpus]),
        gpus_per_node=arr([g.max_gpus_per_node for g in catalog.gpus]),
        price_usd_per_gpu_hour=arr([g.price_usd_per_gpu_hour if g.price_usd_per_gpu_hour else np.nan
                                    for g in catalog.gpus]),
        w_bits=arr([d.bits_per_weight for d in catalog.weight_dtypes]),
        w_native_compute=np.asarray([cidx[d.native_compute] for d in catalog.weight_dtypes], dtype=np.int64),
        w_fallback_compute=np.asarray([cidx[d.fallback_compute] if d.fallback_compute else -1
                                       for d in catalog.weight_dtypes], dtype=np.int64),
        kv_bits=arr([d.bits_per_element for d in catalog.kv_dtypes]),
        other_overhead_bytes=mem.other_overhead_gib * GIB_BYTES,
        nccl_bytes_by_tp={int(k): v * MB_BYTES for k, v in mem.nccl_mb_by_tp.items()},
        act_bytes=float(mem.activation_bytes_per_element), logits_bytes=float(mem.logits_bytes_per_element),
    )


@dataclass
class Candidates:
    """Equal-length arrays, one entry per candidate deployment x workload."""

    model: I_
    gpu: I_
    wdtype: I_
    kvdtype: I_
    budget: I_                  # BUDGET_SHARE_OF_TOTAL | BUDGET_SHARE_OF_FREE
    tp: F
    pp: F
    ep: F                       # expert-parallel degree (routed experts split over max(tp, ep) GPUs)
    replicas: F
    max_num_seqs: F
    max_batched_tok: F
    mem_fraction: F             # vLLM gpu_memory_utilization, or TensorRT-LLM kv free fraction
    input_tok: F
    output_tok: F
    mode: I_
    load: F                     # concurrency (clients, whole deployment), request rate (req/s), or batch size
    context_tok: F              # longest sequence the deployment must hold (max_model_len)
    # closed loop: share of the measured requests sent in the first wave (every client at once): clients /
    # requests of a benchmark run, 0 in a steady state (the default of a prediction)
    first_wave_share: F

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    def take(self, idx: NDArray[Any]) -> Candidates:
        return Candidates(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})


@dataclass
class Params:
    """Fitted efficiencies, one value per candidate (or scalars that broadcast)."""

    eff_flops: F
    eff_bw: F
    step_overhead_s: F
    ttft_fixed_s: F
    comm_eff: F
    allreduce_latency_s: F
    wave: F

    @classmethod
    def from_matrix(cls, m: F) -> Params:
        """``m`` has one column per PARAM_NAMES entry."""
        return cls(*(m[..., i] for i in range(len(PARAM_NAMES))))


@dataclass
class Result:
    fits: NDArray[np.bool_]
    runnable: NDArray[np.bool_]             # the GPU has a compute path for the dtype
    weights_bytes: F                        # per GPU
    kv_cache_bytes: F                       # per GPU, the KV pool
    activations_bytes: F
    overhead_bytes: F
    kv_bytes_per_seq: F                     # per GPU, one sequence of context_tok
    max_concurrency: F                      # whole deployment, sequences of context_tok held at once
    batch: F                                # sequences decoding per replica in steady state
    ttft_s: F
    tpot_s: F
    e2e_s: F
    output_tok_s: F                         # whole deployment
    total_tok_s: F
    requests_s: F
    prefill_s: F                            # one prompt alone, no queueing
    overloaded: NDArray[np.bool_]           # open loop above capacity: TTFT grows without bound
    compute_bound_share: F                  # t_compute / (t_compute + t_memory) of the steady decode step
    # (n, 3) factors on TTFT, TPOT and throughput from users' measurements nearby (residuals.corrected);
    # None: no correction. A simulation of the same deployment is scaled by the same factors.
    correction: F | None = None


def _smooth_max(a: F, b: F) -> F:
    """(a^4 + b^4)^(1/4), written with products and square roots (several times faster than powers); on
    floats, compiled: ``_smooth_max_f``."""
    hi = np.maximum(np.maximum(a, b), 1e-30)
    r = np.minimum(a, b) / hi
    r *= r
    r *= r
    return hi * np.sqrt(np.sqrt(1.0 + r))


@dataclass
class Static:
    """Everything about a candidate that does not depend on the fitted parameters (computed once)."""

    runnable: NDArray[np.bool_]
    fits: NDArray[np.bool_]
    gemm_flops_s: F              # peak dense FLOPS of the GEMM dtype, per GPU
    attn_flops_s: F              # peak 16-bit FLOPS (attention), per GPU
    bw_bytes_s: F
    link_bytes_s: F
    weights: F                   # bytes per GPU
    dense_weights: F             # bytes per GPU that every step reads
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
    ar_count: F                  # all-reduces per forward pass of the replica (2 per layer under TP)
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
    fits: NDArray[np.bool_]
    max_conc: F                  # sequences of the full context the KV pool holds (up to max_num_seqs)
    cap_mean: F                  # sequences of the workload's mean context it holds (1 to max_num_seqs)


def capacity(t: Tables, c: Candidates, weights: F, overhead: F, runnable: NDArray[np.bool_], seq_full: F,
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
    return Capacity(
        activations=activations, kv_pool=kv_pool, fits=(non_kv < total_mem) & (kv_pool >= seq_full) & runnable,
        max_conc=np.minimum(np.floor(kv_pool / np.maximum(seq_full, 1.0)), c.max_num_seqs),
        cap_mean=np.maximum(np.minimum(np.floor(kv_pool / np.maximum(seq_mean, 1.0)), c.max_num_seqs), 1.0))


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

    w_bytes_per_param = t.w_bits[c.wdtype] / 8.0
    expert_bytes = t.expert_params[m] * w_bytes_per_param / (np.maximum(tp, c.ep) * pp)
    dense_bytes = ((t.linear_params[m] - t.expert_params[m]) * w_bytes_per_param
                   + t.embedding_params[m] * t.act_bytes) / n_gpu
    weights = dense_bytes + expert_bytes
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
                          np.where(c.load > 0, np.minimum(cap_mean * np.maximum(c.replicas, 1.0)
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
        weights=weights, dense_weights=dense_bytes, expert_weights=expert_bytes, activations=activations,
        overhead=overhead, kv_pool=kv_pool, seq_full=seq_full, seq_mean=seq_mean, max_conc_replica=max_conc,
        cap_mean=cap_mean, isl=isl, osl=osl, tp=tp, pp=pp, n_gpu=n_gpu, replicas=np.maximum(c.replicas, 1.0),
        max_batched_tok=c.max_batched_tok, mode=c.mode, load=c.load, lin_flops_tok=lin_tok, dec_flops_tok=dec_tok,
        attn_prefill_flops=attn_prefill, ar_bytes_tok=hidden * t.act_bytes,
        ar_count=np.where(tp > 1, 2.0 * t.layers[m], 0.0), ar_ring_factor=2.0 * (tp - 1.0) / tp,
        layers=t.layers[m], experts=t.num_experts[m], experts_per_token=t.experts_per_token[m],
        kv_tok_layer_bytes=kv_tok_layer, full_layers=full_l, window_layers=win_l, window_tok=win,
        heads_dims=heads_dims, dec_fixed_flops_tok=dec_fixed, max_num_seqs=c.max_num_seqs,
        context_tok=np.maximum(c.context_tok, 1.0), first_wave_share=first_wave,
    )


def evaluate(t: Tables, c: Candidates, p: Params) -> Result:
    """Score every candidate. Vectorised; no Python loop over candidates."""
    return serve(static_terms(t, c), p)


def take_rows(obj: Any, idx: NDArray[np.int64]) -> Any:
    """The same dataclass with every per-candidate array indexed by ``idx``."""
    return type(obj)(**{f.name: (v[idx] if isinstance(v := getattr(obj, f.name), np.ndarray) and v.ndim else v)
                        for f in fields(obj)})


ModeSplit = list[tuple[NDArray[np.int64], Static, int]]


def split_modes(s: Static) -> ModeSplit:
    """The candidates grouped by workload mode (each group is served by its own branch)."""
    return [(idx := np.flatnonzero(s.mode == mv), take_rows(s, idx), int(mv)) for mv in np.unique(s.mode)]


def serve(s: Static, p: Params, split: ModeSplit | None = None) -> Result:
    """Prefill, decode and serving dynamics of candidates whose static terms are known.

    ``split`` (from ``split_modes(s)``) saves regrouping when the same candidates are served many times."""
    n = len(s.isl)
    p = Params(*(np.broadcast_to(np.asarray(getattr(p, name), dtype=np.float64), (n,)) for name in PARAM_NAMES))
    modes = np.unique(s.mode) if split is None else [mv for _, _, mv in split]
    if len(modes) <= 1:    # one mode (or no candidates at all)
        return _serve_mode(s, p, int(modes[0]) if len(modes) else MODE_OFFLINE)
    parts = [(idx, _serve_mode(sub, take_rows(p, idx), mv)) for idx, sub, mv in (split or split_modes(s))]
    out: dict[str, NDArray[Any]] = {}
    for f in fields(Result):
        first = getattr(parts[0][1], f.name)
        if first is None:       # correction: set only after serving (residuals.corrected)
            continue
        arr = np.empty(n, dtype=first.dtype)
        for idx, res in parts:
            arr[idx] = getattr(res, f.name)
        out[f.name] = arr
    return Result(**out)


@dataclass
class StepModel:
    """Time of one engine step of a replica, per candidate, under fitted parameters: what the serving
    solvers below and the scheduler simulation (service/core/simulate.py) are both built from.

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
    weights_read_s: F            # reading every stage's weights once
    c_prefill_s: F               # prefill_tok_s at the workload's prompt length
    prefill_compute_s: F         # compute of the workload's whole prompt alone
    prefill_alone_s: F           # the workload's prompt alone on an idle replica (no step overhead)
    log_miss: F                  # ln(1 - experts per token / experts); -inf for dense models
    moe: NDArray[np.bool_]
    dense_s: F
    expert_s: F
    seq_s: F                     # KV read of one sequence at the workload's mean context
    flop_s_seq: F                # compute of one decoded token at the workload's mean context
    comm_fixed_s: F
    comm_seq_s: F
    step_fixed_s: F              # pipeline hand-offs + per-step overhead
    step_overhead_s: F
    ttft_fixed_s: F

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
        stage = _smooth_max(t_mem, t_cmp) + self.comm_fixed_s + b * self.comm_seq_s
        return pp * stage + self.step_fixed_s, t_cmp / (t_cmp + t_mem)

    def context_terms(self, ctx_tok: F) -> tuple[F, F]:
        """At mean context ``ctx_tok``: the time to read one sequence's KV cache, and the compute of one decoded
        token (``seq_s`` and ``flop_s_seq`` at the workload's mean context)."""
        return (self.s.kv_seq_bytes(ctx_tok) / self.bw_bytes_s,
                self.s.dec_flops(ctx_tok) / (self.s.n_gpu * self.gemm_rate_flops_s))

    def prefill_tok_s(self, prompt_tok: F) -> F:
        """Marginal replica time of one token of a ``prompt_tok``-token prompt carried by a decode step
        (inside a full pipeline)."""
        s = self.s
        return ((s.lin_flops_tok / self.gemm_rate_flops_s + s.attn_prefill(prompt_tok) / prompt_tok
                 / self.attn_rate_flops_s) / s.n_gpu + self.comm_per_tok_s / self.pp)

    def prompt_compute_s(self, prompt_tok: F) -> F:
        """Compute time of a whole ``prompt_tok``-token prompt prefilled alone (all stages in turn)."""
        s = self.s
        return (s.lin_flops_tok * prompt_tok / (s.tp * self.gemm_rate_flops_s)
                + s.attn_prefill(prompt_tok) / (s.tp * self.attn_rate_flops_s))

    def prefill_only_s(self, compute_s: Any, tokens: Any) -> Any:
        """A step that only prefills ``tokens`` prompt tokens whose compute takes ``compute_s``: compute
        against reading the weights once per stage, plus all-reduces and stage hand-offs (no per-step
        overhead). Plain arithmetic, so it takes arrays or, on ``one(i)``, floats."""
        return (_smooth_max(compute_s, self.weights_read_s) + self.comm_per_tok_s * tokens + self.ar_latency_s
                + self.pp_handoff_s + (self.pp - 1.0) * tokens * self.ar_bytes_tok / self.link_bytes_s)

    def carried_prefill_s(self, batch: float, tokens: float, compute_s: float) -> float:
        """Time a decode step of ``batch`` sequences gains by carrying ``tokens`` prompt tokens whose marginal
        compute is ``compute_s`` (tokens x ``prefill_tok_s``): that compute, against reading the routed experts
        the prompt tokens touch beyond those the decodes read (MoE; a dense step already reads every weight,
        so there it is the compute). Floats, on ``one(i)``; the simulation's compiled loop calls the function."""
        return float(_carried_prefill_f(float(batch), float(tokens), float(compute_s), float(self.pp),
                                        float(self.log_miss), float(self.expert_s), bool(self.moe)))

    def one(self, i: int) -> StepModel:
        """Candidate ``i`` alone: its Static as one-row arrays, every other field a float."""
        out: dict[str, Any] = {"s": self.s if len(self.s.isl) == 1 else take_rows(self.s, np.asarray([i]))}
        for f in fields(self):
            if f.name != "s":
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
    # marginal replica time of one prompt token inside a full pipeline (chunks mixed into decode steps)
    c_prefill = (s.lin_flops_tok / gemm_rate + s.attn_prefill_flops / isl / attn_rate) / s.n_gpu + comm_per_tok / pp
    # one prompt alone: all stages in turn, weights read once per stage
    prefill_compute = s.lin_flops_tok * isl / (tp * gemm_rate) + s.attn_prefill_flops / (tp * attn_rate)
    pp_handoff = (pp - 1.0) * p.allreduce_latency_s
    with np.errstate(divide="ignore"):
        log_miss = np.log(1.0 - s.experts_per_token / s.experts)   # -inf for dense models (every expert)
    sm = StepModel(
        s=s, pp=pp, gemm_rate_flops_s=gemm_rate, attn_rate_flops_s=attn_rate, bw_bytes_s=bw, link_bytes_s=link,
        comm_per_tok_s=comm_per_tok, ar_latency_s=s.ar_count * p.allreduce_latency_s, pp_handoff_s=pp_handoff,
        ar_bytes_tok=s.ar_bytes_tok, weights_read_s=s.weights * pp / bw, c_prefill_s=c_prefill,
        prefill_compute_s=prefill_compute, prefill_alone_s=prefill_compute, log_miss=log_miss,
        moe=s.expert_weights > 0, dense_s=s.dense_weights / bw, expert_s=s.expert_weights / bw,
        seq_s=s.seq_mean / bw, flop_s_seq=s.dec_flops_tok / (s.n_gpu * gemm_rate),
        comm_fixed_s=(s.ar_count / pp) * p.allreduce_latency_s,
        comm_seq_s=(s.ar_count / pp) * s.ar_ring_factor * s.ar_bytes_tok / link,
        step_fixed_s=pp_handoff + p.step_overhead_s, step_overhead_s=p.step_overhead_s, ttft_fixed_s=p.ttft_fixed_s)
    sm.prefill_alone_s = sm.prefill_only_s(prefill_compute, isl)
    return sm


# The serving solve's per-candidate inputs, in ``_serve_kernel``'s argument order. Only ``per_replica`` (the
# load over the replicas) depends on the replica count or the load: ``ServeInputs`` keeps the rest.
KERNEL_INPUTS = ("isl", "osl", "pp", "per_replica", "cap_mean", "max_batched_tok", "c_prefill", "prefill_alone",
                 "dense_s", "expert_s", "log_miss", "seq_s", "flop_s_seq", "comm_fixed_s", "comm_seq_s",
                 "step_fixed_s", "step_overhead_s", "ttft_fixed_s", "wave")
_ROW = {name: k for k, name in enumerate(KERNEL_INPUTS)}


@dataclass
class ServeInputs:
    """``_serve_kernel``'s inputs of some candidates, a row per input (``KERNEL_INPUTS``) and a column per
    candidate: built once, solved at any load or replica count (``solve_at``) without the step model again
    (the recommendation search solves its units at many replica counts)."""

    moe: NDArray[np.bool_]
    rows: F                                     # (len(KERNEL_INPUTS), n), C-ordered: each row is contiguous

    @classmethod
    def of(cls, s: Static, p: Params, sm: StepModel | None = None) -> ServeInputs:
        sm = step_model(s, p) if sm is None else sm
        n = len(s.isl)
        rows = np.empty((len(KERNEL_INPUTS), n))
        for k, v in enumerate((s.isl, s.osl, s.pp, s.load / s.replicas, s.cap_mean, s.max_batched_tok,
                               sm.c_prefill_s, sm.prefill_alone_s, sm.dense_s, sm.expert_s, sm.log_miss, sm.seq_s,
                               sm.flop_s_seq, sm.comm_fixed_s, sm.comm_seq_s, sm.step_fixed_s, p.step_overhead_s,
                               p.ttft_fixed_s, p.wave * s.first_wave_share)):
            rows[k] = v
        return cls(moe=np.array(np.broadcast_to(sm.moe, (n,)), dtype=np.bool_), rows=rows)

    def row(self, name: str) -> F:
        return self.rows[_ROW[name]]

    def take(self, idx: NDArray[np.int64], replicas: F, load: float) -> ServeInputs:
        """Candidates ``idx`` at ``replicas`` each (at least one) sharing ``load``."""
        return self.expand(idx, per_replica=load / np.maximum(replicas, 1.0))

    def expand(self, idx: NDArray[np.int64], **rows: F) -> ServeInputs:
        """Candidates ``idx`` (repeats allowed), with the inputs named in ``rows`` set."""
        out = ServeInputs(moe=self.moe[idx], rows=np.take(self.rows, idx, axis=1))
        for name, v in rows.items():
            out.rows[_ROW[name]] = v
        return out

    def solve(self, mode_value: int) -> tuple[F, F, F, F, F, NDArray[np.bool_]]:
        """``_serve_kernel``'s answer (batch, TTFT, TPOT, requests/s per replica, compute share, overloaded)."""
        return _solve_parts(int(mode_value), len(self.moe), lambda a, b: (self.moe[a:b], self.rows[:, a:b]))

    def solve_at(self, idx: NDArray[np.int64], replicas: F, load: float, mode_value: int,
                 finish: Finish | None = None) -> tuple[F, F, F, F, F, NDArray[np.bool_]]:
        """``self.take(idx, replicas, load).solve(mode_value)``, each part of the candidates gathered by the
        thread that solves it (``finish``: see ``_solve_parts``)."""
        per_replica = load / np.maximum(replicas, 1.0)

        def inputs(a: int, b: int) -> tuple[NDArray[np.bool_], F]:
            part = idx[a:b]
            rows = np.take(self.rows, part, axis=1)
            rows[_ROW["per_replica"]] = per_replica[a:b]
            return self.moe[part], rows

        return _solve_parts(int(mode_value), len(idx), inputs, finish)


# What a caller does with each part of a split solve's answer, in the thread that solved it: called with the
# part's first and end candidate, then its batch, TTFT, TPOT, requests/s per replica, compute share, overloaded.
Finish = Callable[[int, int, F, F, F, F, F, NDArray[np.bool_]], None]


def _solve_parts(mode: int, n: int, inputs: Callable[[int, int], tuple[NDArray[np.bool_], F]],
                 finish: Finish | None = None) -> tuple[F, F, F, F, F, NDArray[np.bool_]]:
    """The compiled solve of ``n`` candidates whose moe flags and input rows ``inputs(a, b)`` gives for
    candidates a..b-1. Many candidates are split over the machine's cores: the compiled solve releases the GIL
    (as do numpy's gathers, scatters and arithmetic on arrays), each part writes its own slice of the answer,
    then hands it to ``finish``; each candidate's figures do not depend on the others in its call (a tested
    property)."""
    out = np.empty((5, n))
    over = np.empty(n, dtype=np.bool_)

    def part(a: int, b: int) -> None:
        moe, rows = inputs(a, b)
        arrays = (*rows, *out[:, a:b], over[a:b])         # the inputs, then the part's slices of the answer
        _serve_into(mode, moe, *arrays)
        if finish is not None:
            finish(a, b, out[0, a:b], out[1, a:b], out[2, a:b], out[3, a:b], out[4, a:b], over[a:b])

    chunks = min(_CORES * _CHUNKS_PER_CORE, n // _SPLIT_MIN_CANDIDATES)
    if _CORES <= 1 or chunks <= 1:
        part(0, n)
    else:
        # the caller's thread and the pool's take chunks in turn until none is left: a thread the machine does
        # not run for a while (other processes on the cores) holds up at most the chunk it has begun, not a
        # fixed share of the solve
        cut = [n * k // chunks for k in range(chunks + 1)]
        taken = itertools.count()          # next() on it is atomic under the GIL

        def drain() -> None:
            while (k := next(taken)) < chunks:
                part(cut[k], cut[k + 1])

        helpers = [_solver_pool().submit(drain) for _ in range(min(_CORES, chunks) - 1)]
        drain()
        for f in helpers:
            f.result()
    return out[0], out[1], out[2], out[3], out[4], over


def cgroup_cpus(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The CPUs the process's control group allows (a container's CPU limit), when it sets one: cgroup v2's
    ``cpu.max`` ("quota period", or "max" for none), else v1's ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``
    (-1 for none). A container sees every core of its host, but may run on only as many as its limit."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def usable_cores() -> int:
    """Cores the process may run on: its CPU affinity, within its control group's CPU limit."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    limit = cgroup_cpus()
    return max(1, min(cores, int(limit)) if limit else cores)


# Serving solves of at least twice this many candidates are split over the cores the process may run on: a
# part of ~1000 candidates takes ~0.35 ms (~340 ns each on the solves captured from search_speed), several
# times the ~66 us of handing a task to a pool thread and back (median, measured on the 2-core machine).
# Chunks per core: with two busy processes beside it on the 2-core machine, the 243 solves of the 24
# search_speed requirements took a steady 225-241 ms (median of 9, three runs) in two chunks per core, and
# 217-381 ms in one per core, where the caller waited on a thread the machine had set aside; unloaded, two
# per core cost ~5% (best of 9: 151-158 vs 145-152 ms).
_SPLIT_MIN_CANDIDATES = 1024
_CHUNKS_PER_CORE = 2
_CORES = usable_cores()
_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()


def _solver_pool() -> ThreadPoolExecutor:
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(max_workers=_CORES - 1, thread_name_prefix="serve-solve"))
        return _POOL[0]


def _serve_mode(s: Static, p: Params, mode_value: int) -> Result:
    """Prefill, decode and serving dynamics of candidates that all share one workload mode: the step model in
    numpy, the per-candidate solve compiled (``_serve_kernel``)."""
    sm = step_model(s, p)
    batch, ttft, tpot, x, share, overloaded = ServeInputs.of(s, p, sm).solve(mode_value)
    prefill_alone = sm.prefill_alone_s
    if mode_value == MODE_STATIC:
        # one batch of B prompts prefilled together (a prefill-only step of B prompts), then decodes
        B = batch
        prefill_b = sm.prefill_only_s(B * sm.prefill_compute_s, s.isl * B)
        step_b = tpot
        e2e_b = prefill_b + (s.osl - 1.0) * step_b
        ttft, x = prefill_b, B / e2e_b
    e2e = ttft + (s.osl - 1.0) * tpot
    requests_s = x * s.replicas
    return Result(
        fits=s.fits, runnable=s.runnable, weights_bytes=s.weights, kv_cache_bytes=s.kv_pool,
        activations_bytes=s.activations, overhead_bytes=s.overhead, kv_bytes_per_seq=s.seq_full,
        max_concurrency=s.max_conc_replica * s.replicas, batch=batch, ttft_s=ttft, tpot_s=tpot, e2e_s=e2e,
        output_tok_s=requests_s * s.osl, total_tok_s=requests_s * (s.isl + s.osl), requests_s=requests_s,
        prefill_s=prefill_alone, overloaded=overloaded, compute_bound_share=share,
    )


def warm_up() -> float:
    """Compile the serving solve (or load it from numba's on-disk cache) before a request needs it; seconds."""
    t0 = time.perf_counter()
    ones = np.ones(1)
    _serve_kernel(MODE_CONCURRENCY, np.zeros(1, dtype=np.bool_), *([ones] * 19))
    ServeInputs(moe=np.zeros(1, dtype=np.bool_), rows=np.ones((len(KERNEL_INPUTS), 1))).solve(MODE_CONCURRENCY)
    return time.perf_counter() - t0


@njit(cache=True, error_model="numpy")
def _smooth_max_f(a: float, b: float) -> float:
    """``_smooth_max`` on floats, compiled."""
    hi = max(a, b, 1e-30)
    r = min(a, b) / hi
    r *= r
    r *= r
    return hi * math.sqrt(math.sqrt(1.0 + r))


@njit(cache=True, error_model="numpy")
def _carried_prefill_f(batch: float, tokens: float, compute_s: float, pp: float, log_miss: float, expert_s: float,
                       moe: bool) -> float:
    """``StepModel.carried_prefill_s``, compiled (the scheduler simulation's loop calls it)."""
    if not moe:
        return compute_s
    # expected share of experts routed to by n tokens per stage: 1 - (1 - k/E)^n
    extra = math.expm1(batch / pp * log_miss) - math.expm1((batch + tokens) / pp * log_miss)
    return _smooth_max_f(compute_s, pp * expert_s * extra)


@njit(cache=True, error_model="numpy")
def _expert_read_f(b: float, expert_s: float, log_miss: float, moe: bool) -> float:
    """Time to read the routed experts a micro-batch of ``b`` tokens touches (MoE; 0 for a dense model)."""
    # expected share of experts the batch routes to: 1 - P(an expert is missed by all b tokens)
    return expert_s * -math.expm1(b * log_miss) if moe else 0.0


@njit(cache=True, error_model="numpy")
def _decode_step_at_f(b: float, pp: float, dense_s: float, expert_read_s: float, seq_s: float, flop_s_seq: float,
                      comm_fixed_s: float, comm_seq_s: float, step_fixed_s: float) -> tuple[float, float]:
    """``_decode_step_f`` given the micro-batch per stage ``b`` and its expert reads (the root finding computes
    those apart, so that the rest runs on several candidates at once)."""
    t_mem = dense_s + b * seq_s + expert_read_s
    t_cmp = b * flop_s_seq
    stage = _smooth_max_f(t_mem, t_cmp) + comm_fixed_s + b * comm_seq_s
    return pp * stage + step_fixed_s, t_cmp / (t_cmp + t_mem)


@njit(cache=True, error_model="numpy")
def _decode_step_f(batch: float, pp: float, dense_s: float, expert_s: float, log_miss: float, moe: bool,
                   seq_s: float, flop_s_seq: float, comm_fixed_s: float, comm_seq_s: float,
                   step_fixed_s: float) -> tuple[float, float]:
    """``StepModel.decode_step`` of one candidate at the workload's mean context (tests check they agree)."""
    b = max(batch / pp, 1e-9)
    return _decode_step_at_f(b, pp, dense_s, _expert_read_f(b, expert_s, log_miss, moe), seq_s, flop_s_seq,
                             comm_fixed_s, comm_seq_s, step_fixed_s)


@njit(cache=True, error_model="numpy")
def _ttft_f(b: float, step_s: float, arrivals: float, max_batched_tok: float, min_chunk: float, isl: float,
            c_prefill: float, alone: float, fixed_alone: float, ahead: float, wave_q: float, others: float) -> float:
    """Mean TTFT with ``b`` sequences decoding in steps of ``step_s``: the front end and the prompt alone, what
    its chunks add inside decode steps, the wait in the prefill queue (M/D/1 at ``arrivals`` per second, at most
    ``ahead`` prompts ahead) and half a step to the next one. ``others``: the share of the decoding batch that
    belongs to other requests (a closed loop of one client finds no decode running when it sends)."""
    chunk = max(max_batched_tok - b, min_chunk)
    busy = min(b, 1.0) * others
    extra = busy * max(isl * (step_s / chunk + c_prefill) - alone, 0.0)
    service = alone + extra
    rho = min(arrivals * service, _MAX_PREFILL_UTILISATION)
    rho_service = rho * service
    wait = min(rho_service / (2.0 * (1.0 - rho)), ahead * rho_service)
    return fixed_alone + wait + extra + busy * 0.5 * step_s + wave_q


@njit(cache=True, error_model="numpy")
def _falsi_point_f(hi: float, lo: float, f_hi: float, f_lo: float) -> tuple[float, bool, float]:
    """Regula falsi on the bracket [lo, hi]: where its secant crosses zero, whether there is a secant (the
    excess rises across the bracket), and the bracket's width."""
    width = hi - lo
    denom = f_hi - f_lo
    return hi - f_hi * width / (denom if denom > 0 else 1.0), denom > 0, width


# Rows of the root finding's working block (w[row * _ROOT_BLOCK + k] for its candidate k): one array with rows
# at constant offsets, so that the compiler can tell the rows apart and run each step on several candidates
# at once (SIMD).
(_W_HI, _W_LO, _W_F_HI, _W_F_LO, _W_SIDE, _W_PP, _W_DENSE, _W_EXPERT, _W_LOG_MISS, _W_MOE, _W_SEQ, _W_FLOP_SEQ,
 _W_COMM_FIXED, _W_COMM_SEQ, _W_STEP_FIXED, _W_IO, _W_C_PREFILL, _W_DEC_STEPS, _W_MAX_TOK, _W_MIN_CHUNK, _W_ISL,
 _W_ALONE, _W_FIXED_ALONE, _W_AHEAD, _W_WAVE_Q, _W_TARGET, _W_EXPERT_TERM, _W_XB, _W_B1, _W_B, _W_F0,
 _W_OUT, _W_OTHERS) = range(33)
_W_ROWS = _W_OTHERS + 1        # the rows named above


@njit(cache=True, error_model="numpy", nogil=True)
def _root_block(w: F, closed: bool, any_moe: bool) -> None:
    """The root finding of one block of ``_serve_kernel`` (every candidate of the block takes every step; the
    answer of one whose excess is not positive at the top end is the top end, as in the kernel's account)."""
    rb = _ROOT_BLOCK
    for it in range(_ROOT_STEPS + 2):
        if it == 0:
            for k in range(rb):
                w[_W_XB * rb + k] = w[_W_HI * rb + k]
        elif it == _ROOT_STEPS + 1:
            for k in range(rb):
                hi, lo, f_hi = w[_W_HI * rb + k], w[_W_LO * rb + k], w[_W_F_HI * rb + k]
                xb, secant, _ = _falsi_point_f(hi, lo, f_hi, w[_W_F_LO * rb + k])
                out = min(max(xb if secant else hi, lo), hi)
                out = out if f_hi > 0 else hi
                w[_W_OUT * rb + k] = out if w[_W_F0 * rb + k] > 0.0 else hi
            return
        else:
            for k in range(rb):
                hi, lo = w[_W_HI * rb + k], w[_W_LO * rb + k]
                xb, secant, width = _falsi_point_f(hi, lo, w[_W_F_HI * rb + k], w[_W_F_LO * rb + k])
                w[_W_XB * rb + k] = min(max(xb if secant else lo + 0.5 * width, lo), hi)
        for k in range(rb):         # _decode_step_f's micro-batch per stage, of batch b1
            b1 = max(w[_W_XB * rb + k], 1.0)
            w[_W_B1 * rb + k] = b1
            w[_W_B * rb + k] = max(b1 / w[_W_PP * rb + k], 1e-9)
        if any_moe:                 # (calls expm1: a loop of its own; a dense block's expert reads stay 0)
            for k in range(rb):
                w[_W_EXPERT_TERM * rb + k] = _expert_read_f(w[_W_B * rb + k], w[_W_EXPERT * rb + k],
                                                            w[_W_LOG_MISS * rb + k], w[_W_MOE * rb + k] > 0.0)
        for k in range(rb):
            xb = w[_W_XB * rb + k]
            b1 = w[_W_B1 * rb + k]
            st_b, _ = _decode_step_at_f(w[_W_B * rb + k], w[_W_PP * rb + k], w[_W_DENSE * rb + k],
                                        w[_W_EXPERT_TERM * rb + k], w[_W_SEQ * rb + k], w[_W_FLOP_SEQ * rb + k],
                                        w[_W_COMM_FIXED * rb + k], w[_W_COMM_SEQ * rb + k], w[_W_STEP_FIXED * rb + k])
            c_pre = w[_W_C_PREFILL * rb + k]
            others = w[_W_OTHERS * rb + k]
            tp_b = st_b + b1 * others * w[_W_IO * rb + k] * c_pre
            x_b = xb / (w[_W_DEC_STEPS * rb + k] * tp_b)
            target = w[_W_TARGET * rb + k]
            # closed loop (computed for an open loop too, and not used)
            t_b = _ttft_f(xb, st_b, x_b, w[_W_MAX_TOK * rb + k], w[_W_MIN_CHUNK * rb + k], w[_W_ISL * rb + k], c_pre,
                          w[_W_ALONE * rb + k], w[_W_FIXED_ALONE * rb + k], w[_W_AHEAD * rb + k],
                          w[_W_WAVE_Q * rb + k], others)
            fx = xb + x_b * t_b - target if closed else x_b - target
            if it == 0:
                w[_W_F_HI * rb + k] = fx
                w[_W_F0 * rb + k] = fx
                continue
            up = fx > 0.0
            side = w[_W_SIDE * rb + k]
            f_hi = w[_W_F_HI * rb + k]
            f_lo = w[_W_F_LO * rb + k]
            w[_W_HI * rb + k] = xb if up else w[_W_HI * rb + k]
            w[_W_LO * rb + k] = w[_W_LO * rb + k] if up else xb
            w[_W_F_HI * rb + k] = fx if up else (0.5 * f_hi if side < 0 else f_hi)
            w[_W_F_LO * rb + k] = (0.5 * f_lo if side > 0 else f_lo) if up else fx
            w[_W_SIDE * rb + k] = 1.0 if up else -1.0


@njit(cache=True, error_model="numpy", nogil=True)
def _serve_kernel(mode: int, moe: NDArray[np.bool_], isl: F, osl: F, pp: F, per_replica: F, cap_mean: F,
                  max_batched_tok: F, c_prefill: F, prefill_alone: F, dense_s: F, expert_s: F, log_miss: F,
                  seq_s: F, flop_s_seq: F, comm_fixed_s: F, comm_seq_s: F, step_fixed_s: F, step_overhead_s: F,
                  ttft_fixed_s: F, wave: F) -> Any:
    """``_serve_into`` with outputs of its own: decoding batch, TTFT, TPOT, requests/s per replica, compute share
    of the step, overloaded."""
    n = len(isl)
    out_b, out_ttft, out_tpot = np.empty(n), np.empty(n), np.empty(n)
    out_x, out_share = np.empty(n), np.empty(n)
    out_over = np.empty(n, dtype=np.bool_)
    _serve_into(mode, moe, isl, osl, pp, per_replica, cap_mean, max_batched_tok, c_prefill, prefill_alone, dense_s,
                expert_s, log_miss, seq_s, flop_s_seq, comm_fixed_s, comm_seq_s, step_fixed_s, step_overhead_s,
                ttft_fixed_s, wave, out_b, out_ttft, out_tpot, out_x, out_share, out_over)
    return out_b, out_ttft, out_tpot, out_x, out_share, out_over


@njit(cache=True, error_model="numpy", nogil=True)
def _serve_into(mode: int, moe: NDArray[np.bool_], isl: F, osl: F, pp: F, per_replica: F, cap_mean: F,
                max_batched_tok: F, c_prefill: F, prefill_alone: F, dense_s: F, expert_s: F, log_miss: F,
                seq_s: F, flop_s_seq: F, comm_fixed_s: F, comm_seq_s: F, step_fixed_s: F, step_overhead_s: F,
                ttft_fixed_s: F, wave: F, out_b: F, out_ttft: F, out_tpot: F, out_x: F, out_share: F,
                out_over: NDArray[np.bool_]) -> None:
    """The serving steady state of each candidate (one workload mode), written into the ``out_`` arrays:
    decoding batch, TTFT, TPOT, requests/s per replica, compute share of the step, overloaded.

    Continuous batching with chunked prefill. Saturated (offline): the KV cache or max_num_seqs is full.
    Closed loop of C clients per replica: Little's law, C = X(b) (TTFT(b) + (O-1) TPOT(b)) with X(b) the
    completion rate of a decoding batch b, rises with b, so its root is found by regula falsi; when even the
    cap leaves the law short, the batch is the cap and the rest of the clients wait for admission (TTFT
    absorbs what Little's law leaves over). Poisson arrivals at lam per replica: the decoding batch whose
    completion rate matches lam, and M/D/1 queueing for the prefill. Static batches: B sequences at once.

    Compiled by numba, candidates in the inner loops (so the root-finding steps of many candidates overlap, and
    run 4 at a time in SIMD registers)."""
    n = len(isl)
    io = np.empty(n)
    alone = np.empty(n)
    fixed_alone = np.empty(n)
    dec_steps = np.empty(n)
    min_chunk = np.empty(n)
    target = np.empty(n)
    ahead = np.empty(n)
    wave_q = np.empty(n)
    others = np.ones(n)
    lo, hi, f_lo, f_hi, side = np.zeros(n), np.empty(n), np.empty(n), np.empty(n), np.zeros(n)
    closed = mode == MODE_CONCURRENCY
    for i in range(n):
        out_over[i] = False
        io[i] = isl[i] / osl[i]
        cap = cap_mean[i]
        min_chunk[i] = min(max_batched_tok[i], _MIN_CHUNK_TOK)
        alone[i] = prefill_alone[i] + step_overhead_s[i]
        fixed_alone[i] = ttft_fixed_s[i] + alone[i]
        # time a request spends decoding after its first token (O - 1 steps; floored so that one-token
        # outputs keep a finite, monotone throughput)
        dec_steps[i] = max(osl[i] - 1.0, _MIN_DECODE_STEPS)
        if mode == MODE_STATIC:
            B = max(min(per_replica[i], cap), 1.0)
            step_b, sh_b = _decode_step_f(B, pp[i], dense_s[i], expert_s[i], log_miss[i], moe[i], seq_s[i],
                                          flop_s_seq[i], comm_fixed_s[i], comm_seq_s[i], step_fixed_s[i])
            out_b[i], out_tpot[i], out_share[i], out_ttft[i], out_x[i] = B, step_b, sh_b, 0.0, 0.0
            continue
        # saturated steady state (offline, and the cap of the other modes)
        step, share = _decode_step_f(cap, pp[i], dense_s[i], expert_s[i], log_miss[i], moe[i], seq_s[i],
                                     flop_s_seq[i], comm_fixed_s[i], comm_seq_s[i], step_fixed_s[i])
        tpot = step + cap * io[i] * c_prefill[i]
        if mode == MODE_OFFLINE:
            # no prefill queue (every prompt is admitted as a sequence finishes); the wave of the cap's prompts
            ttft = _ttft_f(cap, step, 0.0, max_batched_tok[i], min_chunk[i], isl[i], c_prefill[i], alone[i],
                           fixed_alone[i], 0.0, wave[i] * (cap - 1.0) * isl[i] * c_prefill[i], 1.0)
            out_b[i], out_ttft[i], out_tpot[i] = cap, ttft, tpot
            out_x[i], out_share[i] = cap / (osl[i] * tpot), share
            continue
        if closed:
            C = max(per_replica[i], 1.0)
            wave_q[i] = wave[i] * (min(C, cap) - 1.0) * isl[i] * c_prefill[i]
            ahead[i] = max(C - 1.0, 0.0)
            # a decoding request's steps carry the prompts of the other C - 1 clients only (its own prompt was
            # prefilled before it decoded): with one client, a step reads the weights and its own KV, no more
            others[i] = ahead[i] / C
            target[i] = C
            hi[i] = min(C, cap)
        else:
            lam = max(per_replica[i], 1e-9)
            x_cap = cap / (dec_steps[i] * tpot)          # completion rate at the cap
            target[i] = min(lam, x_cap * _SATURATION_SHARE)
            wave_q[i] = 0.0
            ahead[i] = _NO_LIMIT
            others[i] = 1.0         # Poisson arrivals: every other prompt arrives whatever this one does
            hi[i] = cap
            out_over[i] = lam >= x_cap
        f_lo[i] = -target[i]
    if mode in (MODE_STATIC, MODE_OFFLINE):
        return
    # regula falsi with the Illinois modification on [0, top] for excess(b), which rises with b: closed loop
    # b + X(b) TTFT(b) - C; open loop X(b) - lam. Step 0 evaluates the top end; the last only interpolates.
    # Where excess is not positive even at the top end (the closed loop saturates the cap), every step
    # moves the low end up and the answer is the top. Blocks of _ROOT_BLOCK candidates, copied into one
    # working array, take every step in turn (_root_block).
    w = np.empty(_W_ROWS * _ROOT_BLOCK)
    for start in range(0, n, _ROOT_BLOCK):
        count = min(_ROOT_BLOCK, n - start)
        for k in range(_ROOT_BLOCK):
            i = start + k if k < count else start          # a part block is padded with its first candidate
            w[_W_HI * _ROOT_BLOCK + k] = hi[i]
            w[_W_LO * _ROOT_BLOCK + k] = lo[i]
            w[_W_F_HI * _ROOT_BLOCK + k] = f_hi[i]
            w[_W_F_LO * _ROOT_BLOCK + k] = f_lo[i]
            w[_W_SIDE * _ROOT_BLOCK + k] = side[i]
            w[_W_PP * _ROOT_BLOCK + k] = pp[i]
            w[_W_DENSE * _ROOT_BLOCK + k] = dense_s[i]
            w[_W_EXPERT * _ROOT_BLOCK + k] = expert_s[i]
            w[_W_LOG_MISS * _ROOT_BLOCK + k] = log_miss[i]
            w[_W_MOE * _ROOT_BLOCK + k] = 1.0 if moe[i] else 0.0
            w[_W_SEQ * _ROOT_BLOCK + k] = seq_s[i]
            w[_W_FLOP_SEQ * _ROOT_BLOCK + k] = flop_s_seq[i]
            w[_W_COMM_FIXED * _ROOT_BLOCK + k] = comm_fixed_s[i]
            w[_W_COMM_SEQ * _ROOT_BLOCK + k] = comm_seq_s[i]
            w[_W_STEP_FIXED * _ROOT_BLOCK + k] = step_fixed_s[i]
            w[_W_IO * _ROOT_BLOCK + k] = io[i]
            w[_W_C_PREFILL * _ROOT_BLOCK + k] = c_prefill[i]
            w[_W_DEC_STEPS * _ROOT_BLOCK + k] = dec_steps[i]
            w[_W_MAX_TOK * _ROOT_BLOCK + k] = max_batched_tok[i]
            w[_W_MIN_CHUNK * _ROOT_BLOCK + k] = min_chunk[i]
            w[_W_ISL * _ROOT_BLOCK + k] = isl[i]
            w[_W_ALONE * _ROOT_BLOCK + k] = alone[i]
            w[_W_FIXED_ALONE * _ROOT_BLOCK + k] = fixed_alone[i]
            w[_W_AHEAD * _ROOT_BLOCK + k] = ahead[i]
            w[_W_WAVE_Q * _ROOT_BLOCK + k] = wave_q[i]
            w[_W_TARGET * _ROOT_BLOCK + k] = target[i]
            w[_W_OTHERS * _ROOT_BLOCK + k] = others[i]
            w[_W_EXPERT_TERM * _ROOT_BLOCK + k] = 0.0
        any_moe = False
        for i in range(start, start + count):
            any_moe = any_moe or bool(moe[i])
        _root_block(w, closed, any_moe)
        for k in range(count):
            out_b[start + k] = w[_W_OUT * _ROOT_BLOCK + k]
    # the state at the root
    for i in range(n):
        b = out_b[i]
        b1 = max(b, 1.0)
        st_b, sh_b = _decode_step_f(b1, pp[i], dense_s[i], expert_s[i], log_miss[i], moe[i], seq_s[i],
                                    flop_s_seq[i], comm_fixed_s[i], comm_seq_s[i], step_fixed_s[i])
        tp_b = st_b + b1 * others[i] * io[i] * c_prefill[i]
        x_b = b / (dec_steps[i] * tp_b)
        t_b = _ttft_f(b, st_b, x_b if closed else target[i], max_batched_tok[i], min_chunk[i], isl[i], c_prefill[i],
                      alone[i], fixed_alone[i], ahead[i], wave_q[i], others[i])
        if closed:
            t_b = max(t_b, target[i] / x_b - dec_steps[i] * tp_b)
        out_b[i], out_ttft[i], out_tpot[i], out_share[i] = b, t_b, tp_b, sh_b
        out_x[i] = x_b if closed else target[i]
