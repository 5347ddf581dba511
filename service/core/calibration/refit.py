"""Refit of the segments that new measurements fall in, leaving every other segment as it was.

A full fit (``fit.fit``) solves each level's segments in one least-squares problem whose stopping point
moves with any change of its rows: adding one measurement of vLLM on an H100 shifts the fitted parameters of
TensorRT-LLM on an A100 by a percent or two, which is the optimiser's tolerance, not information. After users
add measurements, only the segments holding them are refitted:

- the levels ``REFIT_LEVELS`` (engine/arch and finer) of each new row's key: each such segment is solved alone,
  on all of its rows (old and new), with its parent's parameters as the prior and the starting point, exactly
  as the full fit treats it;
- the global and engine levels and the generation factors, each pooled over thousands of measurements, keep
  their values until the next full fit (start-up after the shipped measurements change).

The objective of a level is a sum over its segments (a row depends only on its segment's parameters, and the
prior ties a segment only to its parent), so solving one segment alone minimises the same objective. A segment
that gets no new rows keeps its parameters; so do finer segments below a refitted one that hold no new rows
(their prior moved with their parent's, by the weight of the new rows in it).

Pure numpy/scipy; deterministic for the same rows and base calibration.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import numpy as np

from gpu_catalog.schema import CostConstants
from service.core.calibration.fit import LevelFit, _bounds, _fit_level, _latency_support, _store
from service.core.calibration.measurements import MeasurementSet
from service.core.calibration.segments import HARDWARE_PARAMS, LEVELS, Calibration, segment_key
from service.core.candidates import PARAM_NAMES
from service.core.tables import Tables

REFIT_LEVELS = ("engine/arch", "engine/gpu", "engine/gpu/dtype")

Key = tuple[str, str, str, str]


def refit_segments(tables: Tables, ms: MeasurementSet, constants: CostConstants, base: Calibration,
                   new_keys: Iterable[Key]) -> tuple[Calibration, list[str]]:
    """``base`` with the ``REFIT_LEVELS`` segments of ``new_keys`` refitted on the rows of ``ms`` they hold.

    Returns the new calibration and the refitted segment keys (top-down)."""
    _, lo, hi = _bounds(constants)
    cal = Calibration(segments=copy.deepcopy(base.segments), generation=dict(base.generation), n_measurements=len(ms),
                      harness=dict(base.harness))
    hw = np.asarray([n in HARDWARE_PARAMS for n in PARAM_NAMES])
    keys = sorted(set(new_keys))
    refitted: list[str] = []
    for level in REFIT_LEVELS:
        for seg in sorted({segment_key(level, k) for k in keys}):
            key = next(k for k in keys if segment_key(level, k) == seg)
            rows = np.flatnonzero([segment_key(level, k) == seg for k in ms.keys])
            if not len(rows):
                continue
            prior = cal.vector(_ancestor(cal.segments, level, key))[None, :]
            sub = ms.take(rows)
            generation = np.log([base.generation.get(key[0], 1.0)])
            # the hardware efficiencies only: the software overheads stay the engine's and its classes'
            how = LevelFit(free=hw, base=cal.log_matrix(sub.keys, sub.classes), harness_s=cal.harness_s(sub.sources))
            theta, _ = _fit_level(tables, sub, np.zeros(len(sub), dtype=np.int64), prior, generation, lo, hi,
                                  fit_generation=False, how=how)
            _store(cal.segments, seg, level, theta[0], len(sub), _latency_support(ms, rows),
                   [n for n in PARAM_NAMES if n in HARDWARE_PARAMS])
            refitted.append(seg)
    return cal, refitted


def _ancestor(segments: dict[str, dict[str, Any]], level: str, key: Key) -> str:
    """The nearest fitted segment above ``level`` for ``key`` (the full fit always has its parent; a base
    calibration fitted without any row of this engine has only the global one)."""
    for lv in reversed(LEVELS[: LEVELS.index(level)]):
        if segment_key(lv, key) in segments:
            return segment_key(lv, key)
    return "global"
