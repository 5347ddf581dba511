"""Per-model quantities derived from config.json fields: parameter split, KV elements, FLOPs per token.

Units are in the names. Parameter counts are in elements (multiply by bytes per element for memory);
FLOPs count a multiply-add as 2.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_catalog.schema import ModelSpec


@dataclass(frozen=True)
class ArchNumbers:
    """The numbers of one architecture that the cost model needs, derived once."""

    model_id: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    is_mla: bool
    is_moe: bool
    num_experts: int
    experts_per_token: int
    total_params: float            # elements
    active_params: float           # elements used per token
    embedding_params: float        # input embedding (+ untied LM head), not quantised by the usual recipes
    expert_params: float           # routed-expert weights (split by expert parallelism)
    lm_head_params: float          # elements of the output projection (run once per generated token)
    full_attn_layers: int          # layers whose KV grows with the whole context
    window_layers: int             # layers that keep only the sliding window
    window_tokens: int             # sliding-window length, tokens (0 = none)
    kv_elems_per_token_per_layer: int   # K and V elements one token adds to one full-attention layer
    attn_qk_dim: int               # per-head dimension of the QK^T product (MLA: nope + rope)
    attn_v_dim: int                # per-head dimension of the PV product
    max_context_tokens: int


def arch_numbers(m: ModelSpec) -> ArchNumbers:
    is_mla = m.mla_kv_lora_rank is not None
    if is_mla:
        # One latent (kv_lora_rank) plus the shared rope key per token and layer, for all heads.
        kv_per_layer = (m.mla_kv_lora_rank or 0) + (m.mla_qk_rope_head_dim or 0)
        qk_dim = (m.mla_qk_nope_head_dim or (m.head_dim - (m.mla_qk_rope_head_dim or 0))) + (
            m.mla_qk_rope_head_dim or 0)
        v_dim = m.mla_v_head_dim or m.head_dim
    else:
        kv_per_layer = 2 * m.num_kv_heads * m.head_dim
        qk_dim = v_dim = m.head_dim
    linear = m.linear_attention_layers or 0
    window_layers = m.sliding_window_layers or 0
    full = m.num_layers - linear - window_layers
    embed = m.vocab_size * m.hidden_size
    lm_head = embed
    embedding_params = embed * (1 if m.tie_word_embeddings else 2)
    total = m.total_params_b * 1e9
    active = m.active_params_b * 1e9
    expert_params = 0.0
    if m.num_experts and m.experts_per_token:
        # total - active = the (E - k)/E share of routed experts that a token does not use.
        routed_total = (total - active) * m.num_experts / max(m.num_experts - m.experts_per_token, 1)
        expert_params = min(routed_total, total - embedding_params)
    return ArchNumbers(
        model_id=m.id, num_layers=m.num_layers, hidden_size=m.hidden_size,
        num_attention_heads=m.num_attention_heads, num_kv_heads=m.num_kv_heads, head_dim=m.head_dim,
        is_mla=is_mla, is_moe=bool(m.num_experts), num_experts=m.num_experts or 1,
        experts_per_token=m.experts_per_token or 1, total_params=total, active_params=active,
        embedding_params=float(embedding_params), expert_params=expert_params, lm_head_params=float(lm_head),
        full_attn_layers=full, window_layers=window_layers, window_tokens=m.sliding_window_tokens or 0,
        kv_elems_per_token_per_layer=kv_per_layer, attn_qk_dim=qk_dim, attn_v_dim=v_dim,
        max_context_tokens=m.max_position_embeddings,
    )


def kv_bytes_per_token_upper(m: ModelSpec, kv_bits: int = 16) -> int:
    """KV bytes one token of context adds over all attention layers (sliding ones counted in full)."""
    a = arch_numbers(m)
    return (a.full_attn_layers + a.window_layers) * a.kv_elems_per_token_per_layer * kv_bits // 8


def kv_bytes_per_sequence(m: ModelSpec, context_tokens: int, kv_bits: int = 16) -> float:
    """KV bytes of one sequence of ``context_tokens`` tokens, sliding-window layers capped at the window."""
    a = arch_numbers(m)
    window = min(context_tokens, a.window_tokens) if a.window_tokens else context_tokens
    elems = a.kv_elems_per_token_per_layer * (a.full_attn_layers * context_tokens + a.window_layers * window)
    return elems * kv_bits / 8
