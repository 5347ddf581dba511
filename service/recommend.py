"""The deployment search behind POST /v1/recommendations.

Every allowed GPU x engine x weight dtype x KV dtype x TP x PP x engine settings x replica count is a
candidate, decided exactly by the cost model over arrays; feasibility is a mask and ranking a sort. The
only pruning is exact: a layout whose weights and fixed reserve alone overflow a GPU (at the smallest
settings of the grid) cannot fit with any settings, so its settings and replicas are never expanded. A
layout at one setting (a unit) has its static terms, parameters and latency floors computed once per
request; its replica counts are decided by a few probes each (the verdict is monotone in replicas), and a
candidate probed twice is solved once. The answer's deployments are then re-predicted one by one through
``Advisor.predict``, so each recommendation carries exactly what ``POST /v1/predictions`` says of it.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gpu_catalog.schema import ModelSpec
from service import batch_jobs, verify
from service.advisor import QUANTILES, Advisor, Analysed, Analyses, InvalidRequest, analytic_ttft_quantile_s
from service.core import search
from service.core.calibration import calibration_engine, model_class
from service.core.costmodel import (
    MODES,
    Candidates,
    Params,
    ServeInputs,
    StepModel,
    Tables,
    capacity,
    static_terms,
    step_model,
)
from service.core.engine_defaults import is_current
from service.core.launch import CheckpointError, LaunchError
from service.core.residuals import Correction, correction
from service.schemas.predictions import (
    Cost,
    Deployment,
    EngineArgs,
    Launch,
    Predicted,
    PredictionRequest,
    Workload,
)
from service.schemas.recommendations import (
    DEFAULT_MAX_GPUS,
    Closest,
    Constraints,
    Explanation,
    ParetoPoint,
    Recommendation,
    RecommendationRequest,
    RecommendationResponse,
    Relaxation,
    SearchStats,
    Sla,
    Violation,
)
from service.simulation import SimMemo
from service.units import MS_PER_S, S_PER_HOUR, TOKENS_PER_MILLION

F = NDArray[np.float64]

# Scenario presets: the brief's three cases with the bounds issue 4 states for them (chat: TTFT <= 200 ms
# p95, TPOT <= 50 ms, no aggressive quantisation; api: TTFT within about a second, TPOT <= 100 ms; batch:
# no latency SLA, cost per token first). Latency bounds in ms at the stated percentile.
SCENARIOS: dict[str, dict[str, Any]] = {
    "chat": {"sla": {"ttft_ms": 200.0, "tpot_ms": 50.0, "percentile": "p95"},
             "max_quality_loss": "near-lossless", "objective": "min_cost"},
    "batch": {"sla": {"percentile": "mean"}, "max_quality_loss": "noticeable", "objective": "min_cost_per_token"},
    "api": {"sla": {"ttft_ms": 1000.0, "tpot_ms": 100.0, "percentile": "p95"},
            "max_quality_loss": "noticeable", "objective": "min_cost"},
}
QUALITY_RANK = {"lossless": 0, "near-lossless": 1, "noticeable": 2}

# The engine-settings grid: each engine's own default for the GPU, plus these (deduplicated). A search
# grid, not measured values: fewer sequences per step lower TPOT at high load; a smaller token budget
# shortens each mixed step (and frees activation memory for the KV cache).
MAX_NUM_SEQS_GRID = (64, 256)
MAX_BATCHED_TOKENS_GRID = (4096,)
# Settings per layout before deduplication: the engine default and each grid value, of both settings.
N_SETTINGS = (1 + len(MAX_NUM_SEQS_GRID)) * (1 + len(MAX_BATCHED_TOKENS_GRID))
# Replica counts tried (each bounded by max_gpus, and by the concurrency: idle replicas only cost).
REPLICA_GRID = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64, 96, 128, 192, 256, 384, 512)
REPLICAS = np.asarray(REPLICA_GRID, dtype=np.float64)
# Layout tables a recommender keeps per calibration (one per model shape and set of allowed GPUs, engines,
# dtypes and GPU counts; most requests allow them all): a bound on memory, not a tuned figure.
LAYOUT_TABLES_KEPT = 64
# Tensor and pipeline sizes tried (TP within a node; PP > 1 only when multi_node is allowed).
TP_GRID = (1, 2, 4, 8, 16, 32, 64, 72)
PP_GRID_MULTI_NODE = (2, 4, 8)
SLA_METRICS = ("ttft_ms", "tpot_ms", "e2e_ms")
# Load grid for "the largest concurrency / rate that fits" (shares of the requested load).
LOAD_SHARES = tuple(float(x) for x in np.geomspace(1.0, 1.0 / 512, 28)[1:])
CLOSEST_SHOWN = 3
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
# Predictions that adjust a candidate's replica count (more replicas only lower every latency): at most this
# many more when its prediction misses, fewer when it meets the bounds with room, and halvings of the counts
# between the most that missed and the fewest that met. Bounds on the work of one request.
MORE_REPLICAS_TRIED = 2
FEWER_REPLICAS_TRIED = 1
BISECT_TRIES = 2


def floors(params: Params, sm: StepModel) -> tuple[F, F]:
    """Latency floors no prediction goes below: TTFT, the front end and the prompt's own compute (alone, or in
    chunks carried by decode steps, which read the weights for the decodes anyway: the smaller), at any
    percentile; TPOT, one decode step of one sequence (steps only grow with the batch)."""
    carried_s = sm.s.isl * sm.c_prefill_s
    return (params.ttft_fixed_s + np.minimum(sm.prefill_alone_s, carried_s),
            sm.decode_step(np.ones(len(sm.s.isl)))[0])


@dataclass
class Applied:
    sla: Sla
    constraints: Constraints
    objective: str
    percentile: str
    max_quality: str


Layout = tuple[str, str, str, str, str, int, int]     # engine, version, GPU, weight dtype, KV dtype, TP, PP


class Layouts:
    """A search's layouts by index, in blocks of one engine version on one GPU (weight dtype x KV dtype x
    TP/PP pair, the last varying fastest; the order of ``Units.lay``). A layout's tuple is made when it is
    asked for: a search has tens of thousands of layouts, an answer names a few."""

    def __init__(self) -> None:
        self.blocks: list[tuple[str, str, str, list[str], list[str], list[tuple[int, int]]]] = []
        self.starts: list[int] = []
        self.n = 0

    def add(self, engine: str, version: str, gpu: str, wds: list[str], kvs: list[str],
            pairs: list[tuple[int, int]]) -> None:
        self.blocks.append((engine, version, gpu, wds, kvs, pairs))
        self.starts.append(self.n)
        self.n += len(wds) * len(kvs) * len(pairs)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Layout:
        if not 0 <= i < self.n:
            raise IndexError(i)
        b = bisect_right(self.starts, i) - 1
        e, v, g, wds, kvs, pairs = self.blocks[b]
        r = i - self.starts[b]
        tp, pp = pairs[r % len(pairs)]
        return e, v, g, wds[r // (len(kvs) * len(pairs))], kvs[(r // len(pairs)) % len(kvs)], tp, pp


@dataclass
class Scored:
    """One search's candidates and what the model says of them."""

    context_tok: int                        # max_model_len of every candidate: the workload's context
    layout: NDArray[np.int64]               # index into the layout table
    layouts: Layouts
    replicas: F
    seqs: F
    tokens: F
    frac: F
    n_gpus: F
    usd_h: F
    fits: NDArray[np.bool_]
    ttft_ms: F                              # the analytic estimates at the SLA's percentile
    tpot_ms: F
    e2e_ms: F
    ttft_floor_ms: F                        # one request alone: no prediction is below these (``floors``)
    tpot_floor_ms: F
    out_tok_s: F
    usd_per_m: F
    overloaded: NDArray[np.bool_]
    generated: int
    scored: int                             # distinct candidates whose memory and latency floors were looked at
    solved: int                             # ... and whose serving steady state was solved (floors within SLA)
    feasible_total: int = -1                # candidates meeting every constraint (-1: count the mask)
    pruned: int = 0                         # (scope "ends") items whose layout cannot hold the weights


@dataclass
class Solves:
    """Serving solves of a search's units at one load, by candidate (a unit at a replica option; flat index
    ``option x units + unit``, so that the few options a scope probes stay in few memory pages), filled as
    the search probes them: a candidate probed again (the answer's re-scoring of the bisection's verdicts,
    the account of an infeasible search) is solved once."""

    units: int
    done: NDArray[np.bool_]
    ttft_s: F                               # at the SLA's percentile (analytic tail)
    tpot_s: F
    out_tok_s: F
    overloaded: NDArray[np.bool_]

    @classmethod
    def empty(cls, units: int) -> Solves:
        """Nothing solved yet: the figures are read only where ``done`` (left unset: they run to megabytes)."""
        n = units * len(REPLICA_GRID)
        return cls(units=units, done=np.zeros(n, dtype=bool), ttft_s=np.empty(n), tpot_s=np.empty(n),
                   out_tok_s=np.empty(n), overloaded=np.empty(n, dtype=bool))

    def at(self, u: NDArray[np.int64], j: NDArray[np.int64]) -> NDArray[np.int64]:
        """Flat index of units ``u`` at options ``j``."""
        return j * self.units + u


@dataclass(frozen=True)
class LayoutTable:
    """A request's allowed layouts (``Layouts``; rows in its order) and what depends on them alone."""

    layouts: Layouts
    lay: NDArray[np.int64]                  # per layout: GPU, weight dtype, KV dtype (table indices), TP, PP
    dset: F                                 # per layout: engine default max_num_seqs, max tokens, memory share, budget
    price: F                                # per layout: USD per GPU-hour (NaN: no public price)
    params: F                               # per layout: fitted parameters (PARAM_NAMES order)
    seg_keys: list[tuple[str, str, str, str]]  # the calibration keys of the layouts' segments
    seg_of: NDArray[np.int64]               # per layout: its segment in seg_keys


@dataclass
class Units:
    """A search's units (layout x engine settings) and what depends on neither the load nor the replica
    count: built once per request and shared by its searches (the answer, the account of an infeasible
    one, the relaxations of the load and of the budget)."""

    table: LayoutTable                      # the allowed layouts, engine defaults, prices, parameters
    fits_min: NDArray[np.bool_]             # per layout: holds the weights at the smallest settings
    li: NDArray[np.int64]                   # per unit: its layout
    seqs: F
    toks: F
    mode: int                               # the workload's mode
    inputs: ServeInputs                     # the serving solve's inputs per unit (load and replicas set per probe)
    ttft_lb_s: F                            # per unit, latency floors: one request alone
    tpot_lb_s: F
    fits: NDArray[np.bool_]
    corr: Correction | None = None          # per layout: users' measurements nearby (service/core/residuals.py)
    solves: dict[tuple[float, float | None], Solves] = field(default_factory=dict)   # by (load, quantile)


# What the searches of one request share: their Units, by everything that decides them.
SearchMemo = dict[tuple[Any, ...], Units | None]


def candidates(lay: NDArray[np.int64], dset: F, m_idx: int, wl: Workload, li: NDArray[np.int64], seqs: F, toks: F,
               reps: F, loads: F) -> Candidates:
    """Layouts ``li`` (rows of ``lay`` and ``dset``, as in ``Units``) at the given settings, replicas and
    loads, for the workload ``wl``."""
    n = len(li)
    return Candidates(
        model=np.full(n, m_idx, dtype=np.int64), gpu=lay[li, 0], wdtype=lay[li, 1], kvdtype=lay[li, 2],
        budget=dset[li, 3].astype(np.int64), tp=lay[li, 3].astype(np.float64),
        pp=lay[li, 4].astype(np.float64), ep=np.ones(n), replicas=reps, max_num_seqs=seqs,
        max_batched_tok=toks, mem_fraction=dset[li, 2], input_tok=np.full(n, float(wl.input_tokens)),
        output_tok=np.full(n, float(wl.output_tokens)), mode=np.full(n, MODES[wl.mode], dtype=np.int64),
        load=loads, context_tok=np.full(n, float(wl.context_tokens)),
        first_wave_share=np.full(n, wl.first_wave_share))


def apply_scenario(req: RecommendationRequest) -> Applied:
    preset = SCENARIOS.get(req.scenario or "", {})
    sla_given = req.sla.model_dump(exclude_none=True)
    sla = Sla(**{**preset.get("sla", {}), **sla_given})
    percentile = sla.percentile or ("p95" if req.scenario else "mean")
    sla = batch_jobs.with_deadline(sla.model_copy(update={"percentile": percentile}), req.workload)
    cons = req.constraints
    max_quality = cons.max_quality_loss or preset.get("max_quality_loss") or "noticeable"
    cons = cons.model_copy(update={"max_quality_loss": max_quality,
                                   "max_gpus": cons.max_gpus or DEFAULT_MAX_GPUS})
    return Applied(sla=sla, constraints=cons, objective=req.objective or scenario_objective(req.scenario, cons),
                   percentile=percentile, max_quality=max_quality)


def scenario_objective(scenario: str | None, cons: Constraints) -> str:
    """What a scenario ranks by when the request names no objective: batch the cost per output token; api the
    hourly cost at its SLA; chat the latency within a budget (constraints.max_usd_per_hour), and without one the
    hourly cost within its latency SLA (the fastest deployment of all would be the largest)."""
    if scenario == "chat" and cons.max_usd_per_hour is not None:
        return "min_latency"
    return str(SCENARIOS.get(scenario or "", {}).get("objective") or "min_cost")


RANKED_BY = {
    "min_cost": "min_cost: USD per hour, then USD per million output tokens",
    "min_cost_offline": "min_cost: USD per million output tokens (an offline job pays for its tokens), then USD per "
                        "hour",
    "min_cost_per_token": "min_cost_per_token: USD per million output tokens (throughput per dollar), then USD per "
                          "hour",
    "max_throughput": "max_throughput: output tokens per second, then USD per hour",
    "min_latency": "min_latency: mean end-to-end latency, then TTFT, then USD per hour",
    "balanced": "balanced: USD per million output tokens and end-to-end latency, each relative to the best",
}


def ranked_by(objective: str, offline: bool, scenario: str | None) -> str:
    """What ordered the recommendations (``rank_keys``), in words, within the SLA and constraints."""
    text = RANKED_BY["min_cost_offline" if objective == "min_cost" and offline else objective]
    if scenario == "chat" and objective == "min_latency":
        text += " (the chat scenario's objective within constraints.max_usd_per_hour)"
    elif scenario == "chat" and objective == "min_cost":
        text += (" (the chat scenario without a budget: the cheapest within its latency SLA; give "
                 "constraints.max_usd_per_hour to rank by latency within it)")
    elif scenario and SCENARIOS[scenario]["objective"] == objective:
        text += f" (the {scenario} scenario's objective)"
    return text + "; every candidate ranked meets the SLA and constraints by its prediction"


def failing(viol: dict[str, NDArray[np.bool_]], n: int, besides: str | None = None) -> NDArray[np.bool_]:
    """Candidates failing any constraint in ``viol`` (but ``besides``)."""
    bad = np.zeros(n, dtype=bool)
    for name, v in viol.items():
        if name != besides:
            bad |= v
    return bad


class Recommender:
    def __init__(self, advisor: Advisor) -> None:
        self.advisor = advisor
        self._tables: tuple[Any, dict[tuple[Any, ...], LayoutTable | None]] = (None, {})

    # --- validation --------------------------------------------------------------------------------

    def _check_list(self, values: list[str] | None, known: dict[str, Any], field: str) -> list[str]:
        if values is None:
            return list(known)
        for i, v in enumerate(values):
            if v not in known:
                raise InvalidRequest(["constraints", field, i], f"unknown id '{v}'; valid: {', '.join(sorted(known))}",
                                     title="Unknown id", valid=sorted(known))
        return list(dict.fromkeys(values))

    # --- the grid ----------------------------------------------------------------------------------

    def search(self, req: RecommendationRequest, ap: Applied, scope: str = "search",
               memo: SearchMemo | None = None) -> Scored:
        """``scope``: ``search`` decides every candidate and scores what it needs (the answer);
        ``ends`` scores each layout and setting at its fewest and most replicas with every solve done (the
        account of an infeasible search); ``most`` scores each at its most replicas within the budget (some
        candidate meets every constraint exactly when one of these does: more replicas only help the other
        bounds); ``all`` scores every candidate (tests check ``search`` by it). ``memo``: the searches of one
        request share what depends on neither the load, the budget nor the scope (``Units``), and the
        serving solves already done."""
        adv = self.advisor
        model = adv.model_for(req.model, req.model_spec)
        tables, m_idx = adv.tables_for(model)
        wl = req.workload
        if wl.context_tokens > model.max_position_embeddings:
            raise InvalidRequest(["workload", "max_context_tokens"],
                                 f"{wl.context_tokens} tokens exceed the {model.max_position_embeddings}-token "
                                 f"context window of {model.id}")
        cons = ap.constraints
        gpus = self._check_list(cons.gpus, adv.gpus, "gpus")
        wds = self._check_list(cons.weight_dtypes, adv.weight_dtypes, "weight_dtypes")
        kvs = self._check_list(cons.kv_dtypes, adv.kv_dtypes, "kv_dtypes") if cons.kv_dtypes else ["auto", "fp8"]
        engines = list(dict.fromkeys(cons.engines or ["vllm", "trtllm"]))
        versions = {}
        for e in engines:
            spec = adv.engines[e]
            v = (cons.engine_versions or {}).get(e) or spec.default_version
            if v not in spec.versions:
                raise InvalidRequest(["constraints", "engine_versions", e], f"unknown {e} version '{v}'",
                                     valid=spec.versions)
            versions[e] = v
        max_q = QUALITY_RANK[ap.max_quality]
        wds = [w for w in wds if QUALITY_RANK[adv.weight_dtypes[w].quality] <= max_q]
        kvs = [k for k in kvs if QUALITY_RANK[adv.kv_dtypes[k].quality] <= max_q]
        max_gpus = int(cons.max_gpus or DEFAULT_MAX_GPUS)
        load = {"concurrency": float(wl.concurrency or 0), "request_rate": float(wl.request_rate or 0.0),
                "offline": float(wl.num_requests or 0)}[wl.mode]
        memo = {} if memo is None else memo
        key = (model.id, m_idx, tuple(engines), tuple(versions.values()), tuple(gpus), tuple(wds), tuple(kvs),
               max_gpus, bool(cons.multi_node), wl.input_tokens, wl.output_tokens, wl.context_tokens, wl.mode)
        if key not in memo:
            memo[key] = self._units(model, tables, m_idx, wl, versions, gpus, wds, kvs, max_gpus,
                                    bool(cons.multi_node))
        un = memo[key]
        if un is None:
            return self._empty(Layouts())
        layouts = un.table.layouts
        lay, li_s, m = un.table.lay, un.li, len(un.li)
        per_layout_gpus = lay[:, 3] * lay[:, 4]
        reps_grid = REPLICAS
        rep_ok = reps_grid[None, :] * per_layout_gpus[:, None] <= max_gpus
        if wl.mode == "concurrency":
            rep_ok &= reps_grid[None, :] <= max(load, 1.0)
        generated = int(rep_ok.sum()) * N_SETTINGS
        options = rep_ok.sum(axis=1)[li_s]          # replica options of each unit: a prefix of the grid
        price = un.table.price
        osl_1 = wl.output_tokens - 1
        q = QUANTILES.get(ap.percentile)
        solved = un.solves.get((load, q))
        if solved is None:
            solved = un.solves[(load, q)] = Solves.empty(m)
        # the distinct candidates this search scored (a unit at a replica option), and of those solved
        probed = np.zeros(m * len(reps_grid), dtype=bool)
        counts = {"scored": 0, "solved": 0}
        # Exact latency floors (one request alone: TTFT >= front end + its prefill, at any percentile; TPOT >=
        # one decode step of one sequence, since steps only grow with the batch). A candidate whose floor
        # already breaks a bound is infeasible at any load: its serving solve is skipped. Per unit (floors
        # do not depend on the replica count).
        within_floor = un.fits.copy()
        for limit_ms, floor_s in ((ap.sla.ttft_ms, un.ttft_lb_s), (ap.sla.tpot_ms, un.tpot_lb_s),
                                  (ap.sla.e2e_ms, un.ttft_lb_s + osl_1 * un.tpot_lb_s)):
            if limit_ms is not None:
                within_floor &= floor_s * MS_PER_S <= limit_ms

        def solve(u: NDArray[np.int64], j: NDArray[np.int64], sel: NDArray[np.int64]) -> NDArray[np.int64]:
            """Units ``u`` at options ``j`` are scored, those at ``sel`` solved: counted (each distinct
            candidate once) and solved where not yet; their flat indices in ``solved``."""
            cand = solved.at(u, j)
            first_time = ~probed[cand]
            probed[cand] = True
            counts["scored"] += int(first_time.sum())
            counts["solved"] += int(first_time[sel].sum())
            at = cand[sel]
            if len(at):
                self._solve(un, solved, at, load, q)
            return at

        def score(u: NDArray[np.int64], j: NDArray[np.int64], skip_by_floor: bool) -> Scored:
            """The units ``u`` at ``REPLICA_GRID[j]`` replicas each, through the cost model."""
            li_c, seqs_c, toks_c, reps = li_s[u], un.seqs[u], un.toks[u], reps_grid[j]
            n = len(li_c)
            # candidates not solved keep their floors (and no throughput)
            ttft, tpot, fits = un.ttft_lb_s[u], un.tpot_lb_s[u], un.fits[u]
            ttft_floor, tpot_floor = ttft.copy(), tpot.copy()
            out_tok_s, overloaded = np.zeros(n), np.zeros(n, dtype=bool)
            sel = np.flatnonzero(within_floor[u] if skip_by_floor else fits)
            at = solve(u, j, sel)
            ttft[sel], tpot[sel] = solved.ttft_s[at], solved.tpot_s[at]
            out_tok_s[sel], overloaded[sel] = solved.out_tok_s[at], solved.overloaded[at]
            n_gpus = per_layout_gpus[li_c] * reps
            usd_h = price[li_c] * n_gpus
            with np.errstate(divide="ignore", invalid="ignore"):
                usd_m = usd_h / (out_tok_s * S_PER_HOUR) * TOKENS_PER_MILLION
            return Scored(
                context_tok=wl.context_tokens, layout=li_c, layouts=layouts, replicas=reps, seqs=seqs_c, tokens=toks_c,
                frac=un.table.dset[li_c, 2], n_gpus=n_gpus, usd_h=usd_h, fits=fits,
                ttft_ms=ttft * MS_PER_S, tpot_ms=tpot * MS_PER_S, e2e_ms=(ttft + osl_1 * tpot) * MS_PER_S,
                ttft_floor_ms=ttft_floor * MS_PER_S, tpot_floor_ms=tpot_floor * MS_PER_S, out_tok_s=out_tok_s,
                usd_per_m=usd_m, overloaded=overloaded, generated=generated, scored=n,
                solved=len(sel))

        if scope == "all":
            u_all = np.repeat(np.arange(m), options)
            j_all = np.broadcast_to(np.arange(len(reps_grid)), (m, len(reps_grid)))[rep_ok[li_s]]
            out = score(u_all, j_all, skip_by_floor=False)
            out.feasible_total = -1
            return out
        if scope == "ends":
            # each unit at its fewest and at its most replicas (its cheapest and its fastest)
            ends = np.flatnonzero(options > 1)
            u_all = np.concatenate([np.arange(m), ends])
            j_all = np.concatenate([np.zeros(m, dtype=np.int64), options[ends] - 1])
            out = score(u_all, j_all, skip_by_floor=False)
            out.feasible_total = -1
            # the layouts that cannot hold the weights, counted the same way (settings x replica ends)
            gone = np.flatnonzero(~un.fits_min)
            out.pruned = int((np.minimum(rep_ok[gone].sum(axis=1), 2)).sum()) * N_SETTINGS
            return out
        if scope == "most":
            # each unit at its most replicas within the budget (the cost computed as ``score`` does)
            n_within = options
            if cons.max_usd_per_hour is not None:
                usd_grid = price[li_s][:, None] * (per_layout_gpus[li_s][:, None] * reps_grid[None, :])
                n_within = ((usd_grid <= cons.max_usd_per_hour) & rep_ok[li_s]).sum(axis=1)
            some = np.flatnonzero(n_within > 0)
            out = score(some, n_within[some] - 1, skip_by_floor=True)
            out.feasible_total = -1
            return out

        # Replicas split the load, so every latency only falls and the throughput only rises as they are
        # added (the cost model's monotonicity in load, a tested property): the replica counts of a unit
        # that meet the SLA are a suffix of its options, those within the budget a prefix. Where the suffix
        # starts (``first_ok``; the options count when nowhere) is bracketed per unit, lo <= first_ok <= hi:
        # a probe that meets the bounds lowers hi to it, one that fails raises lo above it, and a binary
        # search closes what is left (all units at once, a few rounds). Every candidate's verdict is known
        # exactly while only a few per unit are scored.
        top = options - 1                          # each unit's most replicas
        lo = np.zeros(m, dtype=np.int64)
        hi = options.astype(np.int64).copy()

        def probe(u: NDArray[np.int64], j: NDArray[np.int64]) -> None:
            """Units ``u`` at options ``j`` (a unit may be probed at several options at once): each one's
            verdict on every bound that more replicas can only help (memory, capacity, the SLA; not the
            budget), as ``violations`` of ``score(u, j, skip_by_floor=True)`` would give it without the rest of
            the scoring (a candidate outside its floors fails: memory, or a bound its floor already breaks)."""
            sel = np.flatnonzero(within_floor[u])
            at = solve(u, j, sel)
            ok = np.zeros(len(u), dtype=bool)
            ok[sel] = self.meets_sla(solved.ttft_s[at], solved.tpot_s[at], solved.out_tok_s[at],
                                     solved.overloaded[at], osl_1, ap.sla)
            np.minimum.at(hi, u[ok], j[ok])
            np.maximum.at(lo, u[~ok], j[~ok] + 1)
            np.minimum(lo, hi, out=lo)              # (verdicts are monotone: this only guards the bracket)

        def bisect(units: NDArray[np.int64]) -> None:
            while len(units := units[lo[units] < hi[units]]):
                probe(units, (lo[units] + hi[units]) // 2)

        # Each layout's first unit (its engine's default settings) leads: it probes its fewest replicas (the
        # common answer when the SLA is loose) and its most (the answer ranks them anyway; a unit that fails
        # there fails everywhere), then bisects. Its other settings rarely move the answer: they start from
        # the leader's, probing just below it, at it and at their most, and bisect what is left (the verdicts
        # are the same as bisecting from scratch, with about half the probes).
        first_layouts, first_units = np.unique(li_s, return_index=True)
        lead = first_units[np.searchsorted(first_layouts, li_s)]
        is_lead = lead == np.arange(m)
        leaders = np.flatnonzero(is_lead & (options > 0))
        more = leaders[top[leaders] > 0]
        probe(np.concatenate([leaders, more]), np.concatenate([np.zeros(len(leaders), dtype=np.int64), top[more]]))
        bisect(leaders)
        others = np.flatnonzero(~is_lead & (options > 0))
        guess, most = lo[lead[others]], top[others]
        below = (guess >= 1) & (guess - 1 < most)   # each probe once: below the guess, at it, the most
        at_guess = guess < most
        probe(np.concatenate([others[below], others[at_guess], others]),
              np.concatenate([guess[below] - 1, guess[at_guess], most]))
        bisect(others)
        first_ok = lo
        unit_price = price[li_s] * per_layout_gpus[li_s]
        budget = cons.max_usd_per_hour
        within = (options if budget is None else
                  np.minimum(options, np.searchsorted(reps_grid, budget / np.where(unit_price > 0, unit_price, np.nan),
                                                      side="right")))
        within = np.where(np.isnan(unit_price) & (budget is not None), 0, within)
        n_feasible = int(np.maximum(within - first_ok, 0).sum())
        has = np.flatnonzero(first_ok < options)
        # what the answer ranks: each unit at its fewest replicas that meet the SLA (cheapest), and at its
        # most within the budget and max_gpus (fastest, highest throughput). The fewest were probed by the
        # bisection: their solves are reused.
        last = np.maximum(np.minimum(within, options) - 1, first_ok)
        u_fin = np.concatenate([has, has[last[has] > first_ok[has]]])
        j_fin = np.concatenate([first_ok[has], last[has][last[has] > first_ok[has]]])
        out = score(u_fin, j_fin, skip_by_floor=True)
        out.generated, out.feasible_total = generated, n_feasible
        out.scored, out.solved = counts["scored"], counts["solved"]
        return out

    def _units(self, model: ModelSpec, tables: Tables, m_idx: int, wl: Workload, versions: dict[str, str],
               gpus: list[str], wds: list[str], kvs: list[str], max_gpus: int, multi_node: bool) -> Units | None:
        """The search's units (every setting of the grid of each allowed layout that can hold the weights)
        and what depends on neither the load nor the replica count: static terms, fitted parameters, latency
        floors. None when no layout is allowed."""
        table = self._layout_table(model, versions, gpus, wds, kvs, max_gpus, multi_node)
        if table is None:
            return None
        lay, dset = table.lay, table.dset
        L = len(table.layouts)
        # settings grid per layout: the engine default and the grid values
        seq_opts = [dset[:, 0]] + [np.full(L, float(v)) for v in MAX_NUM_SEQS_GRID]
        tok_opts = [dset[:, 1]] + [np.full(L, float(v)) for v in MAX_BATCHED_TOKENS_GRID]
        # exact prune: at the smallest settings of the grid a layout that does not fit never fits (memory
        # does not depend on the load or the replica count: one each stands in)
        li_all = np.arange(L)
        s_min = np.minimum.reduce(seq_opts)
        t_min = np.minimum.reduce(tok_opts)
        static = static_terms(tables, candidates(lay, dset, m_idx, wl, li_all, s_min, t_min, np.ones(L), np.ones(L)))
        fits_min = static.fits
        keep = np.flatnonzero(fits_min)
        # the units, setting-major; a setting equal to one before it for the same layout (a default equal
        # to a grid value) is left out
        opts = [(so[keep], to[keep]) for so in seq_opts for to in tok_opts]
        li_parts, s_parts, t_parts = [], [], []
        for o, (so, to) in enumerate(opts):
            new = np.ones(len(keep), dtype=bool)
            for so_before, to_before in opts[:o]:
                new &= (so != so_before) | (to != to_before)
            li_parts.append(keep[new])
            s_parts.append(so[new])
            t_parts.append(to[new])
        li_s = np.concatenate(li_parts)
        seqs_s = np.concatenate(s_parts)
        toks_s = np.concatenate(t_parts)
        m = len(li_s)
        # Per layout (at the smallest settings), what no engine setting changes: the step model, the serving
        # inputs but two, and the latency floors of one request alone (as a static batch of one: its prompt's
        # prefill, then decode steps of one sequence; the same at any replica count). Per unit, what the
        # settings decide: the memory that is left for the KV cache, hence what fits and the batch it holds.
        params = Params.from_matrix(table.params)
        sm = step_model(static, params)
        cap = capacity(tables, candidates(lay, dset, m_idx, wl, li_s, seqs_s, toks_s, np.ones(m), np.ones(m)),
                       static.weights[li_s], static.overhead[li_s], static.runnable[li_s], static.seq_full[li_s],
                       static.seq_mean[li_s])
        inputs = ServeInputs.of(static, params, sm).expand(li_s, cap_mean=cap.cap_mean, max_batched_tok=toks_s)
        ttft_lb, tpot_lb = floors(params, sm)
        corr = correction(self.advisor.cal.calibration.residuals(), table.seg_keys,
                          (lay[:, 3] * lay[:, 4]).astype(float), MODES[wl.mode], wl.input_tokens, wl.output_tokens,
                          float(tables.active_linear_params[m_idx]), of=table.seg_of)
        if corr is not None:    # the floors hold under the least correction a layout can get
            least = corr.floor_factors()
            ttft_lb, tpot_lb = ttft_lb * least[:, 0], tpot_lb * least[:, 1]
        return Units(table=table, fits_min=fits_min, li=li_s, seqs=seqs_s, toks=toks_s, mode=MODES[wl.mode],
                     inputs=inputs, ttft_lb_s=ttft_lb[li_s], tpot_lb_s=tpot_lb[li_s], fits=cap.fits, corr=corr)

    def _layout_table(self, model: ModelSpec, versions: dict[str, str], gpus: list[str], wds: list[str],
                      kvs: list[str], max_gpus: int, multi_node: bool) -> LayoutTable | None:
        """Every layout the request allows, in blocks of one engine on one GPU (weight dtype x KV dtype x TP/PP
        pairs), with the engines' default settings, prices and fitted parameters: nothing of the workload. Kept
        per calibration for the requests that allow the same layouts (None: no layout is allowed)."""
        cal = self.advisor.cal.calibration
        if self._tables[0] is not cal or len(self._tables[1]) >= LAYOUT_TABLES_KEPT:
            self._tables = (cal, {})
        held = self._tables[1]
        heads, kv_heads = model.num_attention_heads, model.num_kv_heads
        # what the layouts depend on: of the model, only what decides its TP/PP pairs and its class (overheads)
        key = (heads, kv_heads, model.num_layers, model_class(model), tuple(versions.items()), tuple(gpus),
               tuple(wds), tuple(kvs), max_gpus, multi_node)
        if key in held:
            return held[key]
        adv = self.advisor
        idx = adv.index
        layouts = Layouts()
        # per block's weight dtype, in order: its calibration segment (engine, version, GPU, weight dtype)
        segments: list[tuple[str, str, str, str]] = []
        # per block: its GPU, its sizes (weight dtypes, KV dtypes, pairs) and where its own lists start in these
        blocks: list[tuple[int, int, int, int, int, int, int]] = []
        w_idx: list[int] = []
        k_idx: list[int] = []
        tp_pp: list[tuple[int, int]] = []
        block_settings: list[tuple[float, float, float, int]] = []   # default seqs, tokens, fraction, budget
        block_price: list[float] = []
        # what an engine runs on a GPU architecture, and the TP/PP pairs of a node size: the same for many GPUs
        by_arch: dict[tuple[str, str], tuple[list[str], list[str], list[int], list[int]]] = {}
        by_node: dict[int, list[tuple[int, int]]] = {}
        for e, v in versions.items():
            for g in gpus:
                gpu = adv.gpus[g]
                if gpu.vendor not in adv.engines[e].vendors:
                    continue
                arch = gpu.architecture
                if (e, arch) not in by_arch:
                    ok_w = [w for w in wds if (e, "weight", w, arch) in adv.support]
                    ok_k = [k for k in kvs if (e, "kv", k, arch) in adv.support]
                    by_arch[(e, arch)] = (ok_w, ok_k, [idx["wdtype"][w] for w in ok_w],
                                          [idx["kvdtype"][k] for k in ok_k])
                ok_w, ok_k, ok_w_idx, ok_k_idx = by_arch[(e, arch)]
                per_node = gpu.max_gpus_per_node
                if per_node not in by_node:
                    tps = [t for t in TP_GRID if t <= min(per_node, max_gpus) and heads % t == 0
                           and (t <= kv_heads or t % kv_heads == 0)]
                    by_node[per_node] = [(t, 1) for t in tps] + (
                        [(tps[-1], p) for p in PP_GRID_MULTI_NODE if tps[-1] * p <= max_gpus and p <= model.num_layers]
                        if multi_node and tps else [])
                pairs = by_node[per_node]
                if not (ok_w and ok_k and pairs):
                    continue
                # the block in the order weight dtype, KV dtype, TP/PP pair (the last varies fastest)
                layouts.add(e, v, g, ok_w, ok_k, pairs)
                blocks.append((idx["gpu"][g], len(ok_w), len(ok_k), len(pairs), len(w_idx), len(k_idx), len(tp_pp)))
                w_idx += ok_w_idx
                segments += [(e, v, g, w) for w in ok_w]
                k_idx += ok_k_idx
                tp_pp += pairs
                d = adv.defaults(e, v, gpu)
                block_settings.append((float(d.max_num_seqs), float(d.max_num_batched_tokens), d.mem_fraction,
                                       d.budget))
                block_price.append(gpu.price_usd_per_gpu_hour or np.nan)
        L = len(layouts)
        if not L:
            held[key] = None
            return None
        # each layout's position in its block's weight dtype, KV dtype and pair lists, then the indices
        blk = np.asarray(blocks, dtype=np.int64)
        sizes = blk[:, 1] * blk[:, 2] * blk[:, 3]
        of = np.repeat(np.arange(len(blocks)), sizes)
        r = np.arange(L) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        n_k, n_pairs = blk[of, 2], blk[of, 3]
        w_at = blk[of, 4] + r // (n_k * n_pairs)
        k_at = blk[of, 5] + (r // n_pairs) % n_k
        pair_at = blk[of, 6] + r % n_pairs
        pairs_arr = np.asarray(tp_pp, dtype=np.int64)
        lay = np.stack([blk[of, 0], np.asarray(w_idx, dtype=np.int64)[w_at], np.asarray(k_idx, dtype=np.int64)[k_at],
                        pairs_arr[pair_at, 0], pairs_arr[pair_at, 1]], axis=1)
        dset = np.repeat(np.asarray(block_settings, dtype=np.float64), sizes, axis=0)
        price = np.repeat(np.asarray(block_price, dtype=np.float64), sizes)
        seg_keys: list[tuple[str, str, str, str]] = [
            (calibration_engine(e, adv.gpus[g].vendor), adv.gpus[g].architecture, g, w) for e, v, g, w in segments]
        current = {ev: is_current(*ev, adv.constants) for ev in {(e, v) for e, v, _, _ in segments}}
        seg_params = adv.param_rows(seg_keys, [current[(e, v)] for e, v, _, _ in segments], model_class(model))
        table = LayoutTable(layouts=layouts, lay=lay, dset=dset, price=price, params=seg_params[w_at],
                            seg_keys=seg_keys, seg_of=w_at)
        for a in (lay, dset, price, table.params):
            a.flags.writeable = False                # shared by the requests that allow the same layouts
        held[key] = table
        return table

    @staticmethod
    def _solve(un: Units, solved: Solves, at: NDArray[np.int64], load: float, q: float | None) -> None:
        """Solve the serving steady state of candidates ``at`` (flat, as in ``Solves``) into ``solved`` (those
        already there are not solved again)."""
        at = at[~solved.done[at]]
        if not len(at):
            return
        j, u = np.divmod(at, solved.units)
        reps = np.maximum(REPLICAS[j], 1.0)
        inp = un.inputs

        def store(a: int, b: int, _batch: F, ttft: F, tpot: F, per_replica_s: F, _share: F,
                  overloaded: NDArray[np.bool_]) -> None:
            """Candidates a..b-1's figures (as costmodel.serve gives them) into ``solved``, in the thread that
            solved them (each part's candidates are its own: no two threads write one element)."""
            part, where = u[a:b], at[a:b]
            if un.corr is not None:    # as POST /v1/predictions corrects the same deployment (Advisor.analyse)
                fac = un.corr.factors(un.li[part], load / reps[a:b])
                ttft, tpot, per_replica_s = ttft * fac[:, 0], tpot * fac[:, 1], per_replica_s * fac[:, 2]
            if q is not None:
                ttft = analytic_ttft_quantile_s(ttft, inp.row("ttft_fixed_s")[part], inp.row("prefill_alone")[part],
                                                q)
            solved.ttft_s[where], solved.tpot_s[where] = ttft, tpot
            solved.out_tok_s[where] = per_replica_s * reps[a:b] * inp.row("osl")[part]
            solved.overloaded[where] = overloaded
            solved.done[where] = True

        inp.solve_at(u, reps, load, un.mode, store)

    @staticmethod
    def meets_sla(ttft_s: F, tpot_s: F, out_tok_s: F, overloaded: NDArray[np.bool_], osl_1: int,
                  sla: Sla) -> NDArray[np.bool_]:
        """Which candidates that fit meet capacity and the SLA, from their solved figures (``violations``'
        tests, computed as it computes them)."""
        ok = ~overloaded
        if sla.ttft_ms is not None:
            ok &= ~(ttft_s * MS_PER_S > sla.ttft_ms)
        if sla.tpot_ms is not None:
            ok &= ~(tpot_s * MS_PER_S > sla.tpot_ms)
        if sla.e2e_ms is not None:
            ok &= ~((ttft_s + osl_1 * tpot_s) * MS_PER_S > sla.e2e_ms)
        if sla.min_output_tok_s is not None:
            ok &= ~(out_tok_s < sla.min_output_tok_s)
        return ok

    @staticmethod
    def floor_feasible(s: Scored, ap: Applied, osl_1: int) -> NDArray[np.int64]:
        """Candidates whose floors (one request alone), memory, capacity and cost meet every bound: those the
        reference (the prediction) may accept. A superset of ``feasible``'s; no prediction below its floors."""
        ok = s.fits & Recommender.meets_sla(s.ttft_floor_ms / MS_PER_S, s.tpot_floor_ms / MS_PER_S, s.out_tok_s,
                                            s.overloaded, osl_1, ap.sla.model_copy(update={"min_output_tok_s": None}))
        if ap.constraints.max_usd_per_hour is not None:
            ok &= s.usd_h <= ap.constraints.max_usd_per_hour
        return np.flatnonzero(ok)

    @staticmethod
    def feasible(s: Scored, ap: Applied) -> NDArray[np.int64]:
        """Indices of the candidates that meet every constraint."""
        return np.flatnonzero(~failing(Recommender.violations(s, ap), len(s.fits)))

    def _empty(self, layouts: Layouts) -> Scored:
        z, b, i = np.zeros(0), np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64)
        return Scored(context_tok=0, layout=i, layouts=layouts, replicas=z, seqs=z, tokens=z, frac=z, n_gpus=z,
                      usd_h=z, fits=b, ttft_ms=z, tpot_ms=z, e2e_ms=z, ttft_floor_ms=z,
                      tpot_floor_ms=z, out_tok_s=z, usd_per_m=z, overloaded=b,
                      generated=0, scored=0, solved=0)

    # --- constraints and ranking -------------------------------------------------------------------

    @staticmethod
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

    @staticmethod
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

    @staticmethod
    def order(s: Scored, idx: NDArray[np.int64], objective: str, offline: bool) -> NDArray[np.int64]:
        """Candidates ``idx`` best first."""
        return idx[search.rank_order(*Recommender.rank_keys(s, idx, objective, offline))]

    @staticmethod
    def best_per_layout(s: Scored, idx: NDArray[np.int64], objective: str, offline: bool) -> NDArray[np.int64]:
        """Each layout's best of candidates ``idx``, best first: ``first_per_group(order(...), s.layout)``."""
        return idx[search.best_per_group(s.layout[idx], *Recommender.rank_keys(s, idx, objective, offline))]

    # --- the answer ----------------------------------------------------------------------------------

    def recommend(self, req: RecommendationRequest) -> RecommendationResponse:
        t0 = time.perf_counter()
        adv = self.advisor
        model = adv.model_for(req.model, req.model_spec)
        ap = apply_scenario(req)
        memo: SearchMemo = {}
        s = self.search(req, ap, memo=memo)
        feasible = self.feasible(s, ap)
        offline = req.workload.mode == "offline"
        # one per layout, best first; a layout the engine cannot be launched with as asked (no checkpoint
        # or quantisation recipe for its dtype) is passed over, and the answer says so
        recs: list[Recommendation] = []
        chosen: list[int] = []
        skipped: dict[str, str] = {}
        # the search's figures are analytic estimates: each candidate is predicted as POST /v1/predictions does
        # (simulating its scheduler), and its prediction decides. One that misses a bound is tried at more
        # replicas, one that meets them at fewer; then the layouts and settings whose floors (not their
        # analytic figures) meet every bound are tried too, at their most replicas, while the answer has room:
        # the analytic model may not rule out what its prediction accepts. At most top_k +
        # MAX_EXTRA_CANDIDATES predictions.
        dropped: list[str] = []
        dropped_by: dict[str, int] = {}             # the bounds the predictions of dropped candidates broke
        tried = 0
        limit = req.top_k + verify.MAX_EXTRA_CANDIDATES
        no_checkpoint: dict[Any, str] = {}
        sims: SimMemo = {}                      # candidates with the same simulation inputs are simulated once
        best = self.best_per_layout(s, feasible, ap.objective, offline)     # each layout's best, best first
        # the analytic terms of the candidates predicted, computed for a batch of the next ones at a time (as
        # many as the answer may still try: one batch, mostly)
        analysed: dict[int, tuple[Analyses, int]] = {}
        deps: dict[int, Deployment] = {}          # the deployments of the candidates analysed
        # (scored candidates, index, position in ``best`` or -1): the analytic ranking's, then the others
        queue: list[tuple[Scored, int, int]] = [(s, int(i), pos) for pos, i in enumerate(best)]
        seen_units = {(int(s.layout[i]), float(s.seqs[i]), float(s.tokens[i])) for i in best}
        widened = False

        def predict(dep: Deployment, launch: Launch | None = None,
                    terms: Analysed | None = None) -> tuple[Recommendation, list[str]]:
            rec = self._recommendation(req, ap, dep, len(recs) + 1,
                                       launch if launch is not None else self._launch(req, dep, no_checkpoint),
                                       terms, sims)
            return rec, verify.tail_violations(rec, ap.sla, ap.percentile) if not rec.launch.error else ["launch"]

        while len(recs) < req.top_k and tried < limit:
            if not queue:
                if widened:
                    break
                widened = True
                most = self.search(req, ap, "most", memo)
                wide = self.order(most, self.floor_feasible(most, ap, req.workload.output_tokens - 1), ap.objective,
                                  offline)
                # one per layout and setting not yet predicted (a unit: the engine settings change its capacity)
                _, unit = np.unique(np.stack([most.layout.astype(np.float64), most.seqs, most.tokens], axis=1),
                                    axis=0, return_inverse=True)
                queue = [(most, int(i), -1) for i in search.first_per_group(wide, unit.ravel().astype(np.int64))
                         if (int(most.layout[i]), float(most.seqs[i]), float(most.tokens[i])) not in seen_units]
                continue
            sc, i, pos = queue.pop(0)
            known = deps.get(i) if pos >= 0 else None
            dep = known if known is not None else self.deployment(sc, i)
            launch = self._launch(req, dep, no_checkpoint)
            if launch.error:
                skipped.setdefault(f"{dep.engine} {dep.weight_dtype}", launch.error)
                continue                        # not predicted (nor simulated): it would not be shown
            tried += 1
            row = None
            if pos >= 0:
                if i not in analysed:
                    ahead = [int(c) for c in best[pos:pos + limit]]
                    deps.update({c: dep if c == i else self.deployment(s, c) for c in ahead})
                    terms = adv.analyse(model, req.workload, [deps[c] for c in ahead])
                    analysed.update((c, (terms, k)) for k, c in enumerate(ahead))
                terms, k = analysed[i]
                row = terms.row(k)
            rec, over = predict(dep, launch, row)
            if rec.launch.error:
                skipped.setdefault(f"{rec.deployment.engine} {rec.deployment.weight_dtype}", rec.launch.error)
                continue
            for name in verify.broken(rec, ap.sla, ap.percentile):
                dropped_by[name] = dropped_by.get(name, 0) + 1
            # more replicas while it misses (every latency falls with them), fewer while it meets the bounds;
            # then the replica counts of the grid between the most that missed and the fewest that met, halved
            # (at most BISECT_TRIES predictions): the fewest that meet the bounds
            first_over, first_reps = over, dep.replicas
            by_reps = {dep.replicas: rec}
            missed = dep.replicas if over else 0
            met = 0 if over else dep.replicas
            step = (self.more_replicas(dep, ap, req.workload, verify.miss(rec, ap.sla, ap.percentile)) if over
                    else self.fewer_replicas(dep, verify.use(rec, ap.sla, ap.percentile)))
            for other in step:
                if tried >= limit:
                    break
                tried += 1
                again, over_again = predict(other)
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
                if not met or not between or tried >= limit:
                    break
                mid = dep.model_copy(update={"replicas": between[len(between) // 2],
                                             "gpu_count": between[len(between) // 2] * dep.tp * dep.pp})
                tried += 1
                again, over_again = predict(mid)
                by_reps[mid.replicas] = again
                if over_again:
                    missed = mid.replicas
                else:
                    met = mid.replicas
            if met:
                rec, over = by_reps[met], []
                if first_over:
                    dropped.append(f"dropped after simulation: {first_reps} x TP{dep.tp} {dep.gpu} "
                                   f"{dep.weight_dtype}/{dep.kv_dtype} on {dep.engine}: {'; '.join(first_over)} "
                                   f"({met} replicas meet the bounds: recommended instead)")
            if over:
                d = rec.deployment
                dropped.append(f"dropped after simulation: {d.replicas} x TP{d.tp} {d.gpu} {d.weight_dtype}/"
                               f"{d.kv_dtype} on {d.engine}: {'; '.join(over)}")
                continue
            recs.append(rec)
            chosen.append(i if pos >= 0 else -1)
        moved = False
        if recs:
            recs, order = verify.rerank(recs, ap.objective, offline, ap.percentile, lambda r, k: self._why(
                ap, r.deployment, r.predicted, r.cost, r.binding_constraint, r.headroom, k, req))
            moved = order != sorted(order)
            chosen = [chosen[j] for j in order]
        if dropped and len(recs) < req.top_k:
            dropped.append(f"verification stopped after {tried} predictions (at most top_k + "
                           f"{verify.MAX_EXTRA_CANDIDATES})" if tried >= limit else "no further candidate")
        top = np.asarray(chosen, dtype=np.int64)
        pareto = self._pareto(s, best, top)
        explanation = None
        stats_of = s
        if not recs:
            # the search scored only what it needed for a verdict: score each layout and setting at its
            # fewest and most replicas, every solve done, for the account
            s = self.search(req, ap, scope="ends", memo=memo)
            explanation = self._explain(req, ap, s, self.violations(s, ap), memo)
            if len(feasible):
                # the model found deployments that meet the SLA, but none can be offered as ready to run
                why = [f"{k}: {v}" for k, v in skipped.items()] + [d for d in dropped if d.startswith("dropped")]
                explanation.summary = (f"{len(feasible) if stats_of.feasible_total < 0 else stats_of.feasible_total}"
                                       " candidates meet every constraint in the analytic model, but none can be "
                                       "offered: " + "; ".join(why[:3]))
                explanation.main_obstacle = ("launch" if skipped and not dropped else
                                             max(dropped_by, key=lambda k: dropped_by[k]) if dropped_by else
                                             "simulated tail")
        job = batch_jobs.job(req.workload, ap.sla)
        if job is not None:
            for r in recs:
                r.job = batch_jobs.of_prediction(req.workload, r.predicted, r.cost, ap.sla.deadline_hours)
            if ap.sla.deadline_hours is not None and recs:
                job.smallest = batch_jobs.smallest(self, req, ap, stats_of, feasible, recs)
            if explanation is not None:
                explanation.relaxations += batch_jobs.deadline_relaxations(explanation.relaxations, req.workload)
        elapsed_ms = (time.perf_counter() - t0) * MS_PER_S
        stats = SearchStats(candidates=stats_of.generated, scored=stats_of.scored, solved=stats_of.solved,
                            feasible=len(feasible) if stats_of.feasible_total < 0 else stats_of.feasible_total,
                            elapsed_ms=round(elapsed_ms, 2))
        return RecommendationResponse(
            # feasible: something is offered (the analytic verdict, less what the simulation or launch overturned)
            id="", feasible=bool(recs), model=model.id,
            recommendations=recs, pareto=pareto, search=stats,
            applied={"sla": ap.sla.model_dump(), "constraints": ap.constraints.model_dump(),
                     "objective": ap.objective, "scenario": req.scenario},
            ranked_by=ranked_by(ap.objective, offline, req.scenario),
            percentile_method=(
                verify.method(ap.percentile, len(recs), req.simulation_options.requests or 0, req.simulation.seed,
                              sum(d.startswith("dropped") for d in dropped), moved)
                if req.simulation.enabled else
                "mean: the analytic steady state" if ap.percentile == "mean" else
                f"{ap.percentile}: analytic (simulation disabled); TTFT puts an exponential tail on the queueing "
                "part of the mean TTFT, TPOT uses the mean (each request's TPOT averages many steps)"),
            explanation=explanation, calibration_version=adv.cal.version, batch_job=job,
            notes=[*(f"passed over {k}: {v}" for k, v in skipped.items()), *dropped])

    @staticmethod
    def fewer_replicas(dep: Deployment, use: float | None) -> list[Deployment]:
        """``dep`` at fewer replicas when its prediction leaves room (``FEWER_REPLICAS_TRIED``): the fewest of the
        grid that keep at least the share of its replicas its latencies use of their bounds (``use``: were
        latency to grow as the load per replica, they would still meet them). None without a latency bound:
        the search's replica count then only answers capacity."""
        if use is None:
            return []
        per = dep.tp * dep.pp
        fewer = [r for r in REPLICA_GRID if dep.replicas * use <= r < dep.replicas][:FEWER_REPLICAS_TRIED]
        return [dep.model_copy(update={"replicas": r, "gpu_count": r * per}) for r in fewer]

    def more_replicas(self, dep: Deployment, ap: Applied, wl: Workload, miss: float = 1.0) -> list[Deployment]:
        """``dep`` at a few more replica counts of the grid (``MORE_REPLICAS_TRIED``) within max_gpus, the budget
        and (closed loops) one client per replica at least: the first at least ``miss`` (how many times its
        bounds its prediction exceeds) times its replicas, each next at least twice the last; the most allowed
        last, if none reaches so far."""
        per = dep.tp * dep.pp
        price = self.advisor.gpus[dep.gpu].price_usd_per_gpu_hour
        budget = ap.constraints.max_usd_per_hour
        allowed = [r for r in REPLICA_GRID if dep.replicas < r and r * per <= int(ap.constraints.max_gpus
                                                                                   or DEFAULT_MAX_GPUS)
                   and (wl.concurrency is None or r <= wl.concurrency)
                   and (budget is None or (price is not None and price * per * r <= budget))]
        out: list[int] = []
        want = dep.replicas * max(miss, 1.0)
        for r in allowed:
            if r >= want and len(out) < MORE_REPLICAS_TRIED:
                out.append(r)
                want = 2.0 * r
        if allowed and (not out or (out[-1] != allowed[-1] and len(out) < MORE_REPLICAS_TRIED)):
            out.append(allowed[-1])
        return [dep.model_copy(update={"replicas": r, "gpu_count": r * per}) for r in out]

    def deployment(self, s: Scored, i: int) -> Deployment:
        e, v, g, w, k, tp, pp = s.layouts[int(s.layout[i])]
        reps = int(s.replicas[i])
        frac = float(s.frac[i])
        args = EngineArgs(max_num_seqs=int(s.seqs[i]), max_num_batched_tokens=int(s.tokens[i]),
                          max_model_len=s.context_tok,
                          **({"gpu_memory_utilization": frac} if e == "vllm"
                             else {"kv_cache_free_gpu_memory_fraction": frac}))
        return Deployment(gpu=g, gpu_count=tp * pp * reps, tp=tp, pp=pp, replicas=reps, weight_dtype=w, kv_dtype=k,
                          engine=e, engine_version=v, engine_args=args, multi_node=pp > 1)

    def _recommendation(self, req: RecommendationRequest, ap: Applied, dep: Deployment, rank: int,
                        launch: Launch | None = None, analysed: Analysed | None = None,
                        sims: SimMemo | None = None) -> Recommendation:
        """Deployment ``dep`` as predicted by ``Advisor.predict`` (``launch``: its launch, already rendered;
        ``analysed``: its analytic terms, already computed; ``sims``: the request's simulations so far)."""
        adv = self.advisor
        pred = adv.predict(PredictionRequest(model=req.model, model_spec=req.model_spec, deployment=dep,
                                             workload=req.workload, simulation=req.simulation_options),
                           launch=launch, analysed=analysed, sims=sims)
        assert pred.predicted is not None
        p = pred.predicted
        values = verify.sla_values(p, ap.percentile)
        headroom: dict[str, float] = {}
        for name in SLA_METRICS:
            limit = getattr(ap.sla, name)
            if limit is not None:
                headroom[name] = round(1.0 - values[name] / limit, 4)
        if ap.sla.min_output_tok_s is not None:
            # as for the latency bounds, the share of the predicted figure to spare: 1 - limit / predicted
            headroom["min_output_tok_s"] = round(1.0 - ap.sla.min_output_tok_s / p.output_tok_s, 4)
        binding = min(headroom, key=lambda n: headroom[n]) if headroom else None
        wd, kv = adv.weight_dtypes[dep.weight_dtype], adv.kv_dtypes[dep.kv_dtype]
        quality = f"weights {wd.id}: {wd.quality} ({wd.quality_note}); KV cache {kv.id}: {kv.quality}"
        return Recommendation(
            rank=rank, deployment=dep, predicted=p, memory_per_gpu_gb=pred.memory_per_gpu_gb, cost=pred.cost,
            binding_constraint=binding, headroom=headroom, quality=quality, confidence=pred.confidence,
            launch=pred.launch or Launch(error="no launch: the deployment does not fit"),
            why=self._why(ap, dep, p, pred.cost, binding, headroom, rank, req))

    def _launch(self, req: RecommendationRequest, dep: Deployment, no_checkpoint: dict[Any, str]) -> Launch:
        """The deployment's launch as its prediction renders it, checked before it is predicted (and
        simulated): one that cannot be launched as asked is passed over; one that can hands it on to the
        prediction. ``no_checkpoint``: the request's engine version, weight dtype and KV dtype combinations
        found to have no checkpoint plan (those fail on any GPU and layout: not rendered again)."""
        adv = self.advisor
        settings, _ = adv.settings_for(dep, adv.gpus[dep.gpu], req.workload)
        key = (dep.engine, settings.engine_version, dep.weight_dtype, dep.kv_dtype)
        if key in no_checkpoint:
            return Launch(error=no_checkpoint[key])
        # the name the prediction's launch serves the model by (a request names a model or gives a spec)
        name = req.model or (req.model_spec.name if req.model_spec else "")
        try:
            return adv.render_launch(name, dep, settings)
        except CheckpointError as exc:
            no_checkpoint[key] = str(exc)
            return Launch(error=str(exc))
        except LaunchError as exc:
            return Launch(error=str(exc))

    @staticmethod
    def _why(ap: Applied, dep: Deployment, p: Predicted, cost: Cost, binding: str | None, headroom: dict[str, float],
             rank: int, req: RecommendationRequest) -> str:
        layout = (f"{dep.replicas} x " if dep.replicas > 1 else "") + (
            f"TP{dep.tp} " if dep.tp > 1 else "") + f"{dep.gpu} {dep.weight_dtype} on {dep.engine}"
        money = (f"${cost.usd_per_hour:.2f}/h, ${cost.usd_per_million_output_tokens:.3f} per million output tokens"
                 if cost.usd_per_hour and cost.usd_per_million_output_tokens else "no public price")
        goal = {"min_cost": "cheapest", "min_cost_per_token": "cheapest per output token",
                "max_throughput": "highest-throughput", "min_latency": "fastest",
                "balanced": "best cost-latency balance"}[ap.objective]
        lead = f"{'The ' + goal if rank == 1 else 'Rank ' + str(rank) + ' by ' + ap.objective}: {layout} ({money})"
        if binding:
            return (f"{lead}; {p.output_tok_s:.0f} output tok/s; tightest bound {binding} with "
                    f"{headroom[binding] * 100:.0f}% headroom.")
        return f"{lead}; {p.output_tok_s:.0f} output tok/s; no latency bound applies."

    def _pareto(self, s: Scored, reps: NDArray[np.int64], top: NDArray[np.int64]) -> list[ParetoPoint]:
        """The front of cost, latency and throughput over ``reps`` (each layout's best feasible candidate)."""
        if not len(reps):
            return []
        axes = np.stack([np.nan_to_num(s.usd_h[reps], nan=np.inf), s.ttft_ms[reps], s.tpot_ms[reps],
                         -s.out_tok_s[reps]], axis=1)
        front = reps[search.pareto_front(axes)]
        rank_of = {int(i): r + 1 for r, i in enumerate(top)}
        pts = []
        for i in front[np.argsort(np.nan_to_num(s.usd_h[front], nan=np.inf), kind="stable")]:
            e, _, g, w, k, tp, pp = s.layouts[int(s.layout[i])]
            pts.append(ParetoPoint(
                usd_per_hour=None if math.isnan(s.usd_h[i]) else round(float(s.usd_h[i]), 4),
                ttft_ms=round(float(s.ttft_ms[i]), 2), tpot_ms=round(float(s.tpot_ms[i]), 3),
                output_tok_s=round(float(s.out_tok_s[i]), 1),
                deployment=f"{int(s.replicas[i])} x TP{tp} PP{pp} {g} {w}/{k} {e}",
                rank=rank_of.get(int(i))))
        return pts

    # --- when nothing fits ---------------------------------------------------------------------------

    def _explain(self, req: RecommendationRequest, ap: Applied, s: Scored,
                 viol: dict[str, NDArray[np.bool_]], memo: SearchMemo | None = None) -> Explanation:
        counts = {k: int(v.sum()) + (s.pruned if k == "memory" else 0) for k, v in viol.items()}
        main = max(counts, key=lambda k: counts[k]) if counts else "none"
        relax: list[Relaxation] = []
        closest: list[Closest] = []
        sims: SimMemo = {}
        if s.scored:
            closest = self._closest(req, s, ap, viol, sims)
            relax += self._relax_bounds(req, s, ap, viol, sims)
            relax += self._relax_load(req, ap, [c.deployment for c in closest], sims)
        relax += self._relax_constraints(req, ap, memo, sims)
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

    def _predict(self, req: RecommendationRequest, ap: Applied, dep: Deployment,
                 sims: SimMemo) -> tuple[Recommendation, list[str]]:
        """``dep`` under ``req``'s workload as POST /v1/predictions predicts it, and the bounds of ``ap`` (SLA and
        budget) its prediction breaks."""
        rec = self._recommendation(req, ap, dep, 1, self._launch(req, dep, {}), None, sims)
        over = verify.tail_violations(rec, ap.sla, ap.percentile)
        budget = ap.constraints.max_usd_per_hour
        if budget is not None and not (rec.cost.usd_per_hour is not None and rec.cost.usd_per_hour <= budget):
            over.append(f"USD {rec.cost.usd_per_hour} per hour > {budget:g}")
        return rec, over

    def _first_predicted(self, req: RecommendationRequest, ap: Applied, s: Scored, order: NDArray[np.int64],
                         sims: SimMemo) -> Recommendation | None:
        """The first of candidates ``order`` (one per layout, at most ``RELAX_PREDICTED``) whose prediction meets
        every bound of ``ap``."""
        for j in search.first_per_group(order, s.layout)[:RELAX_PREDICTED]:
            dep = self.deployment(s, int(j))
            for d in [dep, *self.more_replicas(dep, ap, req.workload)[:1]]:
                rec, over = self._predict(req, ap, d, sims)
                if not over:
                    return rec
        return None

    def _closest(self, req: RecommendationRequest, s: Scored, ap: Applied, viol: dict[str, NDArray[np.bool_]],
                 sims: SimMemo) -> list[Closest]:
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
        order = search.first_per_group(np.argsort(worst, kind="stable").astype(np.int64), s.layout)
        out = []
        for i in order[:CLOSEST_SHOWN]:
            if not np.isfinite(worst[i]):
                break
            rec, _ = self._predict(req, ap, self.deployment(s, int(i)), sims)
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
            out.append(Closest(deployment=rec.deployment, violations=vs,
                               predicted={"ttft_ms": values["ttft_ms"], "tpot_ms": values["tpot_ms"],
                                          "output_tok_s": p.output_tok_s, "usd_per_hour": usd}))
        return out

    def _relax_bounds(self, req: RecommendationRequest, s: Scored, ap: Applied, viol: dict[str, NDArray[np.bool_]],
                      sims: SimMemo) -> list[Relaxation]:
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
            for j in search.first_per_group(order.astype(np.int64), s.layout)[:RELAX_PREDICTED]:
                rec, over = self._predict(req, ap_other, self.deployment(s, int(j)), sims)
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

    def _relax_load(self, req: RecommendationRequest, ap: Applied, near: list[Deployment],
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
                if self._predict(at(values[mid]), ap, dep, sims)[1]:
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

    def _relax_constraints(self, req: RecommendationRequest, ap: Applied, memo: SearchMemo | None,
                           sims: SimMemo) -> list[Relaxation]:
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
            s = self.search(req, ap2, memo=memo)
            ok = self.feasible(s, ap2)
            if not len(ok):
                out.append(Relaxation(kind=kind, value=None, detail=f"{what}: still nothing meets the bounds"))
                continue
            rec = self._first_predicted(req, ap2, s, self.order(s, ok, "min_cost", req.workload.mode == "offline"),
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
