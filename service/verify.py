"""Verification of the search's top candidates by simulation (POST /v1/recommendations).

The search ranks every candidate with the analytic model, whose percentiles are an exponential tail on the
queueing part of the mean TTFT. When the SLA names a percentile, each candidate about to be recommended is
predicted as POST /v1/predictions does, which simulates its scheduler: its percentiles then decide. A
candidate whose simulated tail breaks a latency bound is dropped (the next one in the ranking is tried), and
the survivors are re-ranked on the objective with the simulated latencies.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from service.schemas.predictions import Predicted
from service.schemas.recommendations import Recommendation, Sla

LATENCY_BOUNDS = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "E2E"}
# Candidates predicted beyond top_k when the simulated tail drops some: a bound on the work of one request
# (each costs one simulation, ~4 ms at the default 1000 requests: benchmarks/sim_speed.py).
MAX_EXTRA_CANDIDATES = 5


def sla_values(p: Predicted, percentile: str) -> dict[str, float]:
    """The latencies an SLA at ``percentile`` is judged on: the simulation's when the prediction has one,
    else the analytic figures (the mean, or the analytic tail on TTFT with the mean TPOT)."""
    if percentile == "mean":
        return {"ttft_ms": p.ttft_ms, "tpot_ms": p.tpot_ms, "e2e_ms": p.e2e_ms}
    sim = p.simulation
    if sim is not None:
        tpot = getattr(sim.tpot_ms, percentile) if sim.tpot_ms is not None else p.tpot_ms
        return {"ttft_ms": getattr(sim.ttft_ms, percentile), "tpot_ms": tpot,
                "e2e_ms": getattr(sim.e2e_ms, percentile)}
    ttft_q = getattr(p, f"ttft_{percentile}_ms")
    return {"ttft_ms": ttft_q, "tpot_ms": getattr(p, f"tpot_{percentile}_ms"), "e2e_ms": p.e2e_ms - p.ttft_ms + ttft_q}


def tail_violations(rec: Recommendation, sla: Sla, percentile: str) -> list[str]:
    """The latency bounds the recommendation's simulated figures break, described."""
    if percentile == "mean" or rec.predicted.simulation is None:
        return []
    values = sla_values(rec.predicted, percentile)
    return [f"simulated {percentile} {label} {values[name]:g} ms > {getattr(sla, name):g} ms"
            for name, label in LATENCY_BOUNDS.items()
            if getattr(sla, name) is not None and values[name] > getattr(sla, name)]


def rerank(recs: list[Recommendation], objective: str, offline: bool, percentile: str,
           why: Callable[[Recommendation, int], str]) -> tuple[list[Recommendation], list[int]]:
    """``recs`` in the objective's order with the simulated latencies (cost and throughput stay analytic);
    the new order as positions in ``recs``, ranks renumbered and ``why`` rewritten for those that moved."""

    def usd(r: Recommendation) -> float:
        return r.cost.usd_per_hour if r.cost.usd_per_hour is not None else math.inf

    def usd_m(r: Recommendation) -> float:
        v = r.cost.usd_per_million_output_tokens
        return v if v is not None else math.inf

    lat = [sla_values(r.predicted, percentile) for r in recs]
    if objective == "min_cost":
        keys = [(usd_m(r), usd(r), v["e2e_ms"]) if offline else (usd(r), usd_m(r), v["e2e_ms"])
                for r, v in zip(recs, lat, strict=True)]
    elif objective == "max_throughput":
        keys = [(-r.predicted.output_tok_s, usd(r), v["e2e_ms"]) for r, v in zip(recs, lat, strict=True)]
    elif objective == "min_latency":
        keys = [(v["e2e_ms"], v["ttft_ms"], usd(r)) for r, v in zip(recs, lat, strict=True)]
    else:   # balanced: cost per token and latency, each relative to the best shown
        best_m = min((usd_m(r) for r in recs), default=math.inf)
        best_e = min((v["e2e_ms"] for v in lat), default=math.inf)
        keys = [(math.log(usd_m(r) / best_m) + math.log(v["e2e_ms"] / best_e)
                 if math.isfinite(best_m) and math.isfinite(usd_m(r)) and best_e > 0 else math.inf, usd(r),
                 v["e2e_ms"]) for r, v in zip(recs, lat, strict=True)]
    order = sorted(range(len(recs)), key=lambda j: keys[j])
    out = []
    for rank, j in enumerate(order, start=1):
        r = recs[j]
        out.append(r if r.rank == rank else r.model_copy(update={"rank": rank, "why": why(r, rank)}))
    return out, order


def method(percentile: str, shown: int, requests: int, seed: int, dropped: int, moved: bool) -> str:
    if percentile == "mean":
        return ("mean: the analytic steady state (the percentile fields too: the simulation verifies SLAs that "
                "name a percentile)")
    text = (f"{percentile}: the search ranks every candidate with the analytic model (TTFT tail: an exponential "
            "on the queueing part of the mean TTFT; TPOT at its mean); the recommendations were then verified "
            f"by simulating {requests} requests each (seed {seed}) through their scheduler: their percentiles, "
            "headroom and binding constraint come from the simulation")
    if dropped:
        text += f"; {dropped} candidate(s) whose simulated tail broke the SLA were dropped (see notes)"
    if moved:
        text += "; re-ranked on the simulated latencies"
    return text + f" ({shown} shown); the pareto front, search counts and any explanation are analytic"
