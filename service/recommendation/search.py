"""The deployment search: every allowed layout x engine setting x replica count of ``space`` decided exactly by the
cost model over arrays (feasibility a mask, ranking a sort), while only a few candidates per unit are solved.

A layout at one setting (a unit) has its terms computed once per request (``space.units``); its replica counts
are decided by a few probes each (the verdict is monotone in replicas), and a candidate probed twice is solved
once. One function per question a recommendation asks of the candidates:

- ``search``: every candidate's verdict, and what the answer ranks (each unit at its fewest replicas that meet
  the SLA and at its most within the budget);
- ``ends``: each unit at its fewest and most replicas, every solve done (the account of an infeasible search);
- ``most``: each unit at its most replicas within the budget (some candidate meets every constraint exactly
  when one of these does: more replicas only help the other bounds);
- ``every``: every candidate scored (tests check ``search`` by it).

The searches of one request share a ``SearchMemo``: what depends on neither the load, the budget nor the
question (``Units``), and the serving solves already done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from service.engines.checkpoints import offered_weight_dtypes
from service.errors import InvalidRequest
from service.prediction.analytic import QUANTILES, analytic_ttft_quantile_s, load_of
from service.prediction.validate import check_context, model_for
from service.recommendation.scenarios import QUALITY_RANK, Applied
from service.recommendation.space import (
    N_SETTINGS,
    REPLICA_GRID,
    REPLICAS,
    LayoutCache,
    Layouts,
    SearchMemo,
    Solves,
    Units,
    check_list,
    units,
)
from service.schemas.predictions import Speculative
from service.schemas.recommendations import DEFAULT_MAX_GPUS, RecommendationRequest, Sla
from service.units import MS_PER_S, S_PER_HOUR, TOKENS_PER_MILLION

if TYPE_CHECKING:
    from service.prediction.advisor import Advisor

F = NDArray[np.float64]


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
    pruned: int = 0                         # (``ends``) items whose layout cannot hold the weights
    # per candidate: its speculative decoding, an index into ``spec_options`` (-1 or None: none)
    spec: NDArray[np.int64] | None = None
    spec_options: tuple[Speculative, ...] = ()
    # per candidate: the host KV tier it is searched with, GB per GPU (0 or None: none; the kv_offload lever)
    kv_offload_gb: F | None = None

    def speculative(self, i: int) -> Speculative | None:
        """Candidate ``i``'s speculative decoding (None: none)."""
        return None if self.spec is None or self.spec[i] < 0 else self.spec_options[int(self.spec[i])]


def solve_into(un: Units, solved: Solves, at: NDArray[np.int64], load: float, q: float | None) -> None:
    """Solve the serving steady state of candidates ``at`` (flat, as in ``Solves``) into ``solved`` (those
    already there are not solved again)."""
    at = at[~solved.done[at]]
    if not len(at):
        return
    j, u = np.divmod(at, solved.units)
    reps = np.maximum(REPLICAS[j], 1.0)
    # a replica's attention DP ranks each serve their own share of the load (one serving unit each)
    units = reps * un.table.lay[un.li[u], 5]
    inp = un.inputs

    def store(a: int, b: int, _batch: F, ttft: F, tpot: F, per_replica_s: F, _share: F,
              overloaded: NDArray[np.bool_]) -> None:
        """Candidates a..b-1's figures (as costmodel.serve gives them) into ``solved``, in the thread that
        solved them (each part's candidates are its own: no two threads write one element)."""
        part, where = u[a:b], at[a:b]
        if un.corr is not None:    # as POST /v1/predictions corrects the same deployment (analytic.analyse)
            fac = un.corr.factors(un.li[part], load / reps[a:b])
            ttft, tpot, per_replica_s = ttft * fac[:, 0], tpot * fac[:, 1], per_replica_s * fac[:, 2]
        if q is not None:
            ttft = analytic_ttft_quantile_s(ttft, inp.row("ttft_fixed_s")[part], inp.row("prefill_alone")[part],
                                            q)
        solved.ttft_s[where], solved.tpot_s[where] = ttft, tpot
        solved.out_tok_s[where] = per_replica_s * units[a:b] * inp.row("osl")[part]
        solved.overloaded[where] = overloaded
        solved.done[where] = True

    inp.solve_at(u, units, load, un.mode, store)

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

def empty(layouts: Layouts) -> Scored:
    """A search with no candidate (no layout allowed)."""
    z, b, i = np.zeros(0), np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64)
    return Scored(context_tok=0, layout=i, layouts=layouts, replicas=z, seqs=z, tokens=z, frac=z, n_gpus=z,
                  usd_h=z, fits=b, ttft_ms=z, tpot_ms=z, e2e_ms=z, ttft_floor_ms=z,
                  tpot_floor_ms=z, out_tok_s=z, usd_per_m=z, overloaded=b,
                  generated=0, scored=0, solved=0)

@dataclass
class Space:
    """One search's units at the request's load, SLA percentile and GPU limit, and what it has probed so far."""

    un: Units
    load: float
    q: float | None                         # the SLA's percentile as a quantile (None: the mean)
    osl_1: int                              # output tokens after the first
    context_tok: int
    rep_ok: NDArray[np.bool_]               # per layout x replica option: within max_gpus (and the clients)
    options: NDArray[np.int64]              # per unit: its replica options, a prefix of the grid
    per_layout_gpus: NDArray[np.int64]
    generated: int
    solved: Solves                          # the serving solves at this load and quantile (shared: ``Units.solves``)
    within_floor: NDArray[np.bool_]         # per unit: fits, and its floors meet every latency bound
    probed: NDArray[np.bool_]               # per candidate (flat, as in ``Solves``): scored by this search
    scored: int = 0                         # distinct candidates scored, and of those solved
    solved_n: int = 0


def space(adv: Advisor, cache: LayoutCache, req: RecommendationRequest, ap: Applied,
          memo: SearchMemo) -> Space | None:
    """The request's units (from ``memo`` when another search of the request built them) at its load and SLA;
    None when no layout is allowed."""
    model = model_for(adv, req.model, req.model_spec)
    tables, m_idx = adv.tables_for(model)
    wl = req.workload
    check_context(model, wl)
    cons = ap.constraints
    gpus = check_list(cons.gpus, adv.gpus, "gpus")
    wds = check_list(cons.weight_dtypes, adv.weight_dtypes, "weight_dtypes")
    kvs = check_list(cons.kv_dtypes, adv.kv_dtypes, "kv_dtypes") if cons.kv_dtypes else ["auto", "fp8"]
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
    offered = offered_weight_dtypes(adv.catalog.resolve_model(model.id))
    if offered is not None:     # a release that is not 16-bit: its published dtypes only
        wds = [w for w in wds if w in offered]
    kvs = [k for k in kvs if QUALITY_RANK[adv.kv_dtypes[k].quality] <= max_q]
    max_gpus = int(cons.max_gpus or DEFAULT_MAX_GPUS)
    key: tuple[Any, ...] = (model.id, m_idx, tuple(engines), tuple(versions.values()), tuple(gpus), tuple(wds),
                            tuple(kvs), max_gpus, bool(cons.multi_node), wl.input_tokens, wl.output_tokens,
                            wl.context_tokens, wl.mode)
    kv_offload = "kv_offload" in cons.allowed_levers and bool(wl.prefix_working_set_tokens)
    if wl.prefix_working_set_tokens:    # the free KV blocks depend on the load: a relaxed load gets its own units
        key = (*key, kv_offload, load_of(wl))
    if key not in memo:
        memo[key] = units(adv, cache, model, tables, m_idx, wl, versions, gpus, wds, kvs, max_gpus,
                          bool(cons.multi_node), kv_offload)
    un = memo[key]
    if un is None:
        return None
    return space_of(un, req, ap)


def space_of(un: Units, req: RecommendationRequest, ap: Applied) -> Space:
    """Units ``un`` at the request's load and SLA (their solves kept in ``un.solves``)."""
    wl = req.workload
    max_gpus = int(ap.constraints.max_gpus or DEFAULT_MAX_GPUS)
    load = load_of(wl)
    lay, m = un.table.lay, len(un.li)
    per_layout_gpus = lay[:, 3] * lay[:, 4] * lay[:, 5]
    rep_ok = REPLICAS[None, :] * per_layout_gpus[:, None] <= max_gpus
    if wl.mode == "concurrency":
        rep_ok &= REPLICAS[None, :] <= max(load, 1.0)
    q = QUANTILES.get(ap.percentile)
    solved = un.solves.get((load, q))
    if solved is None:
        solved = un.solves[(load, q)] = Solves.empty(m)
    osl_1 = wl.output_tokens - 1
    # Exact latency floors (one request alone: TTFT >= front end + its prefill, at any percentile; TPOT >=
    # one decode step of one sequence, since steps only grow with the batch). A candidate whose floor
    # already breaks a bound is infeasible at any load: its serving solve is skipped. Per unit (floors
    # do not depend on the replica count).
    within_floor = un.fits.copy()
    for limit_ms, floor_s in ((ap.sla.ttft_ms, un.ttft_lb_s), (ap.sla.tpot_ms, un.tpot_lb_s),
                              (ap.sla.e2e_ms, un.ttft_lb_s + osl_1 * un.tpot_lb_s)):
        if limit_ms is not None:
            within_floor &= floor_s * MS_PER_S <= limit_ms
    return Space(un=un, load=load, q=q, osl_1=osl_1, context_tok=wl.context_tokens, rep_ok=rep_ok,
                 options=rep_ok.sum(axis=1)[un.li], per_layout_gpus=per_layout_gpus,
                 generated=int(rep_ok.sum()) * N_SETTINGS, solved=solved, within_floor=within_floor,
                 probed=np.zeros(m * len(REPLICA_GRID), dtype=bool))


def solve(sp: Space, u: NDArray[np.int64], j: NDArray[np.int64], sel: NDArray[np.int64]) -> NDArray[np.int64]:
    """Units ``u`` at options ``j`` are scored, those at ``sel`` solved: counted (each distinct candidate once)
    and solved where not yet; their flat indices in ``sp.solved``."""
    cand = sp.solved.at(u, j)
    first_time = ~sp.probed[cand]
    sp.probed[cand] = True
    sp.scored += int(first_time.sum())
    sp.solved_n += int(first_time[sel].sum())
    at = cand[sel]
    if len(at):
        solve_into(sp.un, sp.solved, at, sp.load, sp.q)
    return at


def score(sp: Space, u: NDArray[np.int64], j: NDArray[np.int64], skip_by_floor: bool) -> Scored:
    """The units ``u`` at ``REPLICA_GRID[j]`` replicas each, through the cost model."""
    un = sp.un
    li_c, seqs_c, toks_c, reps = un.li[u], un.seqs[u], un.toks[u], REPLICAS[j]
    n = len(li_c)
    # candidates not solved keep their floors (and no throughput)
    ttft, tpot, fits = un.ttft_lb_s[u], un.tpot_lb_s[u], un.fits[u]
    ttft_floor, tpot_floor = ttft.copy(), tpot.copy()
    out_tok_s, overloaded = np.zeros(n), np.zeros(n, dtype=bool)
    sel = np.flatnonzero(sp.within_floor[u] if skip_by_floor else fits)
    at = solve(sp, u, j, sel)
    ttft[sel], tpot[sel] = sp.solved.ttft_s[at], sp.solved.tpot_s[at]
    out_tok_s[sel], overloaded[sel] = sp.solved.out_tok_s[at], sp.solved.overloaded[at]
    n_gpus = sp.per_layout_gpus[li_c] * reps
    usd_h = un.table.price[li_c] * n_gpus
    with np.errstate(divide="ignore", invalid="ignore"):
        usd_m = usd_h / (out_tok_s * S_PER_HOUR) * TOKENS_PER_MILLION
    return Scored(
        context_tok=sp.context_tok, layout=li_c, layouts=un.table.layouts, replicas=reps, seqs=seqs_c,
        tokens=toks_c, frac=un.table.dset[li_c, 2], n_gpus=n_gpus, usd_h=usd_h, fits=fits,
        ttft_ms=ttft * MS_PER_S, tpot_ms=tpot * MS_PER_S, e2e_ms=(ttft + sp.osl_1 * tpot) * MS_PER_S,
        ttft_floor_ms=ttft_floor * MS_PER_S, tpot_floor_ms=tpot_floor * MS_PER_S, out_tok_s=out_tok_s,
        usd_per_m=usd_m, overloaded=overloaded, generated=sp.generated, scored=n, solved=len(sel),
        kv_offload_gb=None if un.kv_offload_gb is None or not un.kv_offload_gb.any() else un.kv_offload_gb[li_c])


def every(adv: Advisor, cache: LayoutCache, req: RecommendationRequest, ap: Applied,
          memo: SearchMemo | None = None) -> Scored:
    """Every candidate scored, every solve done."""
    sp = space(adv, cache, req, ap, {} if memo is None else memo)
    if sp is None:
        return empty(Layouts())
    m = len(sp.un.li)
    u_all = np.repeat(np.arange(m), sp.options)
    j_all = np.broadcast_to(np.arange(len(REPLICA_GRID)), (m, len(REPLICA_GRID)))[sp.rep_ok[sp.un.li]]
    return score(sp, u_all, j_all, skip_by_floor=False)


def ends(adv: Advisor, cache: LayoutCache, req: RecommendationRequest, ap: Applied,
         memo: SearchMemo | None = None) -> Scored:
    """Each unit at its fewest and at its most replicas (its cheapest and its fastest), every solve done; the
    layouts that cannot hold the weights counted the same way (settings x replica ends) in ``pruned``."""
    sp = space(adv, cache, req, ap, {} if memo is None else memo)
    if sp is None:
        return empty(Layouts())
    m = len(sp.un.li)
    two = np.flatnonzero(sp.options > 1)
    u_all = np.concatenate([np.arange(m), two])
    j_all = np.concatenate([np.zeros(m, dtype=np.int64), sp.options[two] - 1])
    out = score(sp, u_all, j_all, skip_by_floor=False)
    gone = np.flatnonzero(~sp.un.fits_min)
    out.pruned = int((np.minimum(sp.rep_ok[gone].sum(axis=1), 2)).sum()) * N_SETTINGS
    return out


def most(adv: Advisor, cache: LayoutCache, req: RecommendationRequest, ap: Applied,
         memo: SearchMemo | None = None) -> Scored:
    """Each unit at its most replicas within the budget (the cost computed as ``score`` does)."""
    sp = space(adv, cache, req, ap, {} if memo is None else memo)
    if sp is None:
        return empty(Layouts())
    li_s, price = sp.un.li, sp.un.table.price
    n_within = sp.options
    budget = ap.constraints.max_usd_per_hour
    if budget is not None:
        usd_grid = price[li_s][:, None] * (sp.per_layout_gpus[li_s][:, None] * REPLICAS[None, :])
        n_within = ((usd_grid <= budget) & sp.rep_ok[li_s]).sum(axis=1)
    some = np.flatnonzero(n_within > 0)
    return score(sp, some, n_within[some] - 1, skip_by_floor=True)


@dataclass
class Bracket:
    """Per unit, where the replica options that meet the SLA start: ``lo <= first_ok <= hi``."""

    lo: NDArray[np.int64]
    hi: NDArray[np.int64]


def probe(sp: Space, br: Bracket, u: NDArray[np.int64], j: NDArray[np.int64], sla: Sla) -> None:
    """Units ``u`` at options ``j`` (a unit may be probed at several options at once): each one's verdict on
    every bound that more replicas can only help (memory, capacity, the SLA; not the budget), as ``violations``
    of ``score(sp, u, j, skip_by_floor=True)`` would give it without the rest of the scoring (a candidate
    outside its floors fails: memory, or a bound its floor already breaks), narrowing ``br``."""
    sel = np.flatnonzero(sp.within_floor[u])
    at = solve(sp, u, j, sel)
    ok = np.zeros(len(u), dtype=bool)
    ok[sel] = meets_sla(sp.solved.ttft_s[at], sp.solved.tpot_s[at], sp.solved.out_tok_s[at],
                        sp.solved.overloaded[at], sp.osl_1, sla)
    np.minimum.at(br.hi, u[ok], j[ok])
    np.maximum.at(br.lo, u[~ok], j[~ok] + 1)
    np.minimum(br.lo, br.hi, out=br.lo)     # (verdicts are monotone: this only guards the bracket)


def bisect(sp: Space, br: Bracket, units_: NDArray[np.int64], sla: Sla) -> None:
    """Close the brackets of ``units_`` by halving (all units at once, a few rounds)."""
    while len(units_ := units_[br.lo[units_] < br.hi[units_]]):
        probe(sp, br, units_, (br.lo[units_] + br.hi[units_]) // 2, sla)


def first_ok(sp: Space, sla: Sla) -> NDArray[np.int64]:
    """Per unit, its first replica option that meets ``sla`` (its options count when none does).

    Replicas split the load, so every latency only falls and the throughput only rises as they are added (the
    cost model's monotonicity in load, a tested property): the replica counts of a unit that meet the SLA are a
    suffix of its options, those within the budget a prefix. Where the suffix starts is bracketed per unit: a
    probe that meets the bounds lowers hi to it, one that fails raises lo above it, and a binary search closes
    what is left. Every candidate's verdict is known exactly while only a few per unit are scored.

    Each layout's first unit (its engine's default settings) leads: it probes its fewest replicas (the common
    answer when the SLA is loose) and its most (the answer ranks them anyway; a unit that fails there fails
    everywhere), then bisects. Its other settings rarely move the answer: they start from the leader's, probing
    just below it, at it and at their most, and bisect what is left (the verdicts are the same as bisecting
    from scratch, with about half the probes)."""
    li_s, options = sp.un.li, sp.options
    m = len(li_s)
    top = options - 1                          # each unit's most replicas
    br = Bracket(lo=np.zeros(m, dtype=np.int64), hi=options.astype(np.int64).copy())
    first_layouts, first_units = np.unique(li_s, return_index=True)
    lead = first_units[np.searchsorted(first_layouts, li_s)]
    is_lead = lead == np.arange(m)
    leaders = np.flatnonzero(is_lead & (options > 0))
    more = leaders[top[leaders] > 0]
    probe(sp, br, np.concatenate([leaders, more]),
          np.concatenate([np.zeros(len(leaders), dtype=np.int64), top[more]]), sla)
    bisect(sp, br, leaders, sla)
    others = np.flatnonzero(~is_lead & (options > 0))
    guess, top_o = br.lo[lead[others]], top[others]
    below = (guess >= 1) & (guess - 1 < top_o)  # each probe once: below the guess, at it, the most
    at_guess = guess < top_o
    probe(sp, br, np.concatenate([others[below], others[at_guess], others]),
          np.concatenate([guess[below] - 1, guess[at_guess], top_o]), sla)
    bisect(sp, br, others, sla)
    return br.lo


def search(adv: Advisor, cache: LayoutCache, req: RecommendationRequest, ap: Applied,
           memo: SearchMemo | None = None) -> Scored:
    """Every candidate's verdict (``feasible_total``), and scored what the answer ranks: each unit at its fewest
    replicas that meet the SLA (cheapest; probed by the bisection, so their solves are reused), and at its
    most within the budget and max_gpus (fastest, highest throughput)."""
    return search_with_space(adv, cache, req, ap, memo)[0]


def search_with_space(adv: Advisor, cache: LayoutCache, req: RecommendationRequest, ap: Applied,
                      memo: SearchMemo | None = None) -> tuple[Scored, Space | None]:
    """``search``, and the space it searched (None: no layout is allowed)."""
    sp = space(adv, cache, req, ap, {} if memo is None else memo)
    if sp is None:
        return empty(Layouts()), None
    return search_space(sp, ap), sp


def search_space(sp: Space, ap: Applied) -> Scored:
    """``search`` of the units of ``sp``."""
    li_s, options = sp.un.li, sp.options
    first = first_ok(sp, ap.sla)
    unit_price = sp.un.table.price[li_s] * sp.per_layout_gpus[li_s]
    budget = ap.constraints.max_usd_per_hour
    within = (options if budget is None else
              np.minimum(options, np.searchsorted(REPLICAS, budget / np.where(unit_price > 0, unit_price, np.nan),
                                                  side="right")))
    within = np.where(np.isnan(unit_price) & (budget is not None), 0, within)
    n_feasible = int(np.maximum(within - first, 0).sum())
    has = np.flatnonzero(first < options)
    last = np.maximum(np.minimum(within, options) - 1, first)
    u_fin = np.concatenate([has, has[last[has] > first[has]]])
    j_fin = np.concatenate([first[has], last[has][last[has] > first[has]]])
    out = score(sp, u_fin, j_fin, skip_by_floor=True)
    out.feasible_total = n_feasible
    out.scored, out.solved = sp.scored, sp.solved_n
    return out
