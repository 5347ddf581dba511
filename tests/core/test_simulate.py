"""The scheduler simulation against known results: hand-computed step sums, M/D/1, Little's law, the analytic
steady state, and properties that must hold for any deployment.

The real core on the real catalog with the starting efficiencies of costmodel.yaml (as test_costmodel.py);
tolerances are stated with what was measured when they were set.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from service.core.costmodel import (
    MODE_CONCURRENCY,
    MODE_OFFLINE,
    MODE_RATE,
    MODES,
    Result,
    Static,
    serve,
    static_terms,
    step_model,
)
from service.core.sim_kernel import loop as _loop
from service.core.sim_kernel import warm_up
from service.core.simulate import (
    CTX_GRID_POINTS,
    QUANTILES,
    Lengths,
    Load,
    Replica,
    SimResult,
    Stat,
    _linear_quantiles,
    decode_table,
    replica,
    request_costs,
    simulate,
    table_grid,
)
from tests.core.support import PARAMS, TABLES, cand

METRICS = ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_s")
STATS = ("mean", "p50", "p90", "p95", "p99")
FIXED_S = float(PARAMS.ttft_fixed_s)
# a forward pass's software overhead of the default model: per step, and per layer of its layers
OVERHEAD_S = float(PARAMS.step_overhead_s) + float(
    static_terms(TABLES, cand("meta-llama/Llama-3.1-8B", "h100-sxm")).layers[0]) * float(PARAMS.layer_overhead_s)


def setup(model: str = "meta-llama/Llama-3.1-8B", gpu: str = "h100-sxm", *, mode: str = "request_rate",
          load: float = 1.0, reserve_full: bool = False, chunked: bool = True,
          **kw: Any) -> tuple[Static, Result, Replica]:
    st_ = static_terms(TABLES, cand(model, gpu, mode=mode, load=[load], **kw))
    return st_, serve(st_, PARAMS), replica(st_, PARAMS, 0, chunked_prefill=chunked, reserve_full=reserve_full)


def run(rep: Replica, mode: int, load: float, isl: float, osl: float, *, cv: float = 0.0, n: int = 2000,
        seed: int = 0, burst: bool = False) -> SimResult:
    return simulate(rep, Load(mode, load, Lengths(isl, cv * isl), Lengths(osl, cv * osl), requests=n, seed=seed,
                              burst_start=burst))


def table(r: SimResult) -> np.ndarray:
    return np.asarray([[getattr(getattr(r, m), q) for q in STATS] for m in METRICS])


# --- hand-computed ---------------------------------------------------------------------------------

def test_low_load_ttft_is_the_prefill_and_tpot_the_single_sequence_step() -> None:
    # one request at a time: TTFT = front end + the prompt prefilled alone + one step's overhead (what the
    # analytic model gives at no load); TPOT = the one-sequence decode step (the static batch of one)
    _, res, rep = setup(isl=2048, osl=128, load=1e-3)
    r = run(rep, MODE_RATE, 1e-3, 2048, 128, n=300)
    alone = FIXED_S + float(res.prefill_s[0]) + OVERHEAD_S
    one = serve(static_terms(TABLES, cand("meta-llama/Llama-3.1-8B", "h100-sxm", mode="static_batch", load=[1],
                                          isl=2048, osl=128)), PARAMS)
    # measured: 5e-10 (TTFT) and 4e-12 (TPOT): the same step model, summed
    assert r.ttft_s.p50 == pytest.approx(alone, rel=1e-6) and r.ttft_s.p99 == pytest.approx(alone, rel=1e-6)
    assert r.tpot_s.mean == pytest.approx(float(one.tpot_s[0]), rel=1e-6)
    assert r.queue_s.p99 == 0.0 and r.preemptions == 0


def test_a_long_prompt_is_prefilled_in_chunks_of_the_token_budget() -> None:
    # 6000 tokens through a 2048-token budget on an idle replica: steps of 2048, 2048 and 1904 tokens, each
    # reading the weights again (compute of each chunk = its share of the whole prompt's compute)
    st_, _, rep = setup(isl=6000, osl=16, tokens=2048, load=1e-3)
    r = run(rep, MODE_RATE, 1e-3, 6000, 16, n=100)
    sm = step_model(st_, PARAMS)
    per_tok = float(sm.prompt_compute_s(np.asarray([6000.0]))[0]) / 6000.0
    steps = sum(float(sm.prefill_only_s(np.asarray([c * per_tok]), np.asarray([float(c)]))[0]) + OVERHEAD_S
                for c in (2048, 2048, 1904))
    assert r.ttft_s.p50 == pytest.approx(FIXED_S + steps, rel=1e-9)
    assert r.ttft_s.p50 > FIXED_S + float(sm.prefill_alone_s[0]) + OVERHEAD_S    # three weight reads, not one


def test_without_chunked_prefill_a_prompt_waits_for_a_step_with_room_for_all_of_it() -> None:
    # two clients at once, 1000-token prompts, a 1500-token budget: chunked, both start in the first step
    # (1000 + 500 tokens); whole prompts only (TensorRT-LLM's default), the second waits one step
    kw: dict[str, Any] = {"isl": 1000, "osl": 64, "tokens": 1500, "mode": "concurrency", "load": 2}
    st_, _, rep = setup(**kw)
    chunked = run(rep, MODE_CONCURRENCY, 2, 1000, 64, n=2, burst=True)
    whole = run(setup(chunked=False, **kw)[2], MODE_CONCURRENCY, 2, 1000, 64, n=2, burst=True)
    assert chunked.queue_s.mean == 0.0
    # queue times [0, the first prompt's step alone]: their mean is half that step
    first_step_s = float(step_model(st_, PARAMS).prefill_alone_s[0]) + OVERHEAD_S
    assert 2.0 * whole.queue_s.mean == pytest.approx(first_step_s, rel=1e-9)


@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B", "Qwen/Qwen3-30B-A3B", "google/gemma-2-9b",
                                   "mistralai/Mistral-7B-v0.1"])
@pytest.mark.parametrize(("lo_tok", "hi_tok", "tolerance"), [(1024.0, 5121.0, 1e-4), (1.0, 32768.0, 1e-2)])
def test_the_step_table_interpolates_the_step_model(model: str, lo_tok: float, hi_tok: float,
                                                    tolerance: float) -> None:
    # batches 1-256 at any mean context the table spans, across gemma-2's and Mistral's 4096-token windows.
    # Measured: 6e-6 over prompts of 1-4k with 1k outputs; 0.56% over 1-32k, where the smooth maximum bends
    # at short contexts and large batches between points 256 tokens apart
    sm = step_model(static_terms(TABLES, cand(model, "h100-sxm", isl=4096, osl=1024, ctx=32768)), PARAMS)
    table = decode_table(sm, 256, lo_tok, hi_tok)
    rng = np.random.default_rng(3)
    batch, ctx = rng.integers(1, 257, 3000), rng.uniform(lo_tok, hi_tok, 3000)
    direct = sm.decode_step(batch.astype(np.float64), ctx)[0]
    interp = np.asarray([table.at(int(b), float(c)) for b, c in zip(batch, ctx, strict=True)])
    assert np.max(np.abs(interp / direct - 1.0)) < tolerance


@pytest.mark.parametrize(("model", "gpu", "tp", "pp"), [
    ("meta-llama/Llama-3.1-8B", "a10", 1, 1), ("google/gemma-2-9b", "h100-sxm", 2, 1),
    ("Qwen/Qwen3-30B-A3B", "h100-sxm", 2, 1), ("meta-llama/Llama-3.1-70B", "a100-80gb-sxm", 4, 2)])
def test_the_step_table_is_the_step_model_at_its_grid_points(model: str, gpu: str, tp: int, pp: int) -> None:
    # the table is built by the compiled decode step; it must be StepModel.decode_step at every batch and grid
    # context: to the last bit on dense models, within NumPy's vectorised expm1 (an ulp) on MoE ones
    sm = step_model(static_terms(TABLES, cand(model, gpu, tp=tp, pp=pp, isl=4096, osl=1024, ctx=32768)), PARAMS)
    table = decode_table(sm, 300, 7.0, 30000.0)
    want = sm.decode_step(np.arange(301, dtype=np.float64)[:, None], table_grid(sm, 7.0, 30000.0)[2][None, :])[0]
    assert table.rows.shape == want.shape == (301, CTX_GRID_POINTS)
    if bool(sm.moe[0]):
        assert np.max(np.abs(table.rows / want - 1.0)) < 1e-15       # measured: at most 4.4e-16
    else:
        assert np.array_equal(table.rows, want)


def test_decode_step_at_the_mean_context_is_the_analytic_step() -> None:
    st_ = static_terms(TABLES, cand("Qwen/Qwen3-30B-A3B", "h100-sxm", isl=3000, osl=500, tp=2))
    sm = step_model(st_, PARAMS)
    batch = np.asarray([1.0, 7.0, 64.0, 300.0])
    assert np.allclose(sm.decode_step(batch, st_.isl + st_.osl / 2.0)[0], sm.decode_step(batch)[0], rtol=1e-12)


def test_a_carried_prompt_reads_the_experts_it_routes_to() -> None:
    # a 512-token chunk beside one decoding sequence routes to nearly every expert: the step pays for reading
    # them when that outweighs the chunk's compute (MoE); a dense step already reads every weight
    moe = step_model(static_terms(TABLES, cand("Qwen/Qwen3-30B-A3B", "h100-sxm")), PARAMS).one(0)
    dense = step_model(static_terms(TABLES, cand("meta-llama/Llama-3.1-8B", "h100-sxm")), PARAMS).one(0)
    compute_s = 1e-4
    assert dense.carried_prefill_s(1.0, 512.0, compute_s) == compute_s
    assert moe.carried_prefill_s(1.0, 512.0, compute_s) > 0.9 * moe.expert_s > compute_s


# --- known results ---------------------------------------------------------------------------------

@pytest.mark.parametrize("rho", [0.5, 0.7])
def test_one_slot_and_poisson_arrivals_queue_as_md1(rho: float) -> None:
    # max_num_seqs = 1 and fixed lengths: a single server with deterministic service S (a prefill step and
    # 63 decode steps). Mean wait W = rho S / (2 (1 - rho)). Measured with 60,000 requests: -0.9% at rho 0.5,
    # +1.5% at 0.7 (the sampling error of a mean wait at this size, ~1%)
    _, _, rep = setup(isl=512, osl=64, seqs=1)
    service_s = run(rep, MODE_RATE, 1e-4, 512, 64, n=100).e2e_s.p50 - FIXED_S
    r = run(rep, MODE_RATE, rho / service_s, 512, 64, n=60_000)
    assert r.queue_s.mean == pytest.approx(rho * service_s / (2.0 * (1.0 - rho)), rel=0.03)


@pytest.mark.parametrize(("clients", "cv"), [(4, 0.0), (32, 0.5), (300, 1.0)])
def test_closed_loop_obeys_littles_law(clients: int, cv: float) -> None:
    # each client sends its next request when the last ends: clients = completions/s x mean E2E (300 clients
    # exceed the 256 slots, so a queue forms). Measured: within 0.25%
    _, _, rep = setup(mode="concurrency", load=clients, isl=1024, osl=256, ctx=8000)
    r = run(rep, MODE_CONCURRENCY, clients, 1024, 256, cv=cv)
    assert r.requests_s * r.e2e_s.mean == pytest.approx(clients, rel=0.01)


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
@pytest.mark.parametrize("burst", [False, True])
def test_a_fixed_length_closed_loop_falls_out_of_step(engine: str, burst: bool) -> None:
    # 32 clients of identical requests: each sends its next request at a point of a step nothing ties to the
    # step boundaries, so requests meet the others' prefills at different points and wait different parts of a
    # step: TTFT spreads over at least a quarter of a decode step between p50 and p99, E2E spreads, both in order
    # (with every send on a step boundary, every request met the same steps: E2E p50 = p99, TTFT within 0.3 ms)
    _, _, rep = setup(mode="concurrency", load=32, isl=1024, osl=256, ctx=8000, reserve_full=engine == "trtllm",
                      chunked=engine == "vllm")
    r = run(rep, MODE_CONCURRENCY, 32, 1024, 256, burst=burst)
    for m in ("ttft_s", "e2e_s", "tpot_s", "queue_s"):
        s = getattr(r, m)
        assert s.p50 <= s.p90 <= s.p95 <= s.p99, (m, s)
    assert r.ttft_s.p99 - r.ttft_s.p50 > 0.25 * r.tpot_s.p50
    assert r.e2e_s.p99 > r.e2e_s.p50


@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "mistralai/Mistral-7B-v0.1"])
@pytest.mark.parametrize(("isl", "osl"), [(128, 512), (1024, 256)])
@pytest.mark.parametrize("share", [0.2, 0.45, 0.7])
def test_simulated_means_agree_with_the_analytic_steady_state(model: str, isl: int, osl: int, share: float) -> None:
    # Poisson arrivals below capacity, dense models with room in the KV cache (where both models apply).
    # TPOT: the analytic t_decode(B) + B (I/O) c_prefill is the simulation's step on average; measured within
    # 1.5% on this grid. Throughput: the offered rate (4000 requests: the arrival sample's own error ~1.6%).
    # TTFT is not compared: the simulation emits the first token at the end of the whole mixed step, the
    # analytic model charges the prompt only its share of the step's decodes (2-22% apart, measured).
    kw: dict[str, Any] = {"tp": 4 if "70B" in model else 1, "isl": isl, "osl": osl}
    _, cap, _ = setup(model, **kw)
    lam = share * float(cap.requests_s[0])
    _, res, rep = setup(model, load=lam, **kw)
    r = run(rep, MODE_RATE, lam, isl, osl, n=4000)
    assert r.tpot_s.mean == pytest.approx(float(res.tpot_s[0]), rel=0.03)
    assert r.requests_s == pytest.approx(lam, rel=0.05)
    assert r.preemptions == 0 and not r.saturated


# --- properties ------------------------------------------------------------------------------------

DENSE = ["meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "google/gemma-2-9b", "mistralai/Mistral-7B-v0.1"]
deployments = st.fixed_dictionaries({
    "model": st.sampled_from(DENSE), "gpu": st.sampled_from(["a100-80gb-sxm", "h100-sxm", "h200-sxm"]),
    "tp": st.sampled_from([1, 2, 4, 8]), "isl": st.integers(16, 4096), "osl": st.integers(2, 1024),
    "seqs": st.sampled_from([8, 64, 256]), "tokens": st.sampled_from([2048, 8192]),
})


@settings(max_examples=25, deadline=None)
@given(d=deployments, cv=st.sampled_from([0.0, 0.5, 1.0]), share=st.floats(0.05, 1.2),
       mode=st.sampled_from(["request_rate", "concurrency", "offline"]), engine=st.sampled_from(["vllm", "trtllm"]))
def test_percentiles_are_ordered(d: dict[str, Any], cv: float, share: float, mode: str, engine: str) -> None:
    model, isl, osl = d.pop("model"), d["isl"], d["osl"]
    st_, cap, _ = setup(model, ctx=4 * (isl + osl), **d)
    assume(bool(st_.fits[0]))
    load = share * float(cap.requests_s[0]) if mode == "request_rate" else max(share * 64, 1.0)
    _, _, rep = setup(model, ctx=4 * (isl + osl), mode=mode, load=load, reserve_full=engine == "trtllm",
                      chunked=engine == "vllm", **d)
    r = run(rep, MODES[mode], load, isl, osl, cv=cv, n=300)
    t = table(r)
    t = t[~np.isnan(t[:, 0])]                    # TPOT and ITL are empty when every output is one token
    assert np.all(np.diff(t[:, 1:], axis=1) >= 0.0), t          # p50 <= p90 <= p95 <= p99
    assert r.requests == 300 and np.all(t >= 0.0)


@settings(max_examples=8, deadline=None)
@given(d=deployments, cv=st.sampled_from([0.0, 0.5, 1.0]))
def test_more_request_rate_never_lowers_a_percentile(d: dict[str, Any], cv: float) -> None:
    # the same seed: the same lengths, and arrival times scaled by 1/rate. Each step's timing shifts with the
    # rate, so single requests may gain; over 4000 requests no statistic fell by more than 0.17% (measured
    # on 14 random dense deployments; with 1000 requests p99s fell by up to 3.5%). MoE models are left out:
    # the smooth maximum of the step model lets a prompt carried into a decode step cost up to ~2.5% less
    # than the same prompt alone (measured on Qwen3-30B-A3B, TP8 on L4), so their TTFT may dip with load.
    model, isl, osl = d.pop("model"), d["isl"], d["osl"]
    st_, cap, rep = setup(model, ctx=4 * (isl + osl), **d)
    assume(bool(st_.fits[0]))
    rates = np.geomspace(0.05, 0.8, 5) * float(cap.requests_s[0])
    t = np.stack([table(run(rep, MODE_RATE, float(lam), isl, osl, cv=cv, n=4000)) for lam in rates])
    ok = ~np.isnan(t[0])
    assert np.all(t[1:][:, ok] >= t[:-1][:, ok] * (1.0 - 0.01)), np.min(t[1:][:, ok] / t[:-1][:, ok])


@settings(max_examples=30, deadline=None)
@given(d=deployments, moe=st.booleans(), gpu=st.sampled_from(["l4", "a10", "h100-sxm"]), cv=st.sampled_from([0.0, 0.8]),
       share=st.floats(0.1, 1.5), mode=st.sampled_from(["request_rate", "concurrency", "offline"]),
       engine=st.sampled_from(["vllm", "trtllm", "vllm-unchunked"]))
def test_the_compiled_loop_gives_the_interpreted_loops_trace(d: dict[str, Any], moe: bool, gpu: str, cv: float,
                                                              share: float, mode: str, engine: str) -> None:
    # the event loop is compiled by numba; the same function run as Python must give the same figures to the
    # last bit, on small GPUs too (where vLLM preempts) and for MoE models (carried prompts read experts)
    model, isl, osl = ("Qwen/Qwen3-30B-A3B" if moe else d.pop("model")), d["isl"], d["osl"]
    d.pop("model", None)
    d["gpu"], d["tp"] = gpu, min(d["tp"], 2)
    st_, cap, _ = setup(model, ctx=4 * (isl + osl), **d)
    assume(bool(st_.fits[0]))
    load = share * float(cap.requests_s[0]) if mode == "request_rate" else max(share * 64, 1.0)
    _, _, rep = setup(model, ctx=4 * (isl + osl), mode=mode, load=load, reserve_full=engine == "trtllm",
                      chunked=engine != "vllm-unchunked", **d)
    spec = Load(MODES[mode], load, Lengths(isl, cv * isl), Lengths(osl, cv * osl), requests=200, seed=7)
    assert simulate(rep, spec) == simulate(rep, spec, compiled=False)


# --- the KV cache --------------------------------------------------------------------------------

def test_vllm_preempts_when_the_kv_cache_runs_out_and_trtllm_never_does() -> None:
    # Llama-3.1-8B in BF16 on a 24 GB L4 leaves ~0.9 GB of KV cache: about 5 sequences of 1280 tokens.
    # vLLM admits prompts as long as their first chunk fits and evicts the newest when decodes outgrow the
    # cache; TensorRT-LLM (GUARANTEED_NO_EVICT) admits only what fits at full length.
    kw: dict[str, Any] = {"mode": "concurrency", "load": 8, "isl": 1024, "osl": 256}
    _, _, vllm = setup("meta-llama/Llama-3.1-8B", "l4", **kw)
    _, _, trt = setup("meta-llama/Llama-3.1-8B", "l4", reserve_full=True, **kw)
    full_len = math.floor(trt.kv_capacity_tok / (1024 + 256))
    rv = run(vllm, MODE_CONCURRENCY, 8, 1024, 256, n=500)
    rt = run(trt, MODE_CONCURRENCY, 8, 1024, 256, n=500)
    assert rv.preemptions > 0 and rv.requests == 500 and math.isfinite(rv.e2e_s.p99)
    assert rt.preemptions == 0 and rt.batch_mean <= full_len
    assert rv.batch_mean > rt.batch_mean                      # vLLM packs more, and pays in recomputation


def test_offline_runs_the_whole_job_and_counts_latency_from_admission() -> None:
    st_, res, rep = setup(mode="offline", isl=1024, osl=256, load=1500)
    assert st_.cap_mean[0] < 1500      # more than the replica holds: the analytic offline steady state
    r = run(rep, MODE_OFFLINE, 0.0, 1024, 256, n=1500)
    assert r.warmup == 0 and r.requests == 1500
    # the last requests wait for most of the job (72 s); latency from admission is one request's worth (13 s)
    assert r.e2e_s.p99 < 0.25 * r.queue_s.p99
    # throughput of the saturated replica: measured 0.65% from the analytic offline steady state
    assert r.output_tok_s == pytest.approx(float(res.output_tok_s[0]), rel=0.05)



@pytest.mark.parametrize(("isl", "osl", "n"), [(1024, 256, 200), (467, 16, 250), (2048, 128, 100), (128, 2048, 100),
                                              (1024, 256, 8)])
def test_an_offline_job_the_replica_admits_at_once_is_the_analytic_job(isl: int, osl: int, n: int) -> None:
    # a job of n requests sent together, all held at once: its prompts are prefilled in full token-budget steps,
    # then the whole job decodes; the analytic job model (serve_kernel._offline_job) gives the mean TTFT from
    # the job's start (the simulation's wait for a prefill slot plus its TTFT from admission), TPOT and
    # throughput of the simulated job
    st_, res, rep = setup(mode="offline", isl=isl, osl=osl, load=n)
    assert n <= st_.cap_mean[0]
    r = run(rep, MODE_OFFLINE, 0.0, isl, osl, n=n)
    assert float(res.ttft_s[0]) == pytest.approx(r.queue_s.mean + r.ttft_s.mean, rel=0.10)
    assert float(res.tpot_s[0]) == pytest.approx(r.tpot_s.mean, rel=0.10)
    assert float(res.output_tok_s[0]) == pytest.approx(r.output_tok_s, rel=0.05)


# --- inputs ----------------------------------------------------------------------------------------

def test_same_seed_same_answer_and_another_seed_another() -> None:
    _, _, rep = setup(isl=512, osl=128, load=8.0)
    a, b, c = (run(rep, MODE_RATE, 8.0, 512, 128, cv=0.5, n=500, seed=s) for s in (0, 0, 1))
    assert a == b
    assert a.ttft_s != c.ttft_s


def test_lengths_follow_the_requested_distribution() -> None:
    rng = np.random.default_rng(0)
    x = Lengths(1000.0, std_tok=600.0).sample(rng, 200_000)
    # lognormal with that mean and spread (rounded to whole tokens, at least 1)
    assert x.mean() == pytest.approx(1000.0, rel=0.01) and x.std() == pytest.approx(600.0, rel=0.02)
    h = Lengths(300.0, hist_tok=(100.0, 500.0), hist_weight=(1.0, 1.0)).sample(rng, 100_000)
    assert set(np.unique(h)) == {100, 500} and np.mean(h == 100) == pytest.approx(0.5, abs=0.01)
    assert np.all(Lengths(7.0).sample(rng, 10) == 7)
    # fixed lengths draw nothing (no generator needed) and round as the draws do: half to even, at least 1
    for mean in (0.3, 2.5, 3.5, 1024.0):
        fixed = Lengths(mean).sample(None, 5)
        assert fixed.dtype == np.int64 and np.all(fixed == max(np.rint(mean), 1.0))


@given(x=st.lists(st.floats(1e-6, 1e6), min_size=1, max_size=300))
def test_quantiles_are_numpys_linear_percentiles(x: list[float]) -> None:
    want = np.percentile(np.asarray(x), [100 * q for q in QUANTILES.values()])
    assert np.allclose(_linear_quantiles(np.asarray(x)), want, rtol=1e-12, atol=0)


@given(x=st.lists(st.integers(1, 6), min_size=1, max_size=300), seed=st.integers(0, 99))
def test_weighted_quantiles_are_the_inverse_of_the_cumulative_weight(x: list[int], seed: int) -> None:
    # many equal values with unequal weights (the inter-token gaps): each quantile is the least value whose
    # cumulative weight reaches that share of the total, whatever order equal values are sorted in
    v = np.asarray(x, dtype=np.float64)
    w = np.random.default_rng(seed).integers(1, 50, len(v)).astype(np.float64)
    got = Stat.of(v, w)
    for q, name in zip(QUANTILES.values(), ("p50", "p90", "p95", "p99"), strict=True):
        want = min(u for u in np.unique(v) if w[v <= u].sum() >= q * w.sum())
        assert getattr(got, name) == want, name
    assert got.mean == pytest.approx(float(np.average(v, weights=w)), rel=1e-12)


def test_the_event_loop_is_compiled_once() -> None:
    warm_up()
    for engine in ("vllm", "trtllm"):
        _, _, rep = setup(mode="concurrency", load=8, reserve_full=engine == "trtllm")
        run(rep, MODE_CONCURRENCY, 8, 512, 64, n=50)
    assert len(_loop.signatures) == 1


@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B", "Qwen/Qwen3-30B-A3B", "google/gemma-2-9b"])
@pytest.mark.parametrize("prompt_tok", [1, 777, 4096, 9000])
def test_prompts_of_one_length_are_priced_as_each_alone(model: str, prompt_tok: int) -> None:
    # fixed lengths are priced once and repeated: the same figures, to the last bit, as pricing every request
    sm = step_model(static_terms(TABLES, cand(model, "h100-sxm", tp=2, pp=2, isl=4096, osl=1024, ctx=16384)),
                    PARAMS)
    isl = np.full(2200, prompt_tok, dtype=np.int64)
    isl_f = isl.astype(np.float64)
    prompt_s = sm.prompt_compute_s(isl_f)
    want = (sm.prefill_tok_s(isl_f), prompt_s / isl_f, sm.prefill_only_s(prompt_s, isl_f) + sm.step_overhead_s)
    for got, each in zip(request_costs(sm, isl), want, strict=True):
        assert got.shape == (2200,) and np.array_equal(got, each)
    mixed = isl.copy()
    mixed[5] += 1
    assert not np.array_equal(request_costs(sm, mixed)[0][5], request_costs(sm, isl)[0][5])
