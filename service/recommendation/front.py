"""The answer's Pareto front of cost, latency and throughput, every point's figures its prediction (as POST
/v1/predictions predicts the same deployment).

The deployments on it are those the answer predicted anyway (the recommendations and the other replica
counts tried for them) and up to ``PARETO_PREDICTED`` more, spread over the cost range of the search's
analytic front (each layout's best feasible candidate, ``rank.pareto_candidates``). Those whose prediction
breaks a bound are left out; the front is then taken over the predicted figures, so what it shows and what
decided it are the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gpu_catalog.schema import ModelSpec
from service.core import ranking
from service.prediction.analytic import analyse
from service.prediction.launch_settings import settings_for
from service.prediction.predictor import predict_deployment
from service.prediction.simulation import SimMemo
from service.recommendation import verify
from service.recommendation.offer import checked_launch, deployment
from service.recommendation.scenarios import Applied
from service.recommendation.search import Scored
from service.schemas.predictions import Deployment, Predicted
from service.schemas.recommendations import ParetoPoint, Recommendation, RecommendationRequest

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from service.prediction.advisor import Advisor

# Deployments of the analytic front predicted besides the recommendations: a bound on the work of one request
# (each costs one simulation, ~1-7 ms: benchmarks/search_speed.py measures the whole answer).
PARETO_PREDICTED = 3


def short(dep: Deployment) -> str:
    """The deployment in short, as a Pareto point names it."""
    dp_ep = f" DP{dep.dp} EP{dep.ep}" if dep.dp > 1 else ""
    spec = dep.speculative
    lever = f" +{spec.method} k={spec.num_speculative_tokens}" if spec is not None else ""
    return (f"{dep.replicas} x TP{dep.tp} PP{dep.pp}{dp_ep} {dep.gpu} {dep.weight_dtype}/{dep.kv_dtype} "
            f"{dep.engine}{lever}")


def spread(front: NDArray[np.int64], n: int) -> NDArray[np.int64]:
    """At most ``n`` of ``front`` (sorted by cost), evenly spaced over it, its cheapest and its costliest
    among them."""
    if len(front) <= n:
        return front
    return front[np.unique(np.round(np.linspace(0, len(front) - 1, n)).astype(np.int64))]


@dataclass
class Predictions:
    """What the answer has predicted already: its recommendations, every prediction that met the bounds (the
    recommendations and the other replica counts tried) and the request's memos."""

    recs: list[Recommendation]
    met: list[Recommendation]
    sims: SimMemo
    no_checkpoint: dict[Any, str]


def pareto(adv: Advisor, model: ModelSpec, req: RecommendationRequest, ap: Applied, s: Scored,
           front: NDArray[np.int64], chosen: list[int], done: Predictions) -> list[ParetoPoint]:
    """The Pareto front over the deployments the answer predicted that meet the bounds (``done``; the
    recommendations are candidates ``chosen`` of ``s``) and up to ``PARETO_PREDICTED`` more of the analytic
    ``front`` (candidates of ``s``, cheapest first), each predicted."""
    wl, pct = req.workload, ap.percentile
    rank = {r.deployment.model_dump_json(): r.rank for r in done.recs}
    # by deployment: (deployment, prediction, USD per hour)
    pool: dict[str, tuple[Deployment, Predicted, float | None]] = {
        r.deployment.model_dump_json(): (r.deployment, r.predicted, r.cost.usd_per_hour)
        for r in [*done.recs, *done.met]}
    others = spread(front[~np.isin(front, np.asarray(chosen, dtype=np.int64))], PARETO_PREDICTED)
    deps = [d for d in (deployment(s, int(i)) for i in others) if d.model_dump_json() not in pool]
    terms = analyse(adv, model, wl, deps) if deps else None
    budget = ap.constraints.max_usd_per_hour
    for k, dep in enumerate(deps):
        launch = checked_launch(adv, req, dep, done.no_checkpoint)
        if launch.error or terms is None:
            continue                        # what cannot be launched is not offered, on the front either
        settings, _ = settings_for(adv, dep, adv.gpus[dep.gpu], wl)
        pred = predict_deployment(adv, model, dep, wl, req.simulation_options, settings, terms.row(k), launch,
                                  done.sims)
        p, usd_h = pred.predicted, pred.cost.usd_per_hour
        if p is None or verify.broken_by(p, ap.sla, pct) or (
                budget is not None and not (usd_h is not None and usd_h <= budget)):
            continue
        pool[dep.model_dump_json()] = (dep, p, usd_h)
    if not pool:
        return []
    keys = list(pool)
    values = [verify.sla_values(pool[key][1], pct) for key in keys]
    axes = np.asarray([[math.inf if pool[key][2] is None else pool[key][2], v["ttft_ms"], v["tpot_ms"],
                        -pool[key][1].output_tok_s] for key, v in zip(keys, values, strict=True)], dtype=np.float64)
    on = ranking.pareto_front(axes)
    on = on[np.argsort(axes[on, 0], kind="stable")]
    points = []
    for j in (int(x) for x in on):
        dep, p, usd_h = pool[keys[j]]
        points.append(ParetoPoint(usd_per_hour=usd_h, ttft_ms=values[j]["ttft_ms"], tpot_ms=values[j]["tpot_ms"],
                                  output_tok_s=p.output_tok_s, deployment=short(dep), deployment_spec=dep,
                                  rank=rank.get(keys[j])))
    return points
