"""What to relax when nothing meets the bounds: each violated bound's best reachable value, the largest load
within them, and what more quantisation, more GPUs, other GPUs or no budget would buy. Every value offered
is a deployment's prediction (as POST /v1/predictions gives it), not the search's estimate."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from gpu_catalog.schema import ModelSpec
from service.core import ranking
from service.prediction.simulation import SimMemo
from service.recommendation import verify
from service.recommendation.offer import deployment, more_replicas, predicted_against
from service.recommendation.rank import failing, feasible, order
from service.recommendation.scenarios import SLA_METRICS, Applied
from service.recommendation.search import Scored, search
from service.recommendation.space import LayoutCache, SearchMemo
from service.schemas.predictions import Deployment
from service.schemas.recommendations import (
    DEFAULT_MAX_GPUS,
    Recommendation,
    RecommendationRequest,
    Relaxation,
    Sla,
)

if TYPE_CHECKING:
    from service.prediction.advisor import Advisor

# Load grid for "the largest concurrency / rate that fits" (shares of the requested load).
LOAD_SHARES = tuple(float(x) for x in np.geomspace(1.0, 1.0 / 512, 28)[1:])
# The analytic model is the search's estimate, not its reference: the scheduler simulation (the prediction) is.
# benchmarks/consistency.py measures the simulated / analytic ratio over random deployments from below 0.01 to
# above 100 (TTFT, at loads the analytic queueing overstates or understates), so no share of the analytic figure
# is a safe bound; one request alone on an idle replica is (``floors``: no prediction falls below it). The search
# ranks and proposes replica counts with the analytic figures; a layout and setting whose floors and capacity
# meet every bound but whose analytic figures do not is still tried, by prediction, when the answer has room.
# Deployments predicted per relaxation (the best few by the analytic estimates, one per layout), and the
# deployments closest to the bounds whose largest load within them is searched: bounds on the work of an
# infeasible answer.
RELAX_PREDICTED = 4
RELAX_LOAD_DEPLOYMENTS = 2


def first_predicted(adv: Advisor, model: ModelSpec, req: RecommendationRequest, ap: Applied, s: Scored,
                    order: NDArray[np.int64], sims: SimMemo) -> Recommendation | None:
    """The first of candidates ``order`` (one per layout, at most ``RELAX_PREDICTED``) whose prediction meets
    every bound of ``ap``."""
    for j in ranking.first_per_group(order, s.layout)[:RELAX_PREDICTED]:
        dep = deployment(s, int(j))
        for d in [dep, *more_replicas(adv, dep, ap, req.workload)[:1]]:
            rec, over = predicted_against(adv, model, req, ap, d, sims)
            if not over:
                return rec
    return None

def relax_bounds(adv: Advisor, model: ModelSpec, req: RecommendationRequest, s: Scored, ap: Applied,
                 viol: dict[str, NDArray[np.bool_]], sims: SimMemo) -> list[Relaxation]:
    """For each violated bound: the best value a deployment's prediction reaches while meeting every other
    bound (of the few best by the search's lower bounds, one per layout: ``RELAX_PREDICTED``)."""
    out = []
    for name in [*SLA_METRICS, "min_output_tok_s", "max_usd_per_hour"]:
        if name not in viol or not viol[name].any():
            continue
        ok = np.flatnonzero(~failing(viol, len(s.fits), besides=name))
        if not len(ok):
            continue
        if name == "min_output_tok_s":
            order = ok[np.argsort(-s.out_tok_s[ok], kind="stable")]
        else:
            metric = s.usd_h if name == "max_usd_per_hour" else getattr(s, name)
            order = ok[np.argsort(np.nan_to_num(metric[ok], nan=np.inf), kind="stable")]
        relaxed = ap.sla.model_copy(update={name: None}) if name in Sla.model_fields else ap.sla
        cons = (ap.constraints.model_copy(update={"max_usd_per_hour": None}) if name == "max_usd_per_hour"
                else ap.constraints)
        ap_other = Applied(sla=relaxed, constraints=cons, objective=ap.objective, percentile=ap.percentile,
                           max_quality=ap.max_quality)
        best: tuple[float, Recommendation] | None = None
        for j in ranking.first_per_group(order.astype(np.int64), s.layout)[:RELAX_PREDICTED]:
            rec, over = predicted_against(adv, model, req, ap_other, deployment(s, int(j)), sims)
            if over:
                continue
            if name == "min_output_tok_s":
                val = -rec.predicted.output_tok_s
            elif name == "max_usd_per_hour":
                val = rec.cost.usd_per_hour if rec.cost.usd_per_hour is not None else math.inf
            else:
                val = verify.sla_values(rec.predicted, ap.percentile)[name]
            if best is None or val < best[0]:
                best = (val, rec)
        if best is None or not math.isfinite(best[0]):
            continue
        val, rec = abs(best[0]), best[1]
        d = rec.deployment
        detail = (f"at most {val:.0f} output tok/s is reachable within the other bounds"
                  if name == "min_output_tok_s" else
                  f"the smallest {name} that an allowed deployment's prediction meets with every other bound")
        # at the precision of the prediction's own field (TPOT in thousandths of a millisecond)
        out.append(Relaxation(kind=name, value=round(val, 3 if name == "tpot_ms" else 2), deployment=d,
                              detail=f"{detail}: {d.replicas} x TP{d.tp} {d.gpu} {d.weight_dtype} {d.engine}"))
    return out

def relax_load(adv: Advisor, model: ModelSpec, req: RecommendationRequest, ap: Applied, near: list[Deployment],
               sims: SimMemo) -> list[Relaxation]:
    """The largest share of the requested load that one of the deployments ``near`` (those closest to the
    bounds) serves within every bound by its prediction: a binary search over a geometric grid of loads
    (feasibility only improves as the load falls), each step one prediction."""
    wl = req.workload
    if wl.mode == "offline":
        return []
    field = "concurrency" if wl.mode == "concurrency" else "request_rate"
    full = float(wl.concurrency if wl.concurrency is not None else wl.request_rate or 0.0)
    values = sorted({max(1.0, float(int(full * sh))) if field == "concurrency" else full * sh
                     for sh in LOAD_SHARES} - {full}, reverse=True)
    values = [v for v in values if v < full]

    def at(value: float) -> RecommendationRequest:
        return req.model_copy(update={"workload": wl.model_copy(update={field: value})})

    found: tuple[int, Deployment] | None = None          # (index in values, deployment)
    for dep in near[:RELAX_LOAD_DEPLOYMENTS]:
        lo, hi = 0, len(values) if found is None else found[0]   # values[:lo] fail; the answer in values[lo:hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if predicted_against(adv, model, at(values[mid]), ap, dep, sims)[1]:
                lo = mid + 1
            else:
                hi, found = mid, (mid, dep)
    if found is None:
        return [Relaxation(kind=field, value=None, detail=f"even the smallest {field} tried misses the bounds "
                           "in the predictions of the deployments closest to them")]
    value, d = values[found[0]], found[1]
    return [Relaxation(kind=field, value=int(value) if field == "concurrency" else round(value, 4), deployment=d,
                       detail=f"the largest {field} on a geometric grid below {full:g} that an allowed "
                       f"deployment's prediction serves within the bounds: {d.replicas} x TP{d.tp} {d.gpu} "
                       f"{d.weight_dtype} {d.engine}")]

def relax_constraints(adv: Advisor, cache: LayoutCache, model: ModelSpec, req: RecommendationRequest, ap: Applied,
                      memo: SearchMemo | None, sims: SimMemo) -> list[Relaxation]:
    """What more quantisation, more GPUs or other GPUs would buy (each relaxed alone)."""
    out = []
    cons = ap.constraints
    trials: list[tuple[str, dict[str, Any], str]] = []
    if ap.max_quality != "noticeable" or cons.weight_dtypes is not None:
        trials.append(("weight_dtypes", {"max_quality_loss": "noticeable", "weight_dtypes": None},
                       "allow every quantisation (quality may suffer: see the dtype's note)"))
    if (cons.max_gpus or DEFAULT_MAX_GPUS) < DEFAULT_MAX_GPUS:
        trials.append(("max_gpus", {"max_gpus": DEFAULT_MAX_GPUS}, f"allow up to {DEFAULT_MAX_GPUS} GPUs"))
    if cons.gpus is not None:
        trials.append(("gpus", {"gpus": None}, "allow every GPU in the catalog"))
    if cons.max_usd_per_hour is not None:
        trials.append(("max_usd_per_hour", {"max_usd_per_hour": None}, "drop the hourly budget"))
    for kind, change, what in trials:
        ap2 = Applied(sla=ap.sla, constraints=cons.model_copy(update=change), objective="min_cost",
                      percentile=ap.percentile, max_quality=change.get("max_quality_loss", ap.max_quality))
        s = search(adv, cache, req, ap2, memo)
        ok = feasible(s, ap2)
        if not len(ok):
            out.append(Relaxation(kind=kind, value=None, detail=f"{what}: still nothing meets the bounds"))
            continue
        rec = first_predicted(adv, model, req, ap2, s, order(s, ok, "min_cost", req.workload.mode == "offline"),
                                  sims)
        if rec is None:
            out.append(Relaxation(kind=kind, value=None, detail=f"{what}: the {RELAX_PREDICTED} best deployments "
                                  "by the analytic estimates all miss the bounds in their predictions"))
            continue
        d, usd = rec.deployment, rec.cost.usd_per_hour
        value: Any = {"weight_dtypes": d.weight_dtype, "max_gpus": d.gpu_count, "gpus": d.gpu,
                      "max_usd_per_hour": None if usd is None else round(usd, 2)}[kind]
        price = "" if usd is None else f" at ${usd:.2f}/h"
        out.append(Relaxation(kind=kind, value=value, deployment=d,
                              detail=f"{what}: the cheapest that works is {d.replicas} x TP{d.tp} {d.gpu} "
                              f"{d.weight_dtype}/{d.kv_dtype} on {d.engine}{price}"))
    return out
