"""Verification of the search's top candidates by simulation (POST /v1/recommendations).

The search prunes every candidate with lower bounds from the analytic model (search.py). Each
candidate about to be recommended is predicted as POST /v1/predictions does, which simulates its scheduler:
its prediction then decides, whatever the SLA's percentile (a mean too). A candidate whose simulated figures
break a bound is tried at more replicas, else dropped (the next one in the ranking is tried), and the
survivors are re-ranked on the objective with their predicted figures.
"""

from __future__ import annotations

import math

from service.recommendation.why import why
from service.schemas.predictions import Predicted
from service.schemas.recommendations import Recommendation, Sla

LATENCY_BOUNDS = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "E2E"}
# Predictions beyond top_k (candidates dropped, and other replica counts tried): a bound on the work of one
# request (each costs one simulation: benchmarks/sim_speed.py measures it).
MAX_EXTRA_CANDIDATES = 10


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


def broken(rec: Recommendation, sla: Sla, percentile: str) -> dict[str, str]:
    """The bounds the recommendation's predicted figures (simulated, unless the simulation is off) break, by
    SLA field, described."""
    return broken_by(rec.predicted, sla, percentile)


def broken_by(p: Predicted, sla: Sla, percentile: str) -> dict[str, str]:
    """``broken`` for a prediction ``p``."""
    values = sla_values(p, percentile)
    out = {name: f"predicted {percentile} {label} {values[name]:g} ms > {getattr(sla, name):g} ms"
           for name, label in LATENCY_BOUNDS.items()
           if getattr(sla, name) is not None and values[name] > getattr(sla, name)}
    # (a simulated replica flagged saturated is not ruled out here: the flag compares completions over a finite
    # window with the offered rate, within a few percent of counting noise at 1000 requests; a replica that is
    # saturated shows it in its latencies, and the search rules out what the analytic capacity cannot serve)
    if sla.min_output_tok_s is not None and p.output_tok_s < sla.min_output_tok_s:
        out["min_output_tok_s"] = f"predicted {p.output_tok_s:g} output tok/s < {sla.min_output_tok_s:g}"
    return out


def use(rec: Recommendation, sla: Sla, percentile: str) -> float | None:
    """The largest share of a latency bound the recommendation's prediction uses (None: no latency bound)."""
    values = sla_values(rec.predicted, percentile)
    shares = [values[name] / getattr(sla, name) for name in LATENCY_BOUNDS
              if getattr(sla, name) is not None and getattr(sla, name) > 0]
    return max(shares) if shares else None


def miss(rec: Recommendation, sla: Sla, percentile: str) -> float:
    """How many times its bounds the recommendation's prediction exceeds them at most (1: none; 2 for a
    saturated replica, whose latencies grow with the run)."""
    values = sla_values(rec.predicted, percentile)
    out = 1.0
    for name in LATENCY_BOUNDS:
        limit = getattr(sla, name)
        if limit is not None and limit > 0:
            out = max(out, values[name] / limit)
    if sla.min_output_tok_s:
        out = max(out, sla.min_output_tok_s / max(rec.predicted.output_tok_s, 1e-9))
    sim = rec.predicted.simulation
    return max(out, 2.0) if sim is not None and sim.saturated else out


def tail_violations(rec: Recommendation, sla: Sla, percentile: str) -> list[str]:
    """``broken``'s descriptions."""
    return list(broken(rec, sla, percentile).values())


def rerank(recs: list[Recommendation], objective: str, offline: bool,
           percentile: str) -> tuple[list[Recommendation], list[int]]:
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
    elif objective == "min_cost_per_token":
        keys = [(usd_m(r), usd(r), v["e2e_ms"]) for r, v in zip(recs, lat, strict=True)]
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
        out.append(r if r.rank == rank else r.model_copy(update={"rank": rank, "why": why(
            objective, r.deployment, r.predicted, r.cost, r.binding_constraint, r.headroom, rank)}))
    return out, order


def method(percentile: str, shown: int, requests: int, seed: int, dropped: int, moved: bool) -> str:
    text = (f"{percentile}: the search prunes every candidate with lower bounds from the analytic model (it never "
            "rejects what the simulation accepts); the recommendations were then predicted as POST "
            f"/v1/predictions predicts them, simulating {requests} requests each (seed {seed}) through their "
            "scheduler: every figure shown, the headroom, the binding constraint and the ranking come from that "
            "prediction")
    if dropped:
        text += f"; {dropped} candidate(s) whose simulated figures broke the SLA were dropped (see notes)"
    if moved:
        text += "; re-ranked on the predicted figures"
    return text + (f" ({shown} shown); the pareto front's points are predicted the same way (the recommendations "
                   "and a few deployments of the analytic front, spread over its cost); the search counts and any "
                   "explanation's counts are analytic")
