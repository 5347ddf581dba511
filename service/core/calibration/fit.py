"""Calibration: fit the cost model's efficiencies on stored measurements, by segment, with fall-backs.

Segments form a hierarchy, each level shrunk toward its parent:

    global -> engine -> engine/architecture -> engine/gpu -> engine/gpu/weight-dtype

The global and engine levels are the parents every class segment is shrunk toward; they are fitted without the
attention-DP / expert-parallel rows (``split_layout``), whose overheads (the all-to-all, the DP ranks' shared
expert steps) no other layout has. Those rows fit their class's overheads and their GPU's efficiencies.

A level is fitted in one robust least-squares problem (scipy.optimize.least_squares, soft-L1 loss on
log-ratios of predicted to measured throughput, TTFT and TPOT) whose unknowns are the log-parameters of
every segment of that level, plus a prior term that pulls each segment toward its parent's values with
the weight of ``PRIOR_ROWS`` measurements. A segment with few rows therefore stays near its parent; one
with none is not stored and prediction falls back to the nearest ancestor. The Jacobian is block-sparse
(a row depends only on its segment), which keeps a level to a few dozen model evaluations.

Engine releases differ in speed: rows of releases older than the generation the service targets
(``current_from_version`` in costmodel.yaml) get one fitted speed factor per engine (the global level's
``generation`` entry), so the segment parameters describe the current release.

Pure numpy/scipy; deterministic (no random start, fixed iteration limits).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import least_squares
from scipy.sparse import coo_matrix

from gpu_catalog.schema import CostConstants
from service.core.calibration.measurements import MeasurementSet, split_layout
from service.core.calibration.predict import predict_metrics
from service.core.calibration.segments import (
    CLASS_LEVEL,
    HARDWARE_PARAMS,
    LEVELS,
    Calibration,
    apply_generation,
    class_key,
    segment_key,
)
from service.core.candidates import PARAM_NAMES, Params
from service.core.memory import static_terms
from service.core.serve import split_modes
from service.core.tables import Tables
from service.core.types import F

# A class segment owns its overheads only when latency measurements of this many architectures support it.
MIN_ARCHITECTURES = 2
# A benchmark harness's own TTFT (HTTP client, tokenising, its queue) per source: fitted beside the engine's,
# starting from and shrunk toward HARNESS_PRIOR_S, within a factor of about e (one log unit) at one sigma. A
# harness costs milliseconds whatever model it measures; a wider spread lets it take up the per-request cost of
# the engine on the models its source measured, which then lands on every other model of that source.
HARNESS_PRIOR_S = 0.001
HARNESS_SIGMA_LOG = 1.0
HARNESS_BOUNDS_S = (1e-5, 2.0)
PRIOR_ROWS = 6.0            # a segment's parent counts as this many measurements
PRIOR_SIGMA_LOG = 0.5       # spread of a segment's log-parameter around its parent's
LOSS_SCALE_LOG = 0.15       # soft-L1 knee: residuals beyond ~15% count linearly (robust to outliers)
MAX_NFEV_PER_LEVEL = 60
# the start sits this far (log units) below a ceiling fitted for the run, so it is strictly inside the bounds
# least_squares is given (its starting point must not lie on one)
X0_MARGIN_LOG = 1e-6
# seconds: a TTFT room of 0 or less (a row at its floor) still has a finite log
LOG_GUARD_S = 1e-12
# levels fitted on the rows of the layouts every model class shares (not attention DP / expert parallelism)
SHARED_LEVELS = ("global", "engine")


def _bounds(constants: CostConstants) -> tuple[F, F, F]:
    ip = constants.initial_params
    x0 = np.log([ip[n].initial for n in PARAM_NAMES])
    lo = np.log([ip[n].min for n in PARAM_NAMES])
    hi = np.log([ip[n].max for n in PARAM_NAMES])
    return x0, lo, hi


def _residuals(pred: F, ms: MeasurementSet) -> F:
    r = np.log(np.maximum(pred, 1e-12) / ms.y)
    return np.where(np.isfinite(r), r, 0.0).ravel()


@dataclass
class LevelFit:
    """What one level's least-squares problem fits beside its segments' parameters."""

    free: NDArray[np.bool_] | None = None      # the parameters the level fits (None: all)
    base: F | None = None                      # (n_rows, n_p) log-parameters of the rows for the others
    harness_s: F | None = None                 # (n_rows,) fixed harness TTFT added to the prediction
    fit_generation: bool = False
    fit_harness: bool = False                  # fit one harness TTFT per source (then harness_s is ignored)
    ceiling: F | None = None                   # (n_seg, n_p) upper log-bounds of the segments' parameters


def _fit_level(tables: Tables, ms: MeasurementSet, seg_of_row: NDArray[np.int64], prior: F,
               generation: F, lo: F, hi: F, fit_generation: bool, how: LevelFit | None = None) -> tuple[F, F]:
    """Fit one level: ``prior`` (n_seg, 7) log-params; returns (fitted (n_seg, 7), generation log-factors).
    With ``how.fit_harness`` the returned generation vector is followed by one log harness TTFT per source of
    ``sorted(set(ms.sources))``."""
    how = how or LevelFit(fit_generation=fit_generation)
    n_seg, n_p = prior.shape
    free = np.ones(n_p, dtype=bool) if how.free is None else how.free
    n_f = int(free.sum())
    n_rows = len(ms)
    engines = sorted({k[0] for k in ms.keys})
    eng_idx = np.asarray([engines.index(k[0]) for k in ms.keys], dtype=np.int64)
    n_gen = len(engines) if fit_generation else 0
    srcs = sorted(set(ms.sources)) if how.fit_harness else []
    src_idx = np.asarray([srcs.index(x) for x in ms.sources], dtype=np.int64) if srcs else np.zeros(0, np.int64)
    n_h = len(srcs)
    base = np.zeros((n_rows, n_p)) if how.base is None else how.base
    fixed_h = np.zeros(n_rows) if how.harness_s is None else how.harness_s
    h_prior = math.log(HARNESS_PRIOR_S)
    valid = np.isfinite(ms.y) & (ms.y > 0)
    static = static_terms(tables, ms.cand)
    split = split_modes(static)

    def unpack(x: F) -> tuple[F, F, F]:
        theta = prior.copy()
        theta[:, free] = x[: n_seg * n_f].reshape(n_seg, n_f)
        gen = x[n_seg * n_f: n_seg * n_f + n_gen] if fit_generation else generation
        return theta, gen, x[n_seg * n_f + n_gen:]

    def fun(x: F) -> F:
        theta, gen, h = unpack(x)
        logm = base.copy()
        logm[:, free] = theta[seg_of_row][:, free]
        mat = np.exp(logm)
        factor = np.where(ms.current, 1.0, np.exp(gen[eng_idx])) if len(gen) else np.ones(n_rows)
        p = Params.from_matrix(apply_generation(mat, factor))
        pred = predict_metrics(tables, ms, p, static, split)
        pred[:, 1] += np.exp(h[src_idx]) if n_h else fixed_h
        data = np.where(valid, np.log(np.maximum(pred, 1e-12) / np.where(valid, ms.y, 1.0)), 0.0).ravel()
        data = np.where(np.isfinite(data), data, 5.0)
        reg = math.sqrt(PRIOR_ROWS) * (theta[:, free] - prior[:, free]).ravel() / PRIOR_SIGMA_LOG
        reg_h = math.sqrt(PRIOR_ROWS) * (h - h_prior) / HARNESS_SIGMA_LOG
        return np.concatenate([data, reg, reg_h])

    n_x = n_seg * n_f + n_gen + n_h
    # residual rows 3r..3r+2 depend on their segment's parameters (and the engine's generation factor, the
    # source's harness); prior row i depends on parameter i
    r3 = np.repeat(np.arange(n_rows * 3), n_f)
    c3 = (np.repeat(seg_of_row, 3)[:, None] * n_f + np.arange(n_f)[None, :]).ravel()
    n_reg = n_seg * n_f
    rows_i, cols_i = [r3, n_rows * 3 + np.arange(n_reg)], [c3, np.arange(n_reg)]
    if n_gen:
        rows_i.append(np.arange(n_rows * 3))
        cols_i.append(n_reg + np.repeat(eng_idx, 3))
    if n_h:
        rows_i += [3 * np.arange(n_rows) + 1, n_rows * 3 + n_reg + np.arange(n_h)]
        cols_i += [n_reg + n_gen + src_idx, n_reg + n_gen + np.arange(n_h)]
    rr, cc = np.concatenate(rows_i), np.concatenate(cols_i)
    sparsity = coo_matrix((np.ones(len(rr), dtype=np.int8), (rr, cc)), shape=(n_rows * 3 + n_reg + n_h, n_x))
    h_lo = math.log(HARNESS_BOUNDS_S[0])
    h_hi = np.log(harness_ceilings(tables, ms, srcs)) if n_h else np.zeros(0)
    seg_hi = np.tile(hi[free], n_seg) if how.ceiling is None else np.minimum(how.ceiling[:, free], hi[free]).ravel()
    x0 = np.concatenate([np.minimum(np.clip(prior[:, free], lo[free], hi[free]).ravel(), seg_hi - X0_MARGIN_LOG),
                         np.zeros(n_gen), np.minimum(h_prior, h_hi - X0_MARGIN_LOG)])
    lb = np.concatenate([np.tile(lo[free], n_seg), np.full(n_gen, math.log(0.05)), np.full(n_h, h_lo)])
    ub = np.concatenate([seg_hi, np.full(n_gen, math.log(2.0)), h_hi])
    sol = least_squares(fun, x0, bounds=(lb, ub), jac_sparsity=sparsity.tocsr(), loss="soft_l1",
                        f_scale=LOSS_SCALE_LOG, max_nfev=MAX_NFEV_PER_LEVEL, x_scale=1.0, method="trf")
    theta, gen, h = unpack(sol.x)
    return theta, np.concatenate([gen, h]) if n_h else gen


def front_end_ceilings(room_s: F, rows_of: Sequence[NDArray[np.int64]], lo: F, hi: F) -> F:
    """(n_seg, n_p) upper log-bounds of segments' parameters: a segment's per-request front end
    (``ttft_fixed_s``) is in every TTFT its rows measured, so it is at most the smallest of them less that
    prompt's datasheet prefill floor (``room_s``, per row; inf without a TTFT); the others keep ``hi``. Kept at
    least twice the lower bound."""
    k = PARAM_NAMES.index("ttft_fixed_s")
    out = np.tile(hi, (len(rows_of), 1))
    for j, rows in enumerate(rows_of):
        room = float(np.min(room_s[rows], initial=np.inf))
        if np.isfinite(room):
            out[j, k] = min(hi[k], max(math.log(max(room, LOG_GUARD_S)), lo[k] + math.log(2.0)))
    return out


def ttft_room_s(tables: Tables, ms: MeasurementSet) -> F:
    """Each row's measured TTFT less its prompt's datasheet prefill floor (s; inf where no TTFT)."""
    from service.core.calibration.heldout import datasheet_floor  # (heldout imports this module)

    has = np.isfinite(ms.y[:, 1])
    room = np.full(len(ms), np.inf)
    if has.any():
        idx = np.flatnonzero(has)
        room[idx] = ms.y[idx, 1] - datasheet_floor(tables, ms.take(idx))[:, 0]
    return room


def harness_ceilings(tables: Tables, ms: MeasurementSet, sources: Sequence[str]) -> F:
    """The most harness TTFT each source's measurements allow (s): a harness adds its time to every TTFT its
    source measured, so it is at most the smallest of them less that prompt's datasheet prefill floor (its
    FLOPs at peak FLOPS); at least twice the lower bound, and at most ``HARNESS_BOUNDS_S``'s upper one."""
    room = ttft_room_s(tables, ms)
    src = np.asarray(ms.sources)
    out = np.asarray([float(np.min(room[src == s], initial=np.inf)) for s in sources])
    return np.clip(out, 2.0 * HARNESS_BOUNDS_S[0], HARNESS_BOUNDS_S[1])


def _latency_support(ms: MeasurementSet, rows: NDArray[np.int64]) -> dict[str, int]:
    """How many latency measurements, architectures and sources rows ``rows`` hold."""
    lat = rows[np.isfinite(ms.y[rows, 1]) | np.isfinite(ms.y[rows, 2])]
    return {"latency_n": len(lat), "architectures": len({int(ms.cand.model[i]) for i in lat}),
            "sources": len({ms.sources[i] for i in lat})}


def _parent_segment(level: str, key: tuple[str, str, str, str]) -> str:
    return segment_key("engine" if level == CLASS_LEVEL else LEVELS[LEVELS.index(level) - 1], key)


def _store(segments: dict[str, dict[str, Any]], seg: str, level: str, theta: F, n: int, support: dict[str, int],
           owns: Sequence[str]) -> None:
    segments[seg] = {"level": level, "n": n, **support, "owns": list(owns),
                     "params": {name: float(v) for name, v in zip(PARAM_NAMES, np.exp(theta), strict=True)}}


def fit(tables: Tables, ms: MeasurementSet, constants: CostConstants) -> Calibration:
    """Fit every level top-down: global and engine (every parameter, and each source's harness TTFT at the
    global level), then the engine x model-class software overheads where latency measurements of several
    architectures support them, then the GPU levels' hardware efficiencies. Deterministic for the same rows in
    the same order."""
    x0, lo, hi = _bounds(constants)
    engines = sorted({k[0] for k in ms.keys})
    cal = Calibration(segments={}, generation={}, n_measurements=len(ms))
    generation = np.zeros(len(engines))
    hw = np.asarray([n in HARDWARE_PARAMS for n in PARAM_NAMES])
    harness = np.zeros(len(ms))
    room = ttft_room_s(tables, ms)
    shared = ~split_layout(ms)
    # an engine measured only in those layouts fits its global and engine levels on them (it has no others)
    eng = np.asarray([k[0] for k in ms.keys])
    for e in set(eng[~shared].tolist()) - set(eng[shared].tolist()):
        shared |= eng == e
    for level in ("global", "engine", CLASS_LEVEL, *LEVELS[2:]):
        if level == CLASS_LEVEL:
            seg_of = [class_key(k[0], c) for k, c in zip(ms.keys, ms.classes, strict=True)]
        else:
            seg_of = [segment_key(level, k) for k in ms.keys]
        use = shared if level in SHARED_LEVELS else np.ones(len(ms), dtype=bool)
        seg_keys = sorted({x for x, u in zip(seg_of, use.tolist(), strict=True) if u})
        rows_of = {sk: np.asarray([i for i, x in enumerate(seg_of) if x == sk and use[i]], dtype=np.int64)
                   for sk in seg_keys}
        support = {sk: _latency_support(ms, rows_of[sk]) for sk in seg_keys}
        if level == CLASS_LEVEL:     # a class segment owns its overheads only with several architectures
            seg_keys = [sk for sk in seg_keys if support[sk]["architectures"] >= MIN_ARCHITECTURES]
        if not seg_keys:
            continue
        first = {sk: ms.keys[int(rows_of[sk][0])] for sk in seg_keys}
        if level == "global":
            prior = x0[None, :]
        else:
            prior = np.stack([cal.vector(_parent_segment(level, first[sk])) for sk in seg_keys])
        free = None if level in ("global", "engine") else (~hw if level == CLASS_LEVEL else hw)
        sel = np.concatenate([rows_of[sk] for sk in seg_keys])
        sub = ms.take(sel)
        pos = {sk: i for i, sk in enumerate(seg_keys)}
        seg_of_row = np.asarray([pos[seg_of[i]] for i in sel], dtype=np.int64)
        base = None if free is None else cal.log_matrix(sub.keys, sub.classes)
        how = LevelFit(free=free, base=base, harness_s=harness[sel], fit_generation=level == "global",
                       ceiling=front_end_ceilings(room, [rows_of[sk] for sk in seg_keys], lo, hi),
                       fit_harness=level == "global")
        theta, extra = _fit_level(tables, sub, seg_of_row, prior, generation, lo, hi, level == "global", how)
        if level == "global":
            generation = extra[: len(engines)]
            srcs = sorted(set(sub.sources))
            cal.harness = {src: float(np.exp(v)) for src, v in zip(srcs, extra[len(engines):], strict=True)}
            cal.generation = {e: float(np.exp(g)) for e, g in zip(engines, generation, strict=True)}
            harness = cal.harness_s(ms.sources)
        owns = PARAM_NAMES if free is None else [n for n, f in zip(PARAM_NAMES, free, strict=True) if f]
        for i, sk in enumerate(seg_keys):
            _store(cal.segments, sk, level, theta[i], len(rows_of[sk]), support[sk], owns)
    if "global" not in cal.segments:
        _store(cal.segments, "global", "global", x0, 0, {"latency_n": 0, "architectures": 0, "sources": 0},
               PARAM_NAMES)
    return cal

