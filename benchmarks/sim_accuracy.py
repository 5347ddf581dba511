"""Error of the scheduler simulation on stored measurements, beside the analytic model's (not a test: it prints).

Run through ``python benchmarks/accuracy.py --simulate N``: the calibration is fitted once on every scorable
row (in-sample: the figures compare the two ways of turning the same fitted step model into latencies, not
the fit's generalisation, which the default leave-one-source-out run reports). Then up to N rows with a
published central latency under load (closed loop or request rate) are predicted by both: the analytic
steady state, and the simulation of one replica. A row publishing a mean is compared with the simulation's
mean, a median with its p50 (no stored row publishes a p90/p95/p99 yet: those would be compared the same
way). Closed loops are simulated two ways: ``steady`` (clients spread, warm-up dropped: what the API
serves) and ``burst`` (every client starts at once and the first wave is measured, as a benchmark client
runs, over ``BURST_REQUESTS_PER_CLIENT`` requests per client).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gpu_catalog.schema import CostConstants
from service.core.calibration import MeasurementSet, ape, fit, summarise
from service.core.costmodel import MODE_CONCURRENCY, MODE_RATE, Tables, serve, static_terms
from service.core.simulate import Lengths, Load, SimResult, Stat, replica, simulate

# A benchmark run at concurrency C sends about this many requests per client (aiperf and vllm bench serve
# leave it to the operator; the stored rows do not say): the first wave is then ~1/10 of the requests.
BURST_REQUESTS_PER_CLIENT = 10
MIN_BURST_REQUESTS = 200
CENTRAL = {"mean": "mean", "median": "p50", "p50": "p50"}


def _stat_name(stat: Any) -> str | None:
    """The simulated statistic matching a published one ('mean (statistic not stated)' counts as mean)."""
    word = str(stat or "").split(" ")[0].lower()
    return CENTRAL.get(word)


def _pick(s: Stat, name: str) -> float:
    return float(getattr(s, name))


def simulate_report(tables: Tables, ms: MeasurementSet, constants: CostConstants, rows: Sequence[Mapping[str, Any]],
                    limit: int, requests: int, seed: int = 0) -> dict[str, Any]:
    by_id = {str(r.get("row_id") or ""): r for r in rows}
    t_fit = time.perf_counter()
    cal = fit(tables, ms, constants)
    t_fit = time.perf_counter() - t_fit
    loaded = np.flatnonzero([m in ("concurrency", "request_rate") for m in ms.modes])
    has_latency = np.isfinite(ms.y[loaded, 1]) | np.isfinite(ms.y[loaded, 2])
    pool = loaded[has_latency]
    # every row publishing a statistic other than the mean (medians; percentiles when stored), then a
    # random sample of the rest
    not_mean = np.asarray([any(_stat_name(by_id.get(ms.row_ids[i], {}).get(c)) not in (None, "mean")
                               for c in ("ttft_stat", "tpot_stat", "itl_stat")) for i in pool], dtype=bool)
    rest = pool[~not_mean]
    rng = np.random.default_rng(seed)
    n_rest = max(min(limit - int(not_mean.sum()), len(rest)), 0)
    pick = np.sort(np.concatenate([pool[not_mean], rng.choice(rest, size=n_rest, replace=False)])).astype(np.int64)
    sub = ms.take(pick)
    params = cal.params_for(sub.keys, sub.current)
    static = static_terms(tables, sub.cand)
    res = serve(static, params)
    variants = ("steady", "burst")
    pred = {v: np.full((len(sub), 3), np.nan) for v in ("analytic", *variants)}
    pred["analytic"] = np.stack([np.where(sub.thr_is_total, res.total_tok_s, res.output_tok_s), res.ttft_s,
                                 res.tpot_s], axis=1)
    sim_s: list[float] = []
    for j in range(len(sub)):
        raw = by_id.get(sub.row_ids[j], {})
        engine = sub.keys[j][0]
        vllm = engine.startswith("vllm")
        # prompts chunked on both engines (as service/prediction/simulation.py simulates them by default)
        rep = replica(static, params, j, chunked_prefill=True, reserve_full=not vllm)
        mode = int(sub.cand.mode[j])
        n_rep = float(sub.cand.replicas[j])
        value = (math.ceil(float(sub.cand.load[j]) / n_rep) if mode == MODE_CONCURRENCY
                 else float(sub.cand.load[j]) / n_rep)
        lengths = (Lengths(float(sub.cand.input_tok[j])), Lengths(float(sub.cand.output_tok[j])))
        ttft_stat = _stat_name(raw.get("ttft_stat"))
        tpot_stat, tpot_from_itl = _stat_name(raw.get("tpot_stat")), False
        if tpot_stat is None and _stat_name(raw.get("itl_stat")):
            tpot_stat, tpot_from_itl = _stat_name(raw.get("itl_stat")), True
        for v in variants:
            if v == "burst" and mode != MODE_CONCURRENCY:
                pred[v][j] = pred["steady"][j]          # a Poisson stream has no first wave
                continue
            n = requests if v == "steady" else max(int(value) * BURST_REQUESTS_PER_CLIENT, MIN_BURST_REQUESTS)
            t0 = time.perf_counter()
            r: SimResult = simulate(rep, Load(mode if mode in (MODE_CONCURRENCY, MODE_RATE) else MODE_RATE, value,
                                              *lengths, requests=n, seed=seed, burst_start=v == "burst"))
            sim_s.append(time.perf_counter() - t0)
            thr = (r.total_tok_s if sub.thr_is_total[j] else r.output_tok_s) * n_rep
            ttft = _pick(r.ttft_s, ttft_stat) if ttft_stat else math.nan
            tpot = _pick(r.itl_s if tpot_from_itl else r.tpot_s, tpot_stat) if tpot_stat else math.nan
            pred[v][j] = (thr, ttft, tpot)
    out: dict[str, Any] = {"rows": len(sub), "pool": len(pool), "fit_s": round(t_fit, 1),
                           "simulations": len(sim_s), "sim_ms_median": round(1e3 * float(np.median(sim_s)), 1)
                           if sim_s else None, "requests": requests, "seed": seed}
    metrics = ("throughput", "ttft", "tpot")
    groups: dict[str, np.ndarray] = {"overall": np.ones(len(sub), dtype=bool)}
    for label in sorted(set(sub.modes)):
        groups[f"mode {label}"] = np.asarray([m == label for m in sub.modes])
    for label in sorted({k[0] for k in sub.keys}):
        groups[f"engine {label}"] = np.asarray([k[0] == label for k in sub.keys])
    medians = np.asarray([any(_stat_name(by_id.get(rid, {}).get(c)) == "p50" for c in ("ttft_stat", "tpot_stat",
                                                                                      "itl_stat"))
                          for rid in sub.row_ids], dtype=bool)
    if medians.any():
        groups["published medians"] = medians

    def stats(p: np.ndarray, y: np.ndarray) -> dict[str, Any]:
        out_s = summarise(ape(p, y))
        with np.errstate(invalid="ignore", divide="ignore"):
            signed = (p / y - 1.0) * 100.0
        signed = signed[np.isfinite(signed)]
        out_s["median_signed_pct"] = round(float(np.median(signed)), 1) if len(signed) else None
        return out_s

    out["groups"] = {g: {v: {m: stats(pred[v][mask, k], sub.y[mask, k]) for k, m in enumerate(metrics)}
                         for v in pred} for g, mask in groups.items()}
    return out


def print_report(rep: dict[str, Any]) -> None:
    print(f"simulation vs analytic on {rep['rows']} of {rep['pool']} loaded rows (in-sample calibration, fitted in "
          f"{rep['fit_s']} s); {rep['simulations']} simulations, median {rep['sim_ms_median']} ms each "
          f"({rep['requests']} requests steady, seed {rep['seed']})")
    print("median / p90 absolute % error [median signed %] (n)")
    for g, by_v in rep["groups"].items():
        print(f"  {g}:")
        for v, stats in by_v.items():
            cells = [f"{m} {s['median_ape_pct']!s:>5}/{s['p90_ape_pct']!s:>6} [{s['median_signed_pct']!s:>6}] "
                     f"(n={s['n']})" if s["n"] else f"{m} {'-':>22} (n=0)" for m, s in stats.items()]
            print(f"    {v:<9} " + "   ".join(cells))
