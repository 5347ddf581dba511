"""Speculative decoding in the search, when constraints.levers allows it: the speculation the catalog supports
for the model (an EAGLE-3 head it names, or the checkpoint's own MTP modules) at a few draft lengths, tried on
the layouts where it can change the answer, each as a unit of its own beside the plain ones.

Speculation lowers TPOT while the step is memory-bound and raises it once the batch fills the GPU's compute (the
verify step grows with batch x (k + 1)); its draft takes memory. So it is not assumed to help: each variant is
searched like the plain units (replica bisection over the serving solve), and the answer ranks it against the
plain candidates of the same layout, keeping whichever its objective prefers (the plain one on a tie).

Not the whole space: only ``LEVER_LAYOUTS`` layouts, the analytic ranking's best ``top_k + MAX_EXTRA_CANDIDATES``
(speculation may lower their replicas or latency) and, of the rest, the cheapest per replica whose TTFT floor
meets the bound (speculation does not lower TTFT, so it cannot rescue one that fails there). n-gram lookup and
draft models have no sourced acceptance rate in the catalog (levers.yaml speculative_defaults), so the search
never assumes one for them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from gpu_catalog.schema import ModelSpec
from service.core.costmodel import Params, ServeInputs, static_terms, step_model
from service.core.memory import capacity
from service.prediction.levers import (
    default_acceptance_at,
    draft_kv_tok_bytes,
    draft_sizes,
    mtp_model_types,
    mtp_modules,
    speculative_seq_bytes,
)
from service.recommendation import verify
from service.recommendation.rank import best_per_layout, feasible
from service.recommendation.scenarios import Applied
from service.recommendation.search import Scored, Space, search_space, space_of
from service.recommendation.space import (
    MAX_BATCHED_TOKENS_GRID,
    MAX_NUM_SEQS_GRID,
    Units,
    candidates,
    floors,
    prefix_working_set,
)
from service.schemas.predictions import Speculative
from service.schemas.recommendations import RecommendationRequest
from service.units import MS_PER_S

if TYPE_CHECKING:
    from service.prediction.advisor import Advisor

F = NDArray[np.float64]

# Draft lengths k tried: each at most the largest k the model's acceptance was measured at (measured rates fall
# with the draft position, so a rate held flat beyond it is optimistic). A search grid.
SPEC_TOKENS_GRID = (1, 2, 3, 5)
# Layouts the speculative variants are searched on, at most: a bound on the work of one request.
LEVER_LAYOUTS = 16


@dataclass(frozen=True)
class SpecOption:
    """One speculation the search tries: the deployment's field, and the figures its terms use."""

    speculative: Speculative
    acceptance_rate: float


def spec_options(adv: Advisor, model: ModelSpec) -> list[SpecOption]:
    """The speculation the catalog supports for ``model``: EAGLE-3 where levers.yaml names a published head
    measured on it, MTP where its architecture ships MTP modules; each at the draft lengths of
    ``SPEC_TOKENS_GRID`` up to the largest k its acceptance was measured at, with the default acceptance at
    that k (``default_acceptance_at``: measured, interpolated in k, or held flat below the smallest)."""
    out: list[SpecOption] = []
    for method in ("eagle3", "mtp"):
        m = adv.levers.default_acceptance(method, model.id)
        if m is None:
            continue
        if method == "eagle3" and not (m.model == model.id and m.draft):
            continue
        if method == "mtp" and model.model_type not in mtp_model_types(adv):
            continue
        draft = m.draft if method == "eagle3" else None
        for k in SPEC_TOKENS_GRID:
            a = default_acceptance_at(adv, model, method, k)
            if a is not None and a.basis != "flat_above":
                out.append(SpecOption(Speculative(method=method, num_speculative_tokens=k, draft_model=draft),
                                      a.acceptance_rate))
    return out


def lever_layouts(adv: Advisor, sp: Space, s: Scored, best: NDArray[np.int64], ap: Applied, limit: int,
                  methods: set[str]) -> NDArray[np.int64]:
    """The layouts speculation is tried on: those of the ``limit`` best plain candidates, then the cheapest per
    replica of the others whose engine version has the methods and whose TTFT floor meets the bound."""
    un = sp.un
    layouts = un.table.layouts
    ok_engine: dict[tuple[str, str], bool] = {}

    def runs(li: int) -> bool:
        e, v = layouts[li][:2]
        if (e, v) not in ok_engine:
            eng = adv.levers.engine(e, v)
            ok_engine[(e, v)] = eng is not None and methods <= set(eng.speculative.methods or {})
        return ok_engine[(e, v)]

    chosen = [int(li) for li in dict.fromkeys(s.layout[best[:limit]].tolist()) if runs(int(li))]
    room = un.fits & (sp.options > 0)
    if ap.sla.ttft_ms is not None:
        room &= un.ttft_lb_s * MS_PER_S <= ap.sla.ttft_ms
    rest = np.unique(un.li[room])
    unit_usd_h = un.table.price[rest] * sp.per_layout_gpus[rest]
    for li in rest[np.argsort(np.nan_to_num(unit_usd_h, nan=np.inf), kind="stable")]:
        if len(chosen) >= LEVER_LAYOUTS:
            break
        if int(li) not in chosen and runs(int(li)):
            chosen.append(int(li))
    return np.asarray(sorted(chosen[:LEVER_LAYOUTS]), dtype=np.int64)


def spec_units(adv: Advisor, model: ModelSpec, req: RecommendationRequest, un: Units, layouts: NDArray[np.int64],
               opt: SpecOption) -> Units:
    """The units of ``layouts`` (all their settings) with speculation ``opt``: the step model's lever inputs,
    the draft's weights and KV in memory, the floors again; layout indices stay the table's."""
    tables, m_idx = adv.tables_for(model)
    wl = req.workload
    table = un.table
    lay, dset = table.lay, table.dset
    keep = np.isin(un.li, layouts)
    li_s, seqs_s, toks_s = un.li[keep], un.seqs[keep], un.toks[keep]
    n_l, m = len(layouts), len(li_s)
    # the layouts' terms at the smallest settings of the grid, as ``space.units`` computes the plain ones
    s_min = np.minimum.reduce([dset[layouts, 0], *(np.full(n_l, float(v)) for v in MAX_NUM_SEQS_GRID)])
    t_min = np.minimum.reduce([dset[layouts, 1], *(np.full(n_l, float(v)) for v in MAX_BATCHED_TOKENS_GRID)])
    c = candidates(lay, dset, m_idx, wl, layouts, s_min, t_min, np.ones(n_l), np.ones(n_l))
    s = static_terms(tables, c)
    sp = opt.speculative
    k = float(sp.num_speculative_tokens)
    draft = draft_sizes(tables, c, model, m_idx, None, sp.method, mtp_modules(adv, model))
    spec_tok = np.full(n_l, k)
    draft_kv = draft_kv_tok_bytes(tables, c, s, sp.method, None)
    seq_full, seq_mean = speculative_seq_bytes(s, spec_tok, draft_kv)
    weights = s.weights + draft.weights_bytes
    s = replace(s, weights=weights, seq_full=seq_full, seq_mean=seq_mean, spec_tokens=spec_tok,
                draft_kv_tok_bytes=draft_kv,
                spec_acceptance=np.full(n_l, opt.acceptance_rate), draft_pass_bytes=draft.pass_bytes,
                draft_expert_bytes=draft.expert_bytes,
                prefix_hit_rate=float(wl.prefix_cache_hit_rate),
                **(prefix_working_set(wl, n_l) if wl.prefix_cache_hit_rate else {}))
    row = np.searchsorted(layouts, li_s)
    params = Params.from_matrix(table.params[layouts])
    sm = step_model(s, params)
    cu = candidates(lay, dset, m_idx, wl, li_s, seqs_s, toks_s, np.ones(m), np.ones(m))
    cap = capacity(tables, cu, weights[row], s.overhead[row], s.runnable[row], seq_full[row], seq_mean[row])
    inputs = ServeInputs.of(s, params, sm).expand(row, cap_mean=cap.cap_mean, max_batched_tok=toks_s)
    ttft_lb, tpot_lb = floors(params, sm)
    if un.corr is not None:
        least = un.corr.floor_factors()[layouts]
        ttft_lb, tpot_lb = ttft_lb * least[:, 0], tpot_lb * least[:, 1]
    return Units(table=table, fits_min=un.fits_min, li=li_s, seqs=seqs_s, toks=toks_s, mode=un.mode, inputs=inputs,
                 ttft_lb_s=ttft_lb[row], tpot_lb_s=tpot_lb[row], fits=cap.fits, corr=un.corr)


def concat(parts: list[Scored], options: tuple[Speculative, ...]) -> Scored:
    """The candidates of ``parts`` as one search's (the first plain, each next one's ``spec`` set), in order."""
    first = parts[0]
    arrays = {f.name for f in fields(Scored) if isinstance(getattr(first, f.name), np.ndarray)}
    joined: dict[str, Any] = {n: np.concatenate([getattr(p, n) for p in parts])
                              for n in arrays - {"spec", "kv_offload_gb"}}
    out = replace(first, **joined)
    if any(p.kv_offload_gb is not None for p in parts):     # (the speculative variants have no host KV tier)
        out.kv_offload_gb = np.concatenate([np.zeros(len(p.layout)) if p.kv_offload_gb is None else p.kv_offload_gb
                                            for p in parts])
    out.spec = np.concatenate([np.full(len(p.layout), -1, dtype=np.int64) if p.spec is None else p.spec
                               for p in parts])
    out.spec_options = options
    for name in ("generated", "scored", "solved"):
        setattr(out, name, sum(getattr(p, name) for p in parts))
    out.feasible_total = sum(max(p.feasible_total, 0) for p in parts) if first.feasible_total >= 0 else -1
    return out


def with_speculation(adv: Advisor, model: ModelSpec, req: RecommendationRequest, ap: Applied, sp: Space | None,
                     s: Scored, fit: NDArray[np.int64],
                     best: NDArray[np.int64]) -> tuple[Scored, NDArray[np.int64], NDArray[np.int64]]:
    """``s`` and the speculative variants of the layouts where they can change the answer, as one search (each
    variant's candidates searched as ``search`` searches the plain ones), with its candidates that meet every
    bound (``fit``) and each layout's best of them, best first (``best``: ``rank.best_per_layout``). ``s``,
    ``fit`` and ``best`` themselves when no variant applies."""
    opts = spec_options(adv, model)
    if sp is None or not opts:
        return s, fit, best
    parts, fits = [s], [fit]
    offset = len(s.layout)
    by_methods: dict[str, NDArray[np.int64]] = {}
    for j, opt in enumerate(opts):
        method = opt.speculative.method
        if method not in by_methods:
            by_methods[method] = lever_layouts(adv, sp, s, best, ap, req.top_k + verify.MAX_EXTRA_CANDIDATES,
                                               {method})
        layouts = by_methods[method]
        if not len(layouts):
            continue
        sp_v = space_of(spec_units(adv, model, req, sp.un, layouts, opt), req, ap)
        part = search_space(sp_v, ap)
        part.generated = int(sp_v.options.sum())   # its own units x replica options, not the whole table's
        part.spec = np.full(len(part.layout), j, dtype=np.int64)
        parts.append(part)
        fits.append(feasible(part, ap) + offset)
        offset += len(part.layout)
    if len(parts) == 1:
        return s, fit, best
    out = concat(parts, tuple(o.speculative for o in opts))
    # each layout's best of all: of the plain candidates' best and every variant's feasible ones
    mine = np.concatenate([best, *fits[1:]])
    return out, np.concatenate(fits), best_per_layout(out, mine, ap.objective, req.workload.mode == "offline")
