"""Which candidates meet the bounds, and in what order: the constraint masks, the objective's sort keys and the
Pareto front of cost, latency and throughput."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from service.core import ranking
from service.recommendation.scenarios import SLA_METRICS, Applied
from service.recommendation.search import Scored, meets_sla
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

def pareto_candidates(s: Scored, reps: NDArray[np.int64]) -> NDArray[np.int64]:
    """The analytic front of cost, latency and throughput over ``reps`` (each layout's best feasible candidate),
    cheapest first: the deployments the answer's front (front.py) chooses its predictions from."""
    if not len(reps):
        return reps
    axes = np.stack([np.nan_to_num(s.usd_h[reps], nan=np.inf), s.ttft_ms[reps], s.tpot_ms[reps],
                     -s.out_tok_s[reps]], axis=1)
    front = reps[ranking.pareto_front(axes)]
    return front[np.argsort(np.nan_to_num(s.usd_h[front], nan=np.inf), kind="stable")]


def contenders(s: Scored, idx: NDArray[np.int64], objective: str, offline: bool, osl_1: int,
               worst: float) -> NDArray[np.int64]:
    """Of candidates ``idx`` (not predicted), those whose bounds do not rule out that their prediction ranks
    before a recommendation whose primary rank key (``rank_keys``: hourly cost, or latency) predicted
    ``worst``: the hourly cost is exact (no prediction changes it) and no latency is below its floors (one
    request alone). Cost per token, throughput and the balanced score have no such bound: every one."""
    if objective == "min_cost" and not offline:
        return idx[~(np.nan_to_num(s.usd_h[idx], nan=np.inf) > worst)]
    if objective == "min_latency":
        return idx[~(s.ttft_floor_ms[idx] + osl_1 * s.tpot_floor_ms[idx] > worst)]
    return idx
