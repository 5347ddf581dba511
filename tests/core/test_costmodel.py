"""The cost model's physics: hand-computed memory figures and properties that must hold for any efficiencies.

These run the real core on the real catalog with the starting efficiencies of costmodel.yaml (no fit), so
they test the model's structure; the fitted values are tested through the API.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_catalog.loader import load_catalog, load_cost_constants
from service.core import costmodel, cpu_pool, serve, serve_kernel
from service.core.costmodel import (
    BUDGET_SHARE_OF_FREE,
    BUDGET_SHARE_OF_TOTAL,
    MODES,
    PARAM_NAMES,
    Candidates,
    Params,
    Result,
    ServeInputs,
    Tables,
    build_tables,
    evaluate,
    static_terms,
    step_model,
    take_rows,
    warm_up,
)
from service.core.step_kernels import decode_step_f

CATALOG = load_catalog()
CONSTANTS = load_cost_constants()
TABLES = build_tables(CATALOG, CONSTANTS)
IDX = TABLES.index()
PARAMS = Params(*(np.asarray(CONSTANTS.initial_params[n].initial) for n in PARAM_NAMES))


def cand(model: str, gpu: str, *, wd: str = "bf16", kv: str = "auto", tp: int = 1, pp: int = 1, replicas: int = 1,
         seqs: float = 256, tokens: float = 8192, frac: float = 0.9, budget: int = BUDGET_SHARE_OF_TOTAL,
         isl: float = 1024, osl: float = 256, mode: str = "concurrency", load: Any = 1.0,
         ctx: float | None = None) -> Candidates:
    """Candidates for one deployment; ``load`` may be an array (one candidate per value)."""
    loads = np.atleast_1d(np.asarray(load, dtype=np.float64))
    n = len(loads)

    def full(v: float) -> np.ndarray:
        return np.full(n, float(v))

    def ints(v: int) -> np.ndarray:
        return np.full(n, v, dtype=np.int64)

    return Candidates(
        model=ints(IDX["model"][CATALOG.resolve_model(model).id]), gpu=ints(IDX["gpu"][gpu]),
        wdtype=ints(IDX["wdtype"][wd]), kvdtype=ints(IDX["kvdtype"][kv]), budget=ints(budget), tp=full(tp),
        pp=full(pp), ep=full(1), replicas=full(replicas), max_num_seqs=full(seqs), max_batched_tok=full(tokens),
        mem_fraction=full(frac), input_tok=full(isl), output_tok=full(osl), mode=ints(MODES[mode]), load=loads,
        context_tok=full(ctx if ctx is not None else isl + osl),
        first_wave_share=full(1.0 if mode == "offline" else 0.0))


def run(c: Candidates, tables: Tables = TABLES, params: Params = PARAMS) -> Result:
    return evaluate(tables, c, params)


# --- memory: hand-computed -------------------------------------------------------------------------

# Llama-3.1-8B: 8.03e9 parameters (catalog total_params_b), of which the untied embedding and LM head are
# 2 x 128,256 x 4,096 = 1,050,673,152 elements, kept in 16 bits by every recipe; the other 6,979,326,848
# take the dtype's bits per weight (fp8: 8; int4-awq: 4 + 16-bit scale and zero per 128 = 4.15625).
EMBED = 2 * 128_256 * 4_096
LINEAR = 8.03e9 - EMBED


@pytest.mark.parametrize(("wd", "expected_bytes"), [
    ("bf16", 8.03e9 * 2),                                   # 16.06 GB
    ("fp8", LINEAR * 1 + EMBED * 2),                        # 9.08 GB
    ("int4-awq", LINEAR * 4.15625 / 8 + EMBED * 2),         # 5.73 GB
])
def test_llama_31_8b_weights_by_dtype(wd: str, expected_bytes: float) -> None:
    r = run(cand("meta-llama/Llama-3.1-8B", "h100-sxm", wd=wd))
    assert r.weights_bytes[0] == pytest.approx(expected_bytes, rel=1e-9)


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


# --- physics as properties -----------------------------------------------------------------------

MODELS = ["meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "mistralai/Mixtral-8x7B-v0.1",
          "Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V3"]
GPUS = ["l4", "a100-80gb-sxm", "h100-sxm", "h200-sxm", "b200", "mi300x"]
deployments = st.fixed_dictionaries({
    "model": st.sampled_from(MODELS), "gpu": st.sampled_from(GPUS), "tp": st.sampled_from([1, 2, 4, 8]),
    "wd": st.sampled_from(["bf16", "fp8", "int4-awq"]), "isl": st.integers(16, 8192), "osl": st.integers(2, 2048),
    "seqs": st.sampled_from([8, 64, 256, 1024]), "tokens": st.sampled_from([512, 2048, 8192]),
})


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
    assert r.ttft_s[0] == pytest.approx(fixed + r.prefill_s[0] + float(PARAMS.step_overhead_s), rel=0.05)
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


def kernel(mode: int, moe: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """The compiled solve of every candidate in ``rows``: batch, TTFT, TPOT, requests/s, compute share, overloaded."""
    out, over = serve_kernel.serve_kernel(mode, moe, rows)
    return (*out, over)


@settings(max_examples=30, deadline=None)
@given(d=deployments, batch=st.floats(0.0, 2048.0))
def test_the_compiled_serving_solve_steps_like_the_step_model(d: dict[str, Any], batch: float) -> None:
    # the compiled solve (serve_kernel.serve_into) times decode steps with its own scalar copy of
    # StepModel.decode_step (which the simulation's step tables use): the two must agree to the last bit
    st_ = static_terms(TABLES, cand(d.pop("model"), d.pop("gpu"), **d))
    sm = step_model(st_, PARAMS)
    want = sm.decode_step(np.asarray([batch]))
    got = decode_step_f(batch, sm.pp[0], sm.dense_s[0], sm.expert_s[0], sm.log_miss[0], bool(sm.moe[0]), sm.seq_s[0],
                         sm.flop_s_seq[0], sm.comm_fixed_s[0], sm.comm_seq_s[0], float(sm.step_fixed_s[0]))
    assert got == (float(want[0][0]), float(want[1][0]))


def test_the_serving_solve_is_compiled_once_for_every_mode() -> None:
    # another argument type (a read-only view, say) would compile the kernel again: ~6 s in a request
    warm_up()
    for mode in MODES:
        run(cand("Qwen/Qwen3-30B-A3B", "h100-sxm", mode=mode, load=[1.0, 8.0]))
    assert len(serve_kernel.serve_into.signatures) == 1


@settings(max_examples=20, deadline=None)
@given(d=deployments, mode=st.sampled_from(list(MODES)))
def test_the_compiled_serving_solve_gives_the_interpreted_ones_figures(d: dict[str, Any], mode: str) -> None:
    # the same function run as Python (numba's py_func) must give the same figures to the last bit
    c = cand(d.pop("model"), d.pop("gpu"), mode=mode, load=np.geomspace(0.05, 500, 12), **d)
    compiled = run(c)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(serve, "serve_into", serve_kernel.serve_into.py_func)
        m.setattr(serve_kernel, "_root_block", serve_kernel._root_block.py_func)
        interpreted = run(c)
    for f in fields(Result):
        got, want = getattr(compiled, f.name), getattr(interpreted, f.name)
        # correction: none without users' measurements, in both
        assert (got is None and want is None) or np.array_equal(got, want, equal_nan=True), f.name


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
    want = costmodel.serve(replace(take_rows(static, idx), replicas=replicas, load=np.full(len(idx), load)),
                           Params(*(np.full(len(idx), float(getattr(PARAMS, f))) for f in PARAM_NAMES)))
    for got, name in ((ttft, "ttft_s"), (tpot, "tpot_s"), (share, "compute_bound_share"), (over, "overloaded"),
                      (per_replica_s * replicas, "requests_s")):
        assert np.array_equal(got, getattr(want, name)), name


@pytest.mark.parametrize("mode", ["concurrency", "request_rate"])
def test_a_candidates_solve_does_not_depend_on_the_others_in_its_call(mode: str) -> None:
    # the compiled solve takes candidates in blocks (serve_kernel._ROOT_BLOCK): 300 candidates solved together
    # must get exactly the figures each gets alone
    loads = np.geomspace(0.05, 3000, 300)
    static = static_terms(TABLES, cand("Qwen/Qwen3-30B-A3B", "h100-sxm", mode=mode, load=loads))
    inputs = ServeInputs.of(static, PARAMS)
    together = inputs.solve(MODES[mode])
    for i in range(0, len(loads), 7):
        alone = kernel(MODES[mode], inputs.moe[i:i + 1].copy(), np.ascontiguousarray(inputs.rows[:, i:i + 1]))
        for got, want in zip(alone, together, strict=True):
            assert got[0] == want[i]


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
    inputs.rows[costmodel.KERNEL_INPUTS.index("cap_mean")] *= rng.uniform(0.2, 1.0, len(loads))
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
    rows[costmodel.KERNEL_INPUTS.index("per_replica")] = 50.0 / replicas
    alone = kernel(MODES["concurrency"], inputs.moe[idx], rows)
    for got, want in zip(picked, alone, strict=True):
        assert len(got) == len(idx) and np.array_equal(got, want)


@pytest.mark.parametrize(("files", "cpus"), [
    ({"cpu.max": "200000 100000\n"}, 2.0),                      # cgroup v2: a container limited to 2 CPUs
    ({"cpu.max": "max 100000\n"}, None),                        # v2, no limit
    ({"cpu/cpu.cfs_quota_us": "150000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1.5),   # v1
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),      # v1, no limit
    ({}, None),                                                 # no cgroup files at all
])
def test_a_containers_cpu_limit_is_read_from_its_cgroup(tmp_path: Any, files: dict[str, str],
                                                        cpus: float | None) -> None:
    # the serving solve splits over the cores the process may use: a container sees its host's cores, but
    # its CPU limit is what it can run on
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cpu_pool.cgroup_cpus(tmp_path) == cpus


def test_usable_cores_are_the_affinity_within_the_cpu_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    cores = cpu_pool.usable_cores()
    monkeypatch.setattr(cpu_pool, "cgroup_cpus", lambda: 0.5)      # half a CPU: one thread still
    assert cpu_pool.usable_cores() == 1
    monkeypatch.setattr(cpu_pool, "cgroup_cpus", lambda: 1000.0)   # a limit above the cores: the cores
    assert cpu_pool.usable_cores() == cores >= 1


def test_one_client_at_long_context_decodes_at_weights_plus_kv_over_bandwidth() -> None:
    # Llama-3.1-8B BF16 on one H100, one client, 120,000 tokens in, 256 out. A decode step reads the weights
    # (LINEAR x 2 B + EMBED x 2 B) and this request's KV cache at its mean context of 120,000 + 256 / 2 tokens
    # (2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B per token), at the H100's 3,350 GB/s datasheet
    # bandwidth times eff_bw, plus the per-step overhead; no other request's prompt rides along. Compute (2 x
    # 8e9 FLOPs per token) is ~1e-3 of the step, so the smooth maximum adds ~nothing.
    weights_bytes = LINEAR * 2 + EMBED * 2
    kv_bytes = 131_072 * (120_000 + 128)
    floor_s = (weights_bytes + kv_bytes) / (3350e9 * float(PARAMS.eff_bw)) + float(PARAMS.step_overhead_s)
    r = run(cand("meta-llama/Llama-3.1-8B", "h100-sxm", isl=120_000, osl=256, load=1.0, ctx=131_072))
    assert r.tpot_s[0] == pytest.approx(floor_s, rel=0.10)
