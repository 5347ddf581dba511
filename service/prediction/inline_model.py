"""A catalog-shaped architecture from the inline config.json fields of a request (``model_spec``)."""

from __future__ import annotations

from gpu_catalog.schema import ModelSpec
from service.errors import InvalidRequest
from service.schemas.predictions import InlineModel


def inline_model_spec(m: InlineModel) -> ModelSpec:
    """A catalog-shaped architecture from inline config.json fields; parameter counts from the shapes."""
    head_dim = m.head_dim or m.hidden_size // m.num_attention_heads
    if m.num_attention_heads % m.num_kv_heads:
        raise InvalidRequest(["model_spec", "num_kv_heads"], "num_attention_heads must be a multiple of num_kv_heads")
    attn = m.hidden_size * head_dim * (2 * m.num_attention_heads + 2 * m.num_kv_heads)
    if m.num_experts and m.experts_per_token:
        width = m.moe_intermediate_size or m.intermediate_size
        mlp_total = 3 * m.hidden_size * width * (m.num_experts + (m.num_shared_experts or 0))
        mlp_active = 3 * m.hidden_size * width * (m.experts_per_token + (m.num_shared_experts or 0))
    elif m.num_experts or m.experts_per_token:
        raise InvalidRequest(["model_spec", "experts_per_token"], "num_experts and experts_per_token go together")
    else:
        mlp_total = mlp_active = 3 * m.hidden_size * m.intermediate_size
    embed = m.vocab_size * m.hidden_size * (1 if m.tie_word_embeddings else 2)
    total_b = m.total_params_b or (m.num_layers * (attn + mlp_total) + embed) / 1e9
    active_b = m.active_params_b or min((m.num_layers * (attn + mlp_active) + embed) / 1e9, total_b)
    try:
        return ModelSpec(
            id=m.name, family=m.name.lower(), name=m.name, model_type="inline", num_layers=m.num_layers,
            hidden_size=m.hidden_size, intermediate_size=m.intermediate_size,
            num_attention_heads=m.num_attention_heads, num_kv_heads=m.num_kv_heads, head_dim=head_dim,
            vocab_size=m.vocab_size, max_position_embeddings=m.max_position_embeddings,
            tie_word_embeddings=m.tie_word_embeddings, num_experts=m.num_experts,
            num_shared_experts=m.num_shared_experts, experts_per_token=m.experts_per_token,
            moe_intermediate_size=m.moe_intermediate_size, mla_kv_lora_rank=m.mla_kv_lora_rank,
            mla_qk_rope_head_dim=m.mla_qk_rope_head_dim, mla_qk_nope_head_dim=m.mla_qk_nope_head_dim,
            mla_v_head_dim=m.mla_v_head_dim, total_params_b=total_b, active_params_b=min(active_b, total_b),
            source="inline model_spec of the request")
    except ValueError as exc:
        raise InvalidRequest(["model_spec"], str(exc)) from exc

