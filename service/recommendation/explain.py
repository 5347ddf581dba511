"""The account of a recommendation that offers nothing: the constraint that rules out the most candidates, the
deployments closest to the bounds (each with its prediction's figures) and the relaxations."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from gpu_catalog.schema import ModelSpec
from service.core import ranking
from service.prediction.simulation import SimMemo
from service.recommendation import verify
from service.recommendation.offer import deployment, predicted_against
from service.recommendation.relax import relax_bounds, relax_constraints, relax_load
from service.recommendation.relax_levers import relax_levers
from service.recommendation.scenarios import SLA_METRICS, Applied
from service.recommendation.search import Scored
from service.recommendation.space import LayoutCache, SearchMemo
from service.schemas.recommendations import Closest, Explanation, RecommendationRequest, Relaxation, Violation

if TYPE_CHECKING:
    from service.prediction.advisor import Advisor

CLOSEST_SHOWN = 3
# Candidates predicted for them, at most (one that cannot be launched or meets every bound is passed over): a
# bound on the work of an infeasible answer.
CLOSEST_TRIED = 3 * CLOSEST_SHOWN


def explain(adv: Advisor, cache: LayoutCache, model: ModelSpec, req: RecommendationRequest, ap: Applied, s: Scored,
            viol: dict[str, NDArray[np.bool_]], memo: SearchMemo | None) -> Explanation:
    """The account of a search that offers nothing: what rules the candidates out, the deployments closest to
    the bounds, and what to relax."""
    counts = {k: int(v.sum()) + (s.pruned if k == "memory" else 0) for k, v in viol.items()}
    main = max(counts, key=lambda k: counts[k]) if counts else "none"
    relax: list[Relaxation] = []
    closest: list[Closest] = []
    sims: SimMemo = {}
    if s.scored:
        closest = closest_deployments(adv, model, req, s, ap, viol, sims)
        relax += relax_bounds(adv, model, req, s, ap, viol, sims)
        relax += relax_load(adv, model, req, ap, [c.deployment for c in closest], sims)
    relax += relax_constraints(adv, cache, model, req, ap, memo, sims)
    relax += relax_levers(adv, model, req, ap, nothing_fits=bool(s.generated) and not s.fits.any(),
                          near=[c.deployment for c in closest])
    if not s.generated:
        summary = ("no allowed deployment: no GPU in the list runs an allowed engine with an allowed dtype "
                   f"(max quality loss {ap.max_quality})")
    elif not s.fits.any():
        summary = (f"no allowed deployment holds {req.model or 'the model'} in memory with a "
                   f"{req.workload.context_tokens}-token sequence: the weights and reserve alone overflow "
                   f"every allowed GPU at up to {ap.constraints.max_gpus} GPUs")
    else:
        summary = (f"of {len(s.fits) + s.pruned} layouts x settings at their fewest and most replicas, "
                   f"{int(s.fits.sum())} fit in memory but none meets every constraint; {main} rules out the "
                   f"most ({counts[main]})")
    return Explanation(summary=summary, ruled_out_by=counts, main_obstacle=main, closest=closest,
                       relaxations=relax)

def closest_deployments(adv: Advisor, model: ModelSpec, req: RecommendationRequest, s: Scored, ap: Applied,
                        viol: dict[str, NDArray[np.bool_]], sims: SimMemo) -> list[Closest]:
    """The deployments nearest to every bound by the search's lower bounds, each with its prediction's
    figures (what POST /v1/predictions returns for it) and the bounds those break."""
    limits = {n: getattr(ap.sla, n) for n in SLA_METRICS if getattr(ap.sla, n) is not None}
    worst = np.zeros(len(s.fits))
    # a bound near zero (a request may ask 1e-300 ms) puts a candidate infinitely far from it: inf, as meant
    with np.errstate(over="ignore"):
        for n, lim in limits.items():
            worst = np.maximum(worst, getattr(s, n) / lim - 1.0)
        if ap.sla.min_output_tok_s:
            worst = np.maximum(worst, ap.sla.min_output_tok_s / np.maximum(s.out_tok_s, 1e-9) - 1.0)
        if ap.constraints.max_usd_per_hour:
            worst = np.maximum(worst, np.nan_to_num(s.usd_h, nan=np.inf) / ap.constraints.max_usd_per_hour
                               - 1.0)
    worst = np.where(s.fits & ~s.overloaded, worst, np.inf)
    order = ranking.first_per_group(np.argsort(worst, kind="stable").astype(np.int64), s.layout)
    out: list[Closest] = []
    for i in order[:CLOSEST_TRIED]:
        if not np.isfinite(worst[i]) or len(out) == CLOSEST_SHOWN:
            break
        rec, _ = predicted_against(adv, model, req, ap, deployment(s, int(i)), sims)
        if rec.launch.error:
            continue                # not a deployment that could be offered: no nearer miss
        p = rec.predicted
        values = verify.sla_values(p, ap.percentile)
        vs = []
        for n, lim in limits.items():
            val = float(values[n])
            if val > lim:
                vs.append(Violation(constraint=n, limit=lim, predicted=round(val, 2),
                                    over_by_pct=round((val / lim - 1) * 100, 1)))
        if ap.sla.min_output_tok_s and p.output_tok_s < ap.sla.min_output_tok_s:
            vs.append(Violation(constraint="min_output_tok_s", limit=ap.sla.min_output_tok_s,
                                predicted=round(p.output_tok_s, 1),
                                over_by_pct=round((ap.sla.min_output_tok_s / max(p.output_tok_s, 1e-9) - 1)
                                                  * 100, 1)))
        usd = rec.cost.usd_per_hour
        budget = ap.constraints.max_usd_per_hour
        if budget is not None and not (usd is not None and usd <= budget):
            vs.append(Violation(constraint="max_usd_per_hour", limit=budget, predicted=usd,
                                over_by_pct=None if usd is None else round((usd / budget - 1) * 100, 1)))
        if not vs:
            continue                # its prediction meets every bound: what kept it out is not a bound
        out.append(Closest(deployment=rec.deployment, violations=vs,
                           predicted={"ttft_ms": values["ttft_ms"], "tpot_ms": values["tpot_ms"],
                                      "output_tok_s": p.output_tok_s, "usd_per_hour": usd}))
    return out
