"""Hand-computed checks of the lever physics (service/core/levers.py)."""

from __future__ import annotations

import numpy as np
import pytest

from gpu_catalog.levers import load_levers, mean_accepted_length_tok
from gpu_catalog.loader import load_catalog
from service.core.levers import (
    cached_prefix_tok,
    draft_time_per_step_s,
    expected_tokens_per_step_tok,
    free_prefix_pool_tok,
    host_prefix_load_s,
    kv_blocks_per_seq,
    offload_needed_bytes,
    offload_step_floor_s,
    offloaded_step_s,
    prefill_computed_tok,
    prefix_tier_shares,
    speculative_tpot_s,
    verify_query_tok,
)
from service.core.types import F

# A roofline step: 10 ms to read the weights once, 0.1 ms of compute per token in the step.
WEIGHTS_READ_S = 0.010
COMPUTE_PER_TOK_S = 0.0001


def roofline_step_s(query_tok: F) -> F:
    return np.maximum(WEIGHTS_READ_S, query_tok * COMPUTE_PER_TOK_S)


# ---- speculative decoding -------------------------------------------------------------------------------


def test_expected_tokens_per_step_by_hand() -> None:
    # k = 3, a = 0.5: 1 + 0.5 + 0.25 + 0.125 = 1.875. a = 1: all k drafts and the bonus token. a = 0: bonus only.
    got = expected_tokens_per_step_tok([0.5, 1.0, 0.0, 0.8], [3, 3, 3, 1])
    # k = 1, a = 0.8 (MTP with one module): 1 + 0.8 = 1.8 tokens per step.
    np.testing.assert_allclose(got, [1.875, 4.0, 1.0, 1.8])


def test_expected_tokens_is_continuous_at_full_acceptance() -> None:
    # Just below a = 1 the geometric sum is k + 1 less a vanishing amount, never a division by zero.
    got = expected_tokens_per_step_tok([1.0 - 1e-9, 1.0], 4)
    np.testing.assert_allclose(got, [5.0, 5.0], rtol=1e-6)
    assert np.all(np.isfinite(got))


def test_core_formula_reproduces_every_catalog_figure() -> None:
    # The catalog converts quoted mean accepted lengths with the same formula: both agree, and match the quote.
    measurements = load_levers().measurements
    a = np.array([m.acceptance_rate for m in measurements])
    k = np.array([m.num_speculative_tokens for m in measurements])
    got = expected_tokens_per_step_tok(a, k)
    np.testing.assert_allclose(
        got, [mean_accepted_length_tok(m.acceptance_rate, m.num_speculative_tokens) for m in measurements]
    )
    quoted = [
        (g, m.quoted_value) for g, m in zip(got, measurements, strict=True) if m.quoted_kind == "mean_accepted_length"
    ]
    assert len(quoted) >= 4 and all(abs(g - q) <= 0.005 for g, q in quoted)


def test_verify_step_carries_k_plus_one_tokens_per_sequence() -> None:
    np.testing.assert_array_equal(verify_query_tok([1, 64], 3), [4.0, 256.0])
    np.testing.assert_array_equal(draft_time_per_step_s(0.0005, 3), 0.0015)


def test_speculation_at_batch_one_by_hand() -> None:
    # Batch 1, k = 3: the verify step is 4 tokens, still memory-bound at 10 ms. Drafting 3 x 0.5 ms.
    # TPOT = (10 + 1.5) / 1.875 = 6.1333 ms against 10 ms: 1.63x.
    t = speculative_tpot_s(roofline_step_s, 1, 0.5, 3, draft_time_per_step_s(0.0005, 3))
    assert float(t.verify_step_s) == pytest.approx(0.010)
    assert float(t.tpot_s) == pytest.approx(0.0115 / 1.875)
    assert float(t.speedup) == pytest.approx(0.010 / (0.0115 / 1.875))
    assert float(t.speedup) == pytest.approx(1.6304, abs=1e-4)


def test_speculation_at_a_full_batch_is_a_loss_by_hand() -> None:
    # Batch 256: plain step 256 x 0.1 ms = 25.6 ms (compute-bound); verify 1024 tokens = 102.4 ms.
    # TPOT = (102.4 + 1.5) / 1.875 = 55.413 ms against 25.6 ms: 0.462x, a loss.
    t = speculative_tpot_s(roofline_step_s, 256, 0.5, 3, 0.0015)
    assert float(t.base_tpot_s) == pytest.approx(0.0256)
    assert float(t.tpot_s) == pytest.approx(0.1039 / 1.875)
    assert float(t.speedup) == pytest.approx(0.4620, abs=1e-4)


def test_gain_shrinks_as_the_batch_fills() -> None:
    batches = np.array([1.0, 8.0, 32.0, 64.0, 256.0])
    t = speculative_tpot_s(roofline_step_s, batches, 0.717, 3, 0.0)
    assert np.all(np.diff(t.speedup) <= 1e-12)
    assert t.speedup[0] > 2.5 and t.speedup[-1] < 1.0


def test_acceptance_zero_never_helps() -> None:
    # Batch 1: one token per step for a 10 ms verify plus 1.5 ms of drafting: 0.8696x.
    t = speculative_tpot_s(roofline_step_s, 1, 0.0, 3, 0.0015)
    assert float(t.speedup) == pytest.approx(0.010 / 0.0115)
    batches = np.array([1.0, 4.0, 16.0, 64.0, 512.0])
    assert np.all(speculative_tpot_s(roofline_step_s, batches, 0.0, 5, 0.0).speedup <= 1.0)


def test_acceptance_zero_never_helps_with_a_non_monotone_step_time() -> None:
    # A fitted step time that dips for larger steps must not make 4 tokens cheaper than 1.
    def dipping_step_s(query_tok: F) -> F:
        return np.where(query_tok <= 1.0, 0.010, 0.009)

    t = speculative_tpot_s(dipping_step_s, 1, 0.0, 3, 0.0)
    assert float(t.speedup) == pytest.approx(1.0)


# ---- prefix caching -------------------------------------------------------------------------------------


def test_prefix_hit_rate_zero_changes_nothing() -> None:
    # 1000-token prompt, 200 output tokens, 16-token blocks: ceil(1200 / 16) = 75 blocks, all 1000 prompt tokens.
    assert float(prefill_computed_tok(1000, 0.0, 16)) == 1000.0
    assert float(kv_blocks_per_seq(1000, 200, 0.0, 16, 8)) == 75.0


def test_prefix_hit_by_hand() -> None:
    # Half of 1000 tokens = 500, in whole 16-token blocks: 31 blocks = 496 cached, 504 computed.
    assert float(cached_prefix_tok(1000, 0.5, 16)) == 496.0
    assert float(prefill_computed_tok(1000, 0.5, 16)) == 504.0
    # 4 running sequences share those 31 blocks: 75 - 31 + 31 / 4 = 51.75 blocks each.
    assert float(kv_blocks_per_seq(1000, 200, 0.5, 16, 4)) == pytest.approx(51.75)
    # Alone, the sequence still holds all 75: the hit saved compute, not memory.
    assert float(kv_blocks_per_seq(1000, 200, 0.5, 16, 1)) == 75.0


def test_full_hit_still_computes_the_last_token() -> None:
    # 1024 tokens, hit rate 1: at most 1023 cached, rounded down to 63 blocks = 1008; 16 tokens computed.
    assert float(cached_prefix_tok(1024, 1.0, 16)) == 1008.0
    assert float(prefill_computed_tok(1024, 1.0, 16)) == 16.0


def test_prefill_compute_falls_with_the_hit_rate() -> None:
    computed = prefill_computed_tok(4096, np.linspace(0.0, 1.0, 11), 16)
    assert computed[0] == 4096.0
    assert np.all(np.diff(computed) <= 0.0) and computed[-1] < computed[0] / 100


def test_host_prefix_load_by_hand() -> None:
    # Llama-3.1-8B KV in BF16: 2 x 32 layers x 8 KV heads x 128 x 2 bytes = 131072 bytes per token. A 4096-token
    # prefix is 0.537 GB: 17.0 ms over PCIe 4.0 x16 (31.5 GB/s), 8.5 ms over PCIe 5.0 (63).
    got = host_prefix_load_s(4096, 131072, [31.5, 63.0])
    np.testing.assert_allclose(got, [4096 * 131072 / 31.5e9, 4096 * 131072 / 63e9])
    assert got[0] == pytest.approx(0.01704, abs=1e-5)


# ---- CPU weight offload ---------------------------------------------------------------------------------


def test_offload_floor_by_hand() -> None:
    # 40 GB over PCIe 4.0 x16 (31.5 GB/s one way) = 1.2698 s; PCIe 5.0 (63) = 0.6349 s; NVLink-C2C (450) = 0.0889 s.
    np.testing.assert_allclose(offload_step_floor_s(40e9, [31.5, 63.0, 450.0]), [40 / 31.5, 40 / 63, 40 / 450])


def test_offload_adds_the_transfer_or_hides_behind_it() -> None:
    # A 20 ms step with 40 GB streamed over PCIe 4.0: 20 ms + 1269.8 ms serial; max(20, 1269.8) ms prefetched.
    got = offloaded_step_s(0.020, 40e9, 31.5, [False, True])
    np.testing.assert_allclose(got, [0.020 + 40 / 31.5, 40 / 31.5])
    # Nothing offloaded: the step is unchanged.
    assert float(offloaded_step_s(0.020, 0.0, 31.5, False)) == 0.020


def test_offload_never_lowers_tpot() -> None:
    rng = np.random.default_rng(0)
    step = rng.uniform(0.001, 0.2, 200)
    offloaded = rng.uniform(0.0, 80e9, 200)
    link = rng.choice([15.75, 31.5, 63.0, 121.0, 450.0], 200)
    for overlapped in (False, True):
        got = offloaded_step_s(step, offloaded, link, overlapped)
        assert np.all(got >= step)
        assert np.all(got >= offload_step_floor_s(offloaded, link))


def test_offload_needed_to_fit() -> None:
    # 141 GB of weights against 72 GB free: 69 GB must live in host memory; 60 GB of weights fit as they are.
    np.testing.assert_allclose(offload_needed_bytes([141e9, 60e9], 72e9), [69e9, 0.0])


def test_llama_70b_bf16_on_one_h100_needs_offload_by_hand() -> None:
    # The relaxation case: 70.55e9 parameters x 2 bytes = 141.1 GB of weights; an H100 SXM (80 GB, 3350 GB/s)
    # at vLLM's 0.9 memory share holds 72 GB, so 69.1 GB go to host memory. Each step streams them over
    # PCIe 5.0 x16 (63 GB/s): 1.0968 s, plus reading all 141.1 GB from HBM: 42.1 ms; 1.139 s per token.
    catalog, levers = load_catalog(), load_levers()
    model = catalog.resolve_model("meta-llama/Llama-3.1-70B-Instruct")
    gpu = next(g for g in catalog.gpus if g.id == "h100-sxm")
    link_gb_s = levers.host_link_bw_gb_s_per_direction("h100-sxm")
    assert model is not None and link_gb_s == 63.0
    weights_bytes = model.total_params_b * 1e9 * 2
    offload = offload_needed_bytes(weights_bytes, gpu.memory_gb * 1e9 * 0.9)
    assert float(offload) == pytest.approx(69.1e9)
    step_s = weights_bytes / (gpu.memory_bw_gb_s * 1e9)
    tpot = offloaded_step_s(step_s, offload, link_gb_s, False)
    assert float(tpot) == pytest.approx(69.1 / 63 + 141.1 / 3350)
    assert float(tpot) == pytest.approx(1.139, abs=1e-3)


# ---- the prefix working set and the KV offload tier --------------------------------------------------------


def test_free_prefix_pool_by_hand() -> None:
    # Llama-3.1-8B BF16: 131072 KV bytes per token per GPU. A 40 GB pool with 32 sequences of 4224 tokens
    # (32 x 4224 x 131072 = 17.72 GB) leaves 22.28 GB: 22.28e9 / 131072 = 169,980.9 tokens of prefixes.
    seq = 4224 * 131072
    got = free_prefix_pool_tok(40e9, [32, 0, 1000], seq, 131072)
    assert got[0] == pytest.approx((40e9 - 32 * seq) / 131072)
    assert got[1] == pytest.approx(40e9 / 131072)
    assert got[2] == 0.0              # a batch that fills the pool leaves nothing (never negative)


def test_tier_shares_by_hand() -> None:
    # LRU, uniform reuse: W = 1M tokens, F = 250k free on the GPU, H = 500k in host memory: 25 % of the hits
    # are on the GPU, min(1, 750k / 1M) - 25 % = 50 % in the host tier, 25 % recomputed.
    gpu, host = prefix_tier_shares(250_000, 500_000, 1_000_000)
    assert float(gpu) == pytest.approx(0.25) and float(host) == pytest.approx(0.5)
    # a tier larger than the rest of the set: everything is held, the host share is what the GPU lacks
    gpu, host = prefix_tier_shares(250_000, 5_000_000, 1_000_000)
    assert float(gpu) == pytest.approx(0.25) and float(host) == pytest.approx(0.75)


def test_no_offload_and_a_set_within_the_pool_change_nothing() -> None:
    # offload 0: the GPU share alone; W <= F: every hit on the GPU, nothing for the host tier to hold
    gpu, host = prefix_tier_shares([250_000, 2_000_000, 1_000_000], [0, 0, 700_000], [1_000_000] * 3)
    assert gpu.tolist() == pytest.approx([0.25, 1.0, 1.0]) and host.tolist() == [0.0, 0.0, 0.0]


def test_no_working_set_keeps_every_hit_on_the_gpu() -> None:
    # a working set of 0 (not described): the assumption before it, every hit served from GPU blocks
    gpu, host = prefix_tier_shares(0, 1_000_000, 0)
    assert float(gpu) == 1.0 and float(host) == 0.0


def test_tier_shares_are_monotone_in_the_tier() -> None:
    rng = np.random.default_rng(7)
    free, w = rng.uniform(0, 2e6, 500), rng.uniform(1, 4e6, 500)
    h1 = rng.uniform(0, 4e6, 500)
    h2 = h1 + rng.uniform(0, 4e6, 500)
    g1, o1 = prefix_tier_shares(free, h1, w)
    g2, o2 = prefix_tier_shares(free, h2, w)
    assert np.array_equal(g1, g2) and np.all(o2 >= o1 - 1e-15) and np.all(g1 + o1 <= 1.0 + 1e-15)
