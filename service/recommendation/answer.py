"""POST /v1/recommendations: the search's best candidates, each predicted as POST /v1/predictions predicts it (its
scheduler simulated), adjusted in replicas until its prediction meets the bounds, ranked, and explained.

The answer is built from the search's own results: the resolved model, the generated deployments (they run:
not checked again), their launches (rendered once, before anything is simulated) and their analytic terms
(computed for a batch of the next candidates at a time) go down to ``predict_deployment``.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gpu_catalog.schema import ModelSpec
from service.core import ranking
from service.prediction.advisor import Advisor
from service.prediction.analytic import Analysed, Analyses, analyse
from service.prediction.simulation import SimMemo
from service.prediction.validate import model_for
from service.recommendation import batch_jobs, front, verify
from service.recommendation.explain import explain
from service.recommendation.offer import (
    BISECT_TRIES,
    checked_launch,
    deployment,
    fewer_replicas,
    more_replicas,
    predicted_against,
    recommendation,
)
from service.recommendation.rank import (
    best_per_layout,
    contenders,
    feasible,
    floor_feasible,
    order,
    pareto_candidates,
    violations,
)
from service.recommendation.relax_levers import (
    kv_offload_offer,
    offload_offer,
    speculative_offer,
    with_kv_offload_recs,
)
from service.recommendation.scenarios import Applied, apply_scenario, ranked_by
from service.recommendation.search import Scored, ends, most, search_with_space
from service.recommendation.search_levers import with_speculation
from service.recommendation.space import REPLICA_GRID, LayoutCache, SearchMemo
from service.schemas.predictions import Deployment, Launch
from service.schemas.recommendations import (
    Recommendation,
    RecommendationRequest,
    RecommendationResponse,
    SearchStats,
    SmallestDeployment,
)
from service.units import MS_PER_S

# Candidates with the fewest GPUs tried in turn for a batch job's smallest deployment, at most (one that cannot
# be launched, or whose simulated tail breaks the SLA, is passed over): a bound on the work of one request.
SMALLEST_TRIES = 8


@dataclass
class Asked:
    """One request as the answer works on it: what it resolved to and what its predictions share."""

    adv: Advisor
    cache: LayoutCache
    model: ModelSpec
    req: RecommendationRequest
    ap: Applied
    memo: SearchMemo = field(default_factory=dict)
    sims: SimMemo = field(default_factory=dict)             # candidates with the same inputs are simulated once
    no_checkpoint: dict[Any, str] = field(default_factory=dict)
    # each layout's best plain candidate, where the search also tried it with speculative decoding
    plain_of: dict[int, int] = field(default_factory=dict)


@dataclass
class Verified:
    """The verification's progress: the recommendations so far and what was passed over or dropped."""

    limit: int                                              # predictions allowed: top_k + MAX_EXTRA_CANDIDATES
    recs: list[Recommendation] = field(default_factory=list)
    chosen: list[int] = field(default_factory=list)         # each recommendation's candidate in the search (-1: none)
    skipped: dict[str, str] = field(default_factory=dict)   # launch errors by engine and weight dtype
    dropped: list[str] = field(default_factory=list)
    dropped_by: dict[str, int] = field(default_factory=dict)    # the bounds the dropped candidates' predictions broke
    tried: int = 0
    met: list[Recommendation] = field(default_factory=list)    # every prediction that met the bounds
    looked: set[int] = field(default_factory=set)           # the analytic ranking's candidates taken from the queue


class Recommender:
    """The recommendation service: the prediction service it predicts with and the layout tables it keeps."""

    def __init__(self, advisor: Advisor) -> None:
        self.advisor = advisor
        self.layouts = LayoutCache()

    def recommend(self, req: RecommendationRequest) -> RecommendationResponse:
        return recommend(self.advisor, self.layouts, req)


def recommend(adv: Advisor, cache: LayoutCache, req: RecommendationRequest) -> RecommendationResponse:
    t0 = time.perf_counter()
    if req.workload.prefix_cache_hit_rate and "prefix_cache" not in req.constraints.allowed_levers:
        # the prefix cache is not a lever this search may count on: its deployments are predicted without hits
        req = req.model_copy(update={"workload": req.workload.model_copy(update={"prefix_cache_hit_rate": 0.0})})
    a = Asked(adv=adv, cache=cache, model=model_for(adv, req.model, req.model_spec), req=req, ap=apply_scenario(req))
    ap = a.ap
    s, sp = search_with_space(adv, cache, req, ap, a.memo)
    fit = feasible(s, ap)
    offline = req.workload.mode == "offline"
    best = best_per_layout(s, fit, ap.objective, offline)     # each layout's best, best first
    if "speculative" in ap.constraints.allowed_levers:
        # the speculative variants of the layouts where they can change the answer, ranked with the plain
        # candidates: each layout keeps whichever its objective prefers
        a.plain_of = {int(s.layout[i]): int(i) for i in best}    # (the variants' candidates follow s's)
        s, fit, best = with_speculation(adv, a.model, req, ap, sp, s, fit, best)
    v = verify_candidates(a, s, best)
    moved = False
    if v.recs:
        v.recs, new_order = verify.rerank(v.recs, ap.objective, offline, ap.percentile)
        moved = new_order != sorted(new_order)
        v.chosen = [v.chosen[j] for j in new_order]
    if v.dropped and len(v.recs) < req.top_k:
        v.dropped.append(f"verification stopped after {v.tried} predictions (at most top_k + "
                         f"{verify.MAX_EXTRA_CANDIDATES})" if v.tried >= v.limit else "no further candidate")
    unverified = unpredicted_contenders(a, s, best, v)
    if unverified and v.tried >= v.limit:
        v.dropped.append(f"{unverified} candidate(s) meeting every bound analytically were not predicted, and their "
                         "bounds do not rule out a place among those shown: verification predicts the analytic "
                         f"ranking's candidates in turn, at most top_k + {verify.MAX_EXTRA_CANDIDATES} "
                         "(search.unverified)")
    if v.recs:
        # the host KV tier, where allowed and the prefix working set outgrows a recommendation's free KV blocks
        v.recs = with_kv_offload_recs(adv, a.model, req, ap, v.recs)
    points = front.pareto(adv, a.model, req, ap, s, pareto_candidates(s, best), v.chosen,
                          front.Predictions(v.recs, v.met, a.sims, a.no_checkpoint))
    explanation = None
    if not v.recs:
        # the search scored only what it needed for a verdict: score each layout and setting at its
        # fewest and most replicas, every solve done, for the account
        s_ends = ends(adv, cache, req, ap, a.memo)
        explanation = explain(adv, cache, a.model, req, ap, s_ends, violations(s_ends, ap), a.memo)
        if "cpu_offload" in ap.constraints.allowed_levers and s_ends.generated and not s_ends.fits.any():
            # the offload lever, allowed: memory is the only obstacle, so its best deployment is the answer
            offload = offload_offer(adv, a.model, req, ap)
            if offload is not None:
                v.recs, explanation = [offload], None
        if explanation is not None and not len(fit):
            # the speculative lever, allowed: the deployment closest to the bounds that meets them with it
            spec = speculative_offer(adv, a.model, req, ap, [c.deployment for c in explanation.closest])
            if spec is not None:
                v.recs, explanation = [spec], None
        if explanation is not None and not len(fit):
            # the host KV tier, allowed: the deployment closest to the bounds that meets them with one
            kv = kv_offload_offer(adv, a.model, req, ap, [c.deployment for c in explanation.closest])
            if kv is not None:
                v.recs, explanation = [kv], None
        if explanation is not None and len(fit):
            # the model found deployments that meet the SLA, but none can be offered as ready to run
            why = [f"{k}: {val}" for k, val in v.skipped.items()] + [d for d in v.dropped if d.startswith("dropped")]
            explanation.summary = (f"{len(fit) if s.feasible_total < 0 else s.feasible_total}"
                                   " candidates meet every constraint in the analytic model, but none can be "
                                   "offered: " + "; ".join(why[:3]))
            explanation.main_obstacle = ("launch" if v.skipped and not v.dropped else
                                         max(v.dropped_by, key=lambda k: v.dropped_by[k]) if v.dropped_by else
                                         "simulated tail")
    job = batch_jobs.job(req.workload, ap.sla)
    if job is not None:
        for r in v.recs:
            r.job = batch_jobs.of_prediction(req.workload, r.predicted, r.cost, ap.sla.deadline_hours)
        if ap.sla.deadline_hours is not None and v.recs:
            job.smallest = smallest(a, s, fit, v.recs)
        if explanation is not None:
            explanation.relaxations += batch_jobs.deadline_relaxations(explanation.relaxations, req.workload)
    elapsed_ms = (time.perf_counter() - t0) * MS_PER_S
    stats = SearchStats(candidates=s.generated, scored=s.scored, solved=s.solved,
                        feasible=len(fit) if s.feasible_total < 0 else s.feasible_total, unverified=unverified,
                        elapsed_ms=round(elapsed_ms, 2))
    return RecommendationResponse(
        # feasible: something is offered (the analytic verdict, less what the simulation or launch overturned)
        id="", feasible=bool(v.recs), model=a.model.id,
        recommendations=v.recs, pareto=points, search=stats,
        applied={"sla": ap.sla.model_dump(), "constraints": ap.constraints.model_dump(),
                 "objective": ap.objective, "scenario": req.scenario},
        ranked_by=ranked_by(ap.objective, offline, req.scenario, ap.constraints.max_usd_per_hour),
        percentile_method=(
            verify.method(ap.percentile, len(v.recs), req.simulation_options.requests or 0, req.simulation.seed,
                          sum(d.startswith("dropped") for d in v.dropped), moved)
            if req.simulation.enabled else
            "mean: the analytic steady state" if ap.percentile == "mean" else
            f"{ap.percentile}: analytic (simulation disabled); TTFT puts an exponential tail on the queueing "
            "part of the mean TTFT, TPOT uses the mean (each request's TPOT averages many steps)"),
        explanation=explanation, calibration_version=adv.cal.version, batch_job=job,
        notes=[*(f"passed over {k}: {val}" for k, val in v.skipped.items()), *v.dropped])


def predicted(a: Asked, v: Verified, dep: Deployment, launch: Launch | None = None,
              terms: Analysed | None = None) -> tuple[Recommendation, list[str]]:
    """``dep`` predicted as the answer's next recommendation, and the bounds its prediction breaks (``launch``
    when it cannot be launched)."""
    rec = recommendation(a.adv, a.model, a.req, a.ap, dep, len(v.recs) + 1,
                         launch if launch is not None else checked_launch(a.adv, a.req, dep, a.no_checkpoint),
                         terms, a.sims)
    over = verify.tail_violations(rec, a.ap.sla, a.ap.percentile) if not rec.launch.error else ["launch"]
    if not over:
        v.met.append(rec)
    return rec, over


def verify_candidates(a: Asked, s: Scored, best: NDArray[np.int64]) -> Verified:
    """The search's figures are analytic estimates: each candidate is predicted as POST /v1/predictions does
    (simulating its scheduler), and its prediction decides. One per layout, best first; a layout the engine
    cannot be launched with as asked (no checkpoint or quantisation recipe for its dtype) is passed over, and
    the answer says so. One that misses a bound is tried at more replicas, one that meets them at fewer
    (``settle_replicas``); then the layouts and settings whose floors (not their analytic figures) meet every
    bound are tried too, at their most replicas, while the answer has room: the analytic model may not rule
    out what its prediction accepts. At most top_k + MAX_EXTRA_CANDIDATES predictions."""
    req, ap = a.req, a.ap
    v = Verified(limit=req.top_k + verify.MAX_EXTRA_CANDIDATES)
    # the analytic terms of the candidates predicted, computed for a batch of the next ones at a time (as
    # many as the answer may still try: one batch, mostly), and their deployments
    analysed: dict[int, tuple[Analyses, int]] = {}
    deps: dict[int, Deployment] = {}
    # (scored candidates, index, position in ``best`` or -1) to try before the rest of the analytic ranking
    # (``best`` from ``next_pos`` on, taken in turn: only the few its predictions reach are made into entries)
    queue: deque[tuple[Scored, int, int]] = deque()
    next_pos = 0
    widened = False
    while len(v.recs) < req.top_k and v.tried < v.limit:
        if queue:
            sc, i, pos = queue.popleft()
        elif next_pos < len(best):
            sc, i, pos = s, int(best[next_pos]), next_pos
            next_pos += 1
        elif widened:
            break
        else:
            widened = True
            seen_units = set(zip(s.layout[best].astype(np.int64).tolist(), s.seqs[best].astype(np.float64).tolist(),
                                 s.tokens[best].astype(np.float64).tolist(), strict=True))
            queue.extend(wider_queue(a, seen_units))
            continue
        if pos >= 0:
            v.looked.add(i)
        known = deps.get(i) if pos >= 0 else None
        dep = known if known is not None else deployment(sc, i)
        launch = checked_launch(a.adv, req, dep, a.no_checkpoint)
        if launch.error:
            v.skipped.setdefault(f"{dep.engine} {dep.weight_dtype}", launch.error)
            continue                        # not predicted (nor simulated): it would not be shown
        v.tried += 1
        row = None
        if pos >= 0:
            if i not in analysed:
                ahead = [int(c) for c in best[pos:pos + v.limit]]
                deps.update({c: dep if c == i else deployment(s, c) for c in ahead})
                terms = analyse(a.adv, a.model, req.workload, [deps[c] for c in ahead])
                analysed.update((c, (terms, k)) for k, c in enumerate(ahead))
            terms, k = analysed[i]
            row = terms.row(k)
        rec, over = predicted(a, v, dep, launch, row)
        if rec.launch.error:
            v.skipped.setdefault(f"{rec.deployment.engine} {rec.deployment.weight_dtype}", rec.launch.error)
            continue
        for name in verify.broken(rec, ap.sla, ap.percentile):
            v.dropped_by[name] = v.dropped_by.get(name, 0) + 1
        plain = a.plain_of.get(int(sc.layout[i])) if over and sc.speculative(i) is not None else None
        if plain is not None:
            # the analytic model preferred speculation on this layout but its prediction misses the bounds (the
            # simulation times the verify steps' share of the token budget, which delays prompts): the layout
            # without it is tried next, so the answer does not lose it
            queue.appendleft((sc, plain, -1))
            d, spec = rec.deployment, sc.speculative(i)
            assert spec is not None             # plain is set only where the candidate is speculative
            v.dropped.append(f"dropped after simulation: {d.replicas} x TP{d.tp} {d.gpu} {d.weight_dtype}/"
                             f"{d.kv_dtype} on {d.engine} +{spec.method} k={spec.num_speculative_tokens}: "
                             f"{'; '.join(over)} (tried without speculation instead)")
            # not settled at more replicas: those would be weighed against cheaper untried candidates only
            # after they filled the answer, while the layout without it may meet the bounds as it is
            continue
        rec, over = settle_replicas(a, v, dep, rec, over)
        if over:
            d = rec.deployment
            v.dropped.append(f"dropped after simulation: {d.replicas} x TP{d.tp} {d.gpu} {d.weight_dtype}/"
                             f"{d.kv_dtype} on {d.engine}: {'; '.join(over)}")
            continue
        v.recs.append(rec)
        v.chosen.append(i if pos >= 0 else -1)
    return v


def unpredicted_contenders(a: Asked, s: Scored, best: NDArray[np.int64], v: Verified) -> int:
    """How many of the analytic ranking's candidates (``best``) were not predicted although their bounds
    (``rank.contenders``) do not rule out that they rank among the recommendations shown (any, when fewer than
    top_k are shown)."""
    untried = best[~np.isin(best, np.fromiter(v.looked, dtype=np.int64, count=len(v.looked)))]
    if not len(untried) or len(v.recs) < a.req.top_k:
        return len(untried)
    ap = a.ap
    if ap.objective == "min_latency":
        worst = max(verify.sla_values(r.predicted, ap.percentile)["e2e_ms"] for r in v.recs)
    else:
        worst = max(math.inf if r.cost.usd_per_hour is None else r.cost.usd_per_hour for r in v.recs)
    return len(contenders(s, untried, ap.objective, a.req.workload.mode == "offline",
                          a.req.workload.output_tokens - 1, worst))


def wider_queue(a: Asked, seen_units: set[tuple[int, float, float]]) -> list[tuple[Scored, int, int]]:
    """The layouts and settings not yet predicted whose floors meet every bound, each at its most replicas within
    the budget, best first (one per unit: the engine settings change its capacity)."""
    req, ap = a.req, a.ap
    s = most(a.adv, a.cache, req, ap, a.memo)
    wide = order(s, floor_feasible(s, ap, req.workload.output_tokens - 1), ap.objective,
                 req.workload.mode == "offline")
    _, unit = np.unique(np.stack([s.layout.astype(np.float64), s.seqs, s.tokens], axis=1), axis=0,
                        return_inverse=True)
    return [(s, int(i), -1) for i in ranking.first_per_group(wide, unit.ravel().astype(np.int64))
            if (int(s.layout[i]), float(s.seqs[i]), float(s.tokens[i])) not in seen_units]


def settle_replicas(a: Asked, v: Verified, dep: Deployment, rec: Recommendation,
                    over: list[str]) -> tuple[Recommendation, list[str]]:
    """``dep`` (predicted as ``rec``, breaking ``over``) at the fewest replicas its predictions meet the bounds
    with: more replicas while it misses (every latency falls with them), fewer while it meets the bounds; then
    the replica counts of the grid between the most that missed and the fewest that met, halved (at most
    ``BISECT_TRIES`` predictions). The recommendation and what it breaks (nothing when some count met them).
    Ranked by latency, one that meets the bounds keeps its replicas: fewer would only make it slower."""
    req, ap = a.req, a.ap
    if not over and ap.objective == "min_latency":
        return rec, []
    first_over, first_reps = over, dep.replicas
    by_reps = {dep.replicas: rec}
    missed = dep.replicas if over else 0
    met = 0 if over else dep.replicas
    step = (more_replicas(a.adv, dep, ap, req.workload, verify.miss(rec, ap.sla, ap.percentile)) if over
            else fewer_replicas(dep, verify.use(rec, ap.sla, ap.percentile)))
    for other in step:
        if v.tried >= v.limit:
            break
        v.tried += 1
        again, over_again = predicted(a, v, other)
        by_reps[other.replicas] = again
        if over_again:
            missed = max(missed, other.replicas)
            if not over:
                break
        else:
            met = other.replicas if not met else min(met, other.replicas)
            if over:
                break
    for _ in range(BISECT_TRIES):
        between = [r for r in REPLICA_GRID if missed < r < met]
        if not met or not between or v.tried >= v.limit:
            break
        mid = dep.model_copy(update={"replicas": between[len(between) // 2],
                                     "gpu_count": between[len(between) // 2] * dep.tp * dep.pp * dep.dp})
        v.tried += 1
        again, over_again = predicted(a, v, mid)
        by_reps[mid.replicas] = again
        if over_again:
            missed = mid.replicas
        else:
            met = mid.replicas
    if not met:
        return rec, over
    if first_over:
        v.dropped.append(f"dropped after simulation: {first_reps} x TP{dep.tp} {dep.gpu} "
                         f"{dep.weight_dtype}/{dep.kv_dtype} on {dep.engine}: {'; '.join(first_over)} "
                         f"({met} replicas meet the bounds: recommended instead)")
    return by_reps[met], []


def smallest(a: Asked, s: Scored, fit: NDArray[np.int64], recs: list[Recommendation]) -> SmallestDeployment | None:
    """Of the search's candidates that meet every bound (the deadline's throughput among them), one with the
    fewest GPUs: a recommendation if one has that many, else the objective's best of them, predicted as
    the recommendations are."""
    if not len(fit):
        return None
    req, ap = a.req, a.ap
    fewest = int(s.n_gpus[fit].min())
    found = next((r for r in recs if r.deployment.gpu_count == fewest), None)
    rank = found.rank if found is not None else None
    if found is None:
        offline = req.workload.mode == "offline"
        for i in order(s, fit[s.n_gpus[fit] == fewest], ap.objective, offline)[:SMALLEST_TRIES]:
            # predicted and checked as the search checks the deployments it offers
            cand, over = predicted_against(a.adv, a.model, req, ap, deployment(s, int(i)), {})
            if not cand.launch.error and not over:
                found = cand
                break
    if found is None:
        return None
    return SmallestDeployment(rank=rank, gpu_count=fewest, deployment=found.deployment,
                              output_tok_s=found.predicted.output_tok_s, usd_per_hour=found.cost.usd_per_hour,
                              job=batch_jobs.of_prediction(req.workload, found.predicted, found.cost,
                                                           ap.sla.deadline_hours))
