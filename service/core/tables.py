"""Catalog facts as arrays: one row per model, GPU and dtype, gathered once (``build_tables``).

Candidates (candidates.py) hold integer indices into these rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpu_catalog.checkpoints import CheckpointCatalog, shipped_checkpoints
from gpu_catalog.loader import Catalog
from gpu_catalog.schema import CostConstants
from service.core.architecture import arch_numbers
from service.core.moe_layout import param_split
from service.core.types import B_, I_, F
from service.units import GB_BYTES, GIB_BYTES, MB_BYTES

COMPUTE_DTYPES = ("fp16", "bf16", "fp8", "int8", "fp4")


@dataclass(frozen=True)
class Tables:
    """Catalog facts as arrays, indexed by position in the id lists."""

    model_ids: list[str]
    gpu_ids: list[str]
    wdtype_ids: list[str]
    kvdtype_ids: list[str]
    # models
    layers: F
    allreduces_per_layer: F     # under TP: 2 (attention, MLP), 1 where they run in parallel (ModelSpec)
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
    moe_layers: F               # layers whose MLP is routed experts (0 for dense models)
    replicated_params: F        # weights every TP rank holds whole: MLA down-projections (moe_layout.param_split)
    experts_per_token: F
    mlp_width: F                # MLP intermediate elements one token materialises
    kv_elems_per_layer: F       # K+V elements per token per full-attention layer (whole model)
    is_mla: B_
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
    # (model, weight dtype): bytes per weight of its linear parts as the checkpoint served holds them
    # (checkpoints.yaml quantised_parts; a quantisation step quantises them all): the routed experts, the
    # attention weights, and the mean over every non-routed linear weight (attention, dense MLP, shared experts)
    routed_w_bytes: F
    attn_w_bytes: F
    nonrouted_w_bytes: F
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


def _part_bytes(models: list[Any], catalog: Catalog, checkpoints: CheckpointCatalog) -> tuple[F, F, F]:
    """(model, weight dtype) bytes per weight of the routed experts, the attention weights and the mean over
    the non-routed linear weights (weighted by each part's parameters, moe_layout.param_split)."""
    dtype_bits = {d.id: d.bits_per_weight for d in catalog.weight_dtypes}
    # every linear weight at its dtype's bits, except for the models the checkpoints list
    whole = np.tile(np.asarray(list(dtype_bits.values())) / 8.0, (len(models), 1))
    routed, attn, nonrouted = whole.copy(), whole.copy(), whole.copy()
    listed = {e.model for e in (*checkpoints.native, *checkpoints.checkpoints)}
    for mi, m in enumerate(models):
        if m.id not in listed:
            continue
        p = param_split(m)
        for wi, d in enumerate(catalog.weight_dtypes):
            b = checkpoints.part_bits(m.id, d.id, dtype_bits)
            parts = ((p.attention_params, b.attention), (p.dense_mlp_params, b.dense_mlp),
                     (p.shared_expert_params, b.shared_experts), (p.other_params, d.bits_per_weight))
            total = sum(n for n, _ in parts)
            mean_bits = sum(n * bits for n, bits in parts) / total if total > 0 else d.bits_per_weight
            routed[mi, wi], attn[mi, wi], nonrouted[mi, wi] = b.routed_experts / 8, b.attention / 8, mean_bits / 8
    return routed, attn, nonrouted


def build_tables(catalog: Catalog, constants: CostConstants, extra_models: list[Any] | None = None,
                 checkpoints: CheckpointCatalog | None = None) -> Tables:
    """Gather the catalog (and any inline model specs) into arrays, once; ``checkpoints``: which parts of a
    model each served checkpoint quantises (default: the shipped checkpoints.yaml)."""
    models = [*catalog.models, *(extra_models or [])]
    a = [arch_numbers(m) for m in models]
    routed_w, attn_w, nonrouted_w = _part_bytes(models, catalog, checkpoints or shipped_checkpoints())

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
        allreduces_per_layer=arr([1.0 if m.parallel_attention else 2.0 for m in models]),
        heads=arr([x.num_attention_heads for x in a]), kv_heads=arr([x.num_kv_heads for x in a]),
        head_dim=arr([x.head_dim for x in a]), attn_dims=arr([x.attn_qk_dim + x.attn_v_dim for x in a]),
        vocab=arr([m.vocab_size for m in models]),
        linear_params=arr([max(x.total_params - x.embedding_params, 0.5 * x.total_params) for x in a]),
        active_linear_params=arr([max(x.active_params - x.embedding_params, 0.5 * x.active_params) for x in a]),
        expert_params=arr([x.expert_params for x in a]), lm_head_params=arr([x.lm_head_params for x in a]),
        embedding_params=arr([min(x.embedding_params, 0.5 * x.total_params) for x in a]),
        num_experts=arr([x.num_experts for x in a]),
        moe_layers=arr([m.num_layers - (getattr(m, "first_k_dense_layers", None) or 0) if m.num_experts else 0
                        for m in models]),
        replicated_params=arr([param_split(m).attn_replicated_params if m.mla_kv_lora_rank is not None else 0.0
                               for m in models]), experts_per_token=arr([x.experts_per_token for x in a]),
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
        routed_w_bytes=routed_w, attn_w_bytes=attn_w, nonrouted_w_bytes=nonrouted_w,
        w_native_compute=np.asarray([cidx[d.native_compute] for d in catalog.weight_dtypes], dtype=np.int64),
        w_fallback_compute=np.asarray([cidx[d.fallback_compute] if d.fallback_compute else -1
                                       for d in catalog.weight_dtypes], dtype=np.int64),
        kv_bits=arr([d.bits_per_element for d in catalog.kv_dtypes]),
        other_overhead_bytes=mem.other_overhead_gib * GIB_BYTES,
        nccl_bytes_by_tp={int(k): v * MB_BYTES for k, v in mem.nccl_mb_by_tp.items()},
        act_bytes=float(mem.activation_bytes_per_element), logits_bytes=float(mem.logits_bytes_per_element),
    )
