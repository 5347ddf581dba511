"""Which candidates meet the bounds, and in what order: the constraint masks, the objective's sort keys and the
Pareto front of cost, latency and throughput."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from service.core import ranking
from service.recommendation.scenarios import SLA_METRICS, Applied
from service.recommendation.search import Scored, meets_sla
from service.schemas.recommendations import ParetoPoint
from service.units import MS_PER_S

F = NDArray[np.float64]


def failing(viol: dict[str, NDArray[np.bool_]], n: int, besides: str | None = None) -> NDArray[np.bool_]:
    """Candidates failing any constraint in ``viol`` (but ``besides``)."""
    bad = np.zeros(n, dtype=bool)
    for name, v in viol.items():
        if name != besides:
            bad |= v
    return bad


def floor_feasible(s: Scored, ap: Applied, osl_1: int) -> NDArray[np.int64]:
    """Candidates whose floors (one request alone), memory, capacity and cost meet every bound: those the
    reference (the prediction) may accept. A superset of ``feasible``'s; no prediction below its floors."""
    ok = s.fits & meets_sla(s.ttft_floor_ms / MS_PER_S, s.tpot_floor_ms / MS_PER_S, s.out_tok_s,
                                        s.overloaded, osl_1, ap.sla.model_copy(update={"min_output_tok_s": None}))
    if ap.constraints.max_usd_per_hour is not None:
        ok &= s.usd_h <= ap.constraints.max_usd_per_hour
    return np.flatnonzero(ok)

def feasible(s: Scored, ap: Applied) -> NDArray[np.int64]:
    """Indices of the candidates that meet every constraint."""
    return np.flatnonzero(~failing(violations(s, ap), len(s.fits)))

def violations(s: Scored, ap: Applied) -> dict[str, NDArray[np.bool_]]:
    """Per constraint, which candidates fail it."""
    sla = ap.sla
    out: dict[str, NDArray[np.bool_]] = {"memory": ~s.fits, "capacity": s.overloaded & s.fits}
    for name in SLA_METRICS:
        limit = getattr(sla, name)
        if limit is not None:
            out[name] = s.fits & (getattr(s, name) > limit)
    if sla.min_output_tok_s is not None:
        out["min_output_tok_s"] = s.fits & (s.out_tok_s < sla.min_output_tok_s)
    if ap.constraints.max_usd_per_hour is not None:
        out["max_usd_per_hour"] = ~(s.usd_h <= ap.constraints.max_usd_per_hour)
    return out

def rank_keys(s: Scored, idx: NDArray[np.int64], objective: str, offline: bool) -> tuple[F, F, F]:
    """The objective's sort keys of candidates ``idx``: primary, secondary, tertiary (ascending)."""
    usd_h, usd_m, e2e, thr = s.usd_h[idx], s.usd_per_m[idx], s.e2e_ms[idx], s.out_tok_s[idx]
    if objective == "min_cost":
        return (usd_m, usd_h, e2e) if offline else (usd_h, usd_m, e2e)
    if objective == "min_cost_per_token":
        return usd_m, usd_h, e2e
    if objective == "max_throughput":
        return -thr, usd_h, e2e
    if objective == "min_latency":
        return e2e, s.ttft_ms[idx], usd_h

    # balanced: cost per token and latency, each relative to the best feasible value
    def relative(v: F) -> F:
        finite = v[np.isfinite(v) & (v > 0)]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(v / finite.min()) if len(finite) else np.zeros_like(v)

    return relative(usd_m) + relative(e2e), usd_h, e2e

def order(s: Scored, idx: NDArray[np.int64], objective: str, offline: bool) -> NDArray[np.int64]:
    """Candidates ``idx`` best first."""
    return idx[ranking.rank_order(*rank_keys(s, idx, objective, offline))]

def best_per_layout(s: Scored, idx: NDArray[np.int64], objective: str, offline: bool) -> NDArray[np.int64]:
    """Each layout's best of candidates ``idx``, best first: ``first_per_group(order(...), s.layout)``."""
    return idx[ranking.best_per_group(s.layout[idx], *rank_keys(s, idx, objective, offline))]

def pareto(s: Scored, reps: NDArray[np.int64], top: NDArray[np.int64]) -> list[ParetoPoint]:
    """The front of cost, latency and throughput over ``reps`` (each layout's best feasible candidate)."""
    if not len(reps):
        return []
    axes = np.stack([np.nan_to_num(s.usd_h[reps], nan=np.inf), s.ttft_ms[reps], s.tpot_ms[reps],
                     -s.out_tok_s[reps]], axis=1)
    front = reps[ranking.pareto_front(axes)]
    rank_of = {int(i): r + 1 for r, i in enumerate(top)}
    pts = []
    for i in front[np.argsort(np.nan_to_num(s.usd_h[front], nan=np.inf), kind="stable")]:
        e, _, g, w, k, tp, pp, dp = s.layouts[int(s.layout[i])]
        dp_ep = f" DP{dp} EP{tp * dp}" if dp > 1 else ""
        spec = s.speculative(int(i))
        lever = f" +{spec.method} k={spec.num_speculative_tokens}" if spec is not None else ""
        pts.append(ParetoPoint(
            usd_per_hour=None if math.isnan(s.usd_h[i]) else round(float(s.usd_h[i]), 4),
            ttft_ms=round(float(s.ttft_ms[i]), 2), tpot_ms=round(float(s.tpot_ms[i]), 3),
            output_tok_s=round(float(s.out_tok_s[i]), 1),
            deployment=f"{int(s.replicas[i])} x TP{tp} PP{pp}{dp_ep} {g} {w}/{k} {e}{lever}",
            rank=rank_of.get(int(i))))
    return pts
