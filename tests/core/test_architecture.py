"""Hand-computed expectations for the per-model quantities."""

from __future__ import annotations

import pytest

from gpu_catalog.loader import load_catalog
from gpu_catalog.schema import ModelSpec
from service.core.architecture import arch_numbers, kv_bytes_per_sequence, kv_bytes_per_token_upper


@pytest.fixture(scope="module")
def models() -> dict[str, ModelSpec]:
    return {m.id: m for m in load_catalog().models}


def test_llama_31_70b_kv_bytes_per_token(models: dict[str, ModelSpec]) -> None:
    # 2 (K,V) x 80 layers x 8 KV heads x 128 head dim x 2 bytes = 327,680 B
    assert kv_bytes_per_token_upper(models["meta-llama/Llama-3.1-70B"]) == 327_680
    assert kv_bytes_per_token_upper(models["meta-llama/Llama-3.1-70B"], kv_bits=8) == 163_840


def test_deepseek_v3_mla_kv_bytes_per_token(models: dict[str, ModelSpec]) -> None:
    # MLA: 61 layers x (512 latent + 64 rope) x 2 bytes = 70,272 B, shared by all heads
    assert kv_bytes_per_token_upper(models["deepseek-ai/DeepSeek-V3"]) == 70_272
    assert arch_numbers(models["deepseek-ai/DeepSeek-V3"]).is_mla


def test_sliding_window_layers_cap_at_the_window(models: dict[str, ModelSpec]) -> None:
    gemma = models["google/gemma-2-9b"]
    a = arch_numbers(gemma)
    assert a.window_layers == 21 and a.window_tokens == 4096
    per_layer = 2 * 8 * 256 * 2  # bytes per token per layer: K,V x 8 KV heads x head dim 256 x BF16
    # 32k tokens: 21 global layers keep all of them, 21 local layers only the last 4096.
    assert kv_bytes_per_sequence(gemma, 32_768) == per_layer * (21 * 32_768 + 21 * 4096)
    assert kv_bytes_per_sequence(gemma, 32_768) < kv_bytes_per_token_upper(gemma) * 32_768


def test_moe_expert_share(models: dict[str, ModelSpec]) -> None:
    a = arch_numbers(models["mistralai/Mixtral-8x7B-v0.1"])
    assert a.is_moe and a.num_experts == 8 and a.experts_per_token == 2
    # total - active = 6/8 of the routed experts: 46.7e9 - 12.88e9 = 33.82e9 -> experts = 45.09e9
    assert a.expert_params == pytest.approx((46.7e9 - 12.88e9) * 8 / 6)
    assert a.expert_params < a.total_params
