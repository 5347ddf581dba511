"""The serving steady state (service/core/serve.py): properties that must hold for any efficiencies, and
figures worked out by hand. They run the real core on the real catalog with the starting efficiencies of
costmodel.yaml (no fit), so they test the model's structure; the fitted values are tested through the API."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.core import cpu_pool, serve, serve_kernel
from service.core.costmodel import (
    MODES,
    PARAM_NAMES,
    Params,
    ServeInputs,
    static_terms,
    take_rows,
)
from tests.core.support import (
    EMBED,
    LINEAR,
    PARAMS,
    TABLES,
    cand,
    deployments,
    kernel,
    run,
)


@settings(max_examples=60, deadline=None)
@given(d=deployments, mode=st.sampled_from(["concurrency", "request_rate"]))
def test_more_load_never_lowers_ttft_or_tpot(d: dict[str, Any], mode: str) -> None:
    loads = np.geomspace(1, 4096, 40) if mode == "concurrency" else np.geomspace(0.01, 500, 40)
    r = run(cand(d.pop("model"), d.pop("gpu"), mode=mode, load=loads, **d))
    assert np.all(np.diff(r.ttft_s) >= -1e-9 * r.ttft_s[1:])
    assert np.all(np.diff(r.tpot_s) >= -1e-9 * r.tpot_s[1:])


@settings(max_examples=60, deadline=None)
@given(d=deployments)
def test_throughput_rises_with_concurrency_until_saturation(d: dict[str, Any]) -> None:
    loads = np.arange(1, 257, dtype=np.float64)
    r = run(cand(d.pop("model"), d.pop("gpu"), mode="concurrency", load=loads, **d))
    below = loads <= r.max_concurrency[0]
    thr = r.output_tok_s[below]
    # 2%: where the prefill queue binds (long prompts, two-token outputs on a small GPU) throughput is a
    # plateau, on which the switch from one-shot to chunked prefill as the replica gets busy dips by up
    # to ~1% (the chunked step adds the decode step's weight read to the chunk's compute instead of
    # overlapping them: a known approximation, not physics); the faults this test caught were 5-10%. From two
    # clients on: one client's prompt runs alone on an idle replica, with no decode to share its steps, which
    # a prefill-bound workload (long prompts, short outputs) does not regain until several clients share them
    assert np.all(np.diff(thr[1:]) >= -2e-2 * thr[2:])


@settings(max_examples=60, deadline=None)
@given(d=deployments, factor=st.floats(1.01, 4.0), load=st.integers(1, 512))
def test_more_bandwidth_never_makes_decode_slower(d: dict[str, Any], factor: float, load: int) -> None:
    # at a fixed batch (in a closed loop, a faster server may hold more sequences in decode, whose steps
    # then carry more prompt chunks: TPOT there is not a property of bandwidth alone)
    c = cand(d.pop("model"), d.pop("gpu"), mode="static_batch", load=load, **d)
    faster = replace(TABLES, bw_bytes_s=TABLES.bw_bytes_s * factor)
    base, fast = run(c), run(c, tables=faster)
    assert fast.tpot_s[0] <= base.tpot_s[0] * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(d=deployments)
def test_fp8_never_needs_more_memory_than_bf16(d: dict[str, Any]) -> None:
    d.pop("wd")
    model, gpu = d.pop("model"), d.pop("gpu")
    bf16 = run(cand(model, gpu, wd="bf16", **d))
    fp8 = run(cand(model, gpu, wd="fp8", kv="fp8", **d))
    assert fp8.weights_bytes[0] <= bf16.weights_bytes[0]
    assert fp8.kv_bytes_per_seq[0] <= bf16.kv_bytes_per_seq[0]
    assert fp8.max_concurrency[0] >= bf16.max_concurrency[0]
    assert fp8.fits[0] or not bf16.fits[0]


def test_low_load_ttft_approaches_the_prefill_and_tpot_a_single_step() -> None:
    r = run(cand("meta-llama/Llama-3.1-8B", "h100-sxm", mode="request_rate", load=[0.001], isl=2048, osl=128))
    fixed = float(PARAMS.ttft_fixed_s)
    overhead_s = float(PARAMS.step_overhead_s) + 32 * float(PARAMS.layer_overhead_s)    # 32 layers
    assert r.ttft_s[0] == pytest.approx(fixed + r.prefill_s[0] + overhead_s, rel=0.05)
    one = run(cand("meta-llama/Llama-3.1-8B", "h100-sxm", mode="static_batch", load=[1], isl=2048, osl=128))
    assert r.tpot_s[0] == pytest.approx(one.tpot_s[0], rel=0.05)


def test_tensor_parallel_pays_all_reduce_on_pcie_more_than_nvlink() -> None:
    # Same model and split; H100 PCIe links are 128 GB/s vs 900 GB/s NVLink (catalog), so the gap between TP=2
    # and an ideal halving is larger on PCIe.
    kw: dict[str, Any] = {"mode": "concurrency", "load": 64, "isl": 2048, "osl": 256}
    ratios = {}
    for gpu in ("h100-pcie", "h100-sxm"):
        one = run(cand("meta-llama/Llama-3.1-8B", gpu, **kw)).ttft_s[0]
        two = run(cand("meta-llama/Llama-3.1-8B", gpu, tp=2, **kw)).ttft_s[0]
        ratios[gpu] = two / one
    assert ratios["h100-pcie"] > ratios["h100-sxm"]



@settings(max_examples=20, deadline=None)
@given(d=deployments, mode=st.sampled_from(["offline", "concurrency", "request_rate"]), seed=st.integers(0, 99))
def test_serving_inputs_built_once_solve_any_load_and_replicas_as_serve_does(d: dict[str, Any], mode: str,
                                                                            seed: int) -> None:
    # the recommendation search builds each unit's ServeInputs at one replica and unit load, then solves
    # subsets of them at other replica counts and loads: the figures must be serve's for those candidates
    rng = np.random.default_rng(seed)
    n = 12
    static = static_terms(TABLES, cand(d.pop("model"), d.pop("gpu"), mode=mode, load=np.ones(n), **d))
    inputs = ServeInputs.of(static, PARAMS)
    idx = rng.integers(0, n, 20)
    replicas = rng.choice([1.0, 2.0, 5.0, 64.0], size=len(idx))
    load = float(rng.choice([0.3, 4.0, 50.0, 900.0]))
    _, ttft, tpot, per_replica_s, share, over = inputs.take(idx, replicas, load).solve(MODES[mode])
    # solve_at gathers the same candidates in the threads that solve them: the same figures
    for got, want in zip(inputs.solve_at(idx, replicas, load, MODES[mode]),
                         inputs.take(idx, replicas, load).solve(MODES[mode]), strict=True):
        assert np.array_equal(got, want)
    want = serve.serve(replace(take_rows(static, idx), replicas=replicas, load=np.full(len(idx), load)),
                           Params(*(np.full(len(idx), float(getattr(PARAMS, f))) for f in PARAM_NAMES)))
    for got, name in ((ttft, "ttft_s"), (tpot, "tpot_s"), (share, "compute_bound_share"), (over, "overloaded"),
                      (per_replica_s * replicas, "requests_s")):
        assert np.array_equal(got, getattr(want, name)), name



def test_a_solve_split_over_threads_gives_the_one_calls_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    # ServeInputs.solve splits many candidates into chunks that the threads of three cores take in turn
    # (whatever this machine has): the chunks, put back together, must be the single call's answer in the
    # candidates' order
    monkeypatch.setattr(cpu_pool, "CORES", 3)
    loads = np.geomspace(0.05, 3000, 5 * cpu_pool.SPLIT_MIN_CANDIDATES + 17)
    static = static_terms(TABLES, cand("meta-llama/Llama-3.1-8B-Instruct", "l4", mode="concurrency", load=loads))
    inputs = ServeInputs.of(static, PARAMS)
    split = inputs.solve(MODES["concurrency"])
    whole = kernel(MODES["concurrency"], inputs.moe, inputs.rows)
    assert len(split[0]) == len(loads)
    for got, want in zip(split, whole, strict=True):
        assert np.array_equal(got, want)
    # and gathered in parts by the threads: candidates picked in a shuffled order, some twice
    rng = np.random.default_rng(0)
    # candidates that differ in more than their load (the solve_at call sets one load for all)
    inputs.rows[serve_kernel.KERNEL_INPUTS.index("cap_mean")] *= rng.uniform(0.2, 1.0, len(loads))
    idx = rng.permutation(np.concatenate([np.arange(len(loads)), np.arange(0, len(loads), 5)]))
    replicas = rng.choice([1.0, 2.0, 8.0], size=len(idx))
    finished: dict[int, tuple[int, list[np.ndarray]]] = {}
    picked = inputs.solve_at(idx, replicas, 50.0, MODES["concurrency"],
                             lambda a, b, *part: finished.setdefault(a, (b, [p.copy() for p in part])))
    # each chunk handed on once, by the thread that solved it, with its slice of the answer: six chunks (two per
    # core; the 6,165 candidates make six of at least SPLIT_MIN_CANDIDATES)
    bounds = sorted((a, b) for a, (b, _) in finished.items())
    assert len(bounds) == 3 * cpu_pool.CHUNKS_PER_CORE == 6
    assert [a for a, _ in bounds] == [0] + [b for _, b in bounds[:-1]]
    assert bounds[-1][1] == len(idx)
    for a, (b, part) in finished.items():
        for got, whole_answer in zip(part, picked, strict=True):
            assert np.array_equal(got, whole_answer[a:b])
    rows = np.take(inputs.rows, idx, axis=1)
    rows[serve_kernel.KERNEL_INPUTS.index("per_replica")] = 50.0 / replicas
    alone = kernel(MODES["concurrency"], inputs.moe[idx], rows)
    for got, want in zip(picked, alone, strict=True):
        assert len(got) == len(idx) and np.array_equal(got, want)



def test_one_client_at_long_context_decodes_at_weights_plus_kv_over_bandwidth() -> None:
    # Llama-3.1-8B BF16 on one H100, one client, 120,000 tokens in, 256 out. A decode step reads the weights
    # (LINEAR x 2 B + EMBED x 2 B) and this request's KV cache at its mean context of 120,000 + 256 / 2 tokens
    # (2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B per token), at the H100's 3,350 GB/s datasheet
    # bandwidth times eff_bw, plus the per-step and per-layer (32) overheads; no other request's prompt rides
    # along. Compute (2 x 8e9 FLOPs per token) is ~1e-3 of the step, so the smooth maximum adds ~nothing.
    weights_bytes = LINEAR * 2 + EMBED * 2
    kv_bytes = 131_072 * (120_000 + 128)
    floor_s = ((weights_bytes + kv_bytes) / (3350e9 * float(PARAMS.eff_bw)) + float(PARAMS.step_overhead_s)
               + 32 * float(PARAMS.layer_overhead_s))
    r = run(cand("meta-llama/Llama-3.1-8B", "h100-sxm", isl=120_000, osl=256, load=1.0, ctx=131_072))
    assert r.tpot_s[0] == pytest.approx(floor_s, rel=0.10)
