"""Memory per GPU, hand-computed from the catalog's figures (service/core/memory.py)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from service.core.costmodel import (
    BUDGET_SHARE_OF_FREE,
    BUDGET_SHARE_OF_TOTAL,
    static_terms,
)
from tests.core.support import (
    EMBED,
    LINEAR,
    TABLES,
    cand,
    run,
)


@pytest.mark.parametrize(("wd", "expected_bytes"), [
    ("bf16", 8.03e9 * 2),                                   # 16.06 GB
    ("fp8", LINEAR * 1 + EMBED * 2),                        # 9.08 GB
    ("int4-awq", LINEAR * 4.15625 / 8 + EMBED * 2),         # 5.73 GB
])
def test_llama_31_8b_weights_by_dtype(wd: str, expected_bytes: float) -> None:
    r = run(cand("meta-llama/Llama-3.1-8B", "h100-sxm", wd=wd))
    assert r.weights_bytes[0] == pytest.approx(expected_bytes, rel=1e-9)


def test_gpt_oss_120b_keeps_attention_in_bf16_beside_mxfp4_experts() -> None:
    # config.json: hidden 2880, 36 layers, 64 query and 8 KV heads of 64, 128 experts of 3 x 2880 x 2880, vocab
    # 201,088 (untied); only the experts are MXFP4 (4.25 bits), attention, router and embeddings BF16
    attention = 2880 * (64 + 8 + 8 + 64) * 64 * 36
    experts = 3 * 2880 * 2880 * 128 * 36
    embeddings, router = 2 * 201_088 * 2880, 2880 * 128 * 36
    expected = (attention + embeddings + router) * 2 + experts * 4.25 / 8          # 65.17 GB
    r = run(cand("openai/gpt-oss-120b", "h100-sxm", wd="mxfp4"))
    assert r.weights_bytes[0] == pytest.approx(expected, rel=1e-3)


def test_kimi_k25_release_stores_int4_experts_with_group_32_scales_and_the_rest_in_bf16() -> None:
    native = run(cand("moonshotai/Kimi-K2.5", "h200-sxm", wd="int4-wo", tp=8))
    # the same model quantised by an engine step: every linear weight at INT4 AWQ's 4.16 bits, where the release
    # keeps its 9.2 B non-routed linear parameters (moe_layout.param_split) in BF16 and its experts at 4.5 bits
    awq = run(cand("moonshotai/Kimi-K2.5", "h200-sxm", wd="int4-awq", tp=8))
    assert native.weights_bytes[0] > awq.weights_bytes[0] + 3e9


def test_llama_31_70b_kv_per_token_through_the_model() -> None:
    # 2 x 80 layers x 8 KV heads x 128 x 2 B = 327,680 B per token on one GPU; TP=2 halves the heads per GPU
    one = run(cand("meta-llama/Llama-3.1-70B", "h200-sxm", isl=1000, osl=24))
    two = run(cand("meta-llama/Llama-3.1-70B", "h200-sxm", tp=2, isl=1000, osl=24))
    assert one.kv_bytes_per_seq[0] == 327_680 * 1024
    assert two.kv_bytes_per_seq[0] == 327_680 * 1024 / 2


def test_kv_heads_are_replicated_when_tp_exceeds_them() -> None:
    # 8 KV heads over TP=16 cannot split further: each GPU keeps one whole head (1/8 of the total)
    r = run(cand("meta-llama/Llama-3.1-70B", "h100-sxm", tp=16, isl=1000, osl=24))
    assert r.kv_bytes_per_seq[0] == 327_680 * 1024 / 8


def test_deepseek_v3_mla_latent_is_not_split_by_tp() -> None:
    # 61 x (512 + 64) x 2 B = 70,272 B per token, on every TP rank
    r = run(cand("deepseek-ai/DeepSeek-V3", "h200-sxm", wd="fp8", tp=8, isl=1000, osl=24))
    assert r.kv_bytes_per_seq[0] == 70_272 * 1024


def test_llama_31_70b_bf16_needs_two_80gb_gpus() -> None:
    # 141 GB of BF16 weights: more than one 80 GB GPU, about 70.5 GB each over TP=2 (with vLLM 0.34.0's
    # default gpu_memory_utilization of 1.0, engines/vllm-0.34.0.yaml)
    one = run(cand("meta-llama/Llama-3.1-70B", "h100-sxm", tp=1, frac=1.0))
    two = run(cand("meta-llama/Llama-3.1-70B", "h100-sxm", tp=2, frac=1.0))
    assert not one.fits[0]
    assert one.weights_bytes[0] > 80e9
    assert two.fits[0]
    assert two.weights_bytes[0] == pytest.approx(70.55e9, rel=1e-9)


def test_7b_on_one_a10_holds_far_more_4k_sequences_in_int4() -> None:
    kw: dict[str, Any] = {"isl": 3072, "osl": 1024, "seqs": 1024, "tokens": 2048}
    bf16 = run(cand("meta-llama/Llama-2-7b-hf", "a10", wd="bf16", **kw))
    int4 = run(cand("meta-llama/Llama-2-7b-hf", "a10", wd="int4-awq", **kw))
    assert int4.max_concurrency[0] >= 3 * max(bf16.max_concurrency[0], 1)
    # 6.74e9 x 2 B = 13.5 GB of weights leave 24 x 0.9 - 13.5 - reserve ~ 4 GB for 4k x 512 KiB sequences
    assert bf16.max_concurrency[0] <= 3


def test_trtllm_budgets_a_share_of_free_memory_vllm_of_total() -> None:
    vllm = run(cand("meta-llama/Llama-3.1-8B", "h100-sxm", frac=0.9, budget=BUDGET_SHARE_OF_TOTAL))
    trt = run(cand("meta-llama/Llama-3.1-8B", "h100-sxm", frac=0.9, budget=BUDGET_SHARE_OF_FREE))
    non_kv = vllm.weights_bytes[0] + vllm.activations_bytes[0] + vllm.overhead_bytes[0]
    assert vllm.kv_cache_bytes[0] == pytest.approx(80e9 * 0.9 - non_kv)
    assert trt.kv_cache_bytes[0] == pytest.approx((80e9 - non_kv) * 0.9)


def test_a_step_reads_an_untied_input_embedding_by_rows_and_a_tied_one_whole() -> None:
    # Llama-3.1-8B unties its LM head: the input table (128,256 x 4,096 in BF16, half of EMBED) is held in memory
    # but only looked up; Llama-3.2-1B ties them, so its one table is the LM head a step reads whole
    for tp in (1, 2):
        untied = static_terms(TABLES, cand("meta-llama/Llama-3.1-8B", "h100-sxm", tp=tp))
        assert untied.weights[0] - untied.dense_weights[0] == pytest.approx(EMBED / 2 * 2 / tp, rel=1e-9)
    tied = static_terms(TABLES, cand("meta-llama/Llama-3.2-1B", "h100-sxm"))
    assert tied.dense_weights[0] == pytest.approx(tied.weights[0], rel=1e-12)


def test_whole_sequence_reservation_caps_the_batch_by_whole_sequences() -> None:
    # TensorRT-LLM's GUARANTEED_NO_EVICT admits a request when KV for prompt + output fits; vLLM allocates KV as
    # tokens are computed, so at 128 in / 2,048 out it holds about (128 + 2,048) / (128 + 1,024) = 1.9x as many
    kw: dict[str, Any] = {"isl": 128, "osl": 2048, "seqs": 1024}
    as_computed = static_terms(TABLES, cand("meta-llama/Llama-3.1-8B", "h100-sxm", **kw))
    reserved = static_terms(TABLES, cand("meta-llama/Llama-3.1-8B", "h100-sxm", reserve_full=True, **kw))
    assert reserved.kv_pool[0] == as_computed.kv_pool[0]
    assert reserved.cap_mean[0] == math.floor(reserved.kv_pool[0] / reserved.seq_full[0])
    assert as_computed.cap_mean[0] == math.floor(as_computed.kv_pool[0] / as_computed.seq_mean[0])
    assert as_computed.cap_mean[0] / reserved.cap_mean[0] == pytest.approx(2176 / 1152, rel=0.02)


# --- physics as properties -----------------------------------------------------------------------
