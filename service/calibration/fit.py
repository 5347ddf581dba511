"""Fitting, storing and loading calibrations against the database (the core fit is in service/core)."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from gpu_catalog.loader import Catalog
from gpu_catalog.schema import CostConstants
from service.calibration.state import CalibrationState
from service.core.calibration import (
    Calibration,
    MeasurementSet,
    cross_validate,
    data_fingerprint,
    error_report,
    fit,
    predict_measured,
    prepare,
    with_anchors,
)
from service.core.calibration.refit import refit_segments
from service.core.costmodel import Tables
from service.db.models import Calibration as CalibrationRow
from service.db.session import transaction
from service.repository import calibrations as repo

log = logging.getLogger(__name__)

# Only these rows are fitted and scored (weak ones are stored for reference); benchmarks/accuracy.py uses the same.
FITTED_QUALITY = "good"

# The fit is deterministic: the same rows give the same parameters, so a process fits each data set once. Keyed
# by data fingerprint, which every ingest changes: only the newest few are kept (a bound on memory).
_MEMO_KEPT = 4
_FIT_MEMO: OrderedDict[str, Calibration] = OrderedDict()
_CV_MEMO: OrderedDict[str, dict[str, Any]] = OrderedDict()
_MEMO_LOCK = threading.Lock()


def _remember(memo: OrderedDict[str, Any], key: str, value: Any) -> None:
    with _MEMO_LOCK:
        memo[key] = value
        memo.move_to_end(key)
        while len(memo) > _MEMO_KEPT:
            memo.popitem(last=False)


def in_sample_report(tables: Tables, ms: MeasurementSet, cal: Calibration) -> dict[str, Any]:
    pred = predict_measured(tables, ms, cal)
    return error_report(ms, pred, [cal.lookup(k)[0] for k in ms.keys])


def measurement_set(session: Session, catalog: Catalog, tables: Tables, constants: CostConstants) -> MeasurementSet:
    return prepare(repo.measurement_rows(session, quality=FITTED_QUALITY), catalog, tables, constants)


def fit_and_store(session: Session, tables: Tables, ms: MeasurementSet, constants: CostConstants,
                  fitted: tuple[Calibration, float] | None = None) -> CalibrationRow:
    """A new calibration version for these rows (fitted, given as ``fitted`` (calibration, seconds), or reused
    from this process's memo)."""
    fp = data_fingerprint(ms)
    with _MEMO_LOCK:
        cal = _FIT_MEMO.get(fp)
    t0 = time.perf_counter()
    if fitted is not None:
        cal = with_anchors(tables, ms, fitted[0])
        t0 -= fitted[1]
    elif cal is None:
        cal = with_anchors(tables, ms, fit(tables, ms, constants))
    _remember(_FIT_MEMO, fp, cal)
    metrics: dict[str, Any] = {"method": "full", "fit_s": round(time.perf_counter() - t0, 2), "skipped": ms.skipped,
                               "in_sample": in_sample_report(tables, ms, cal), "held_out": _CV_MEMO.get(fp)}
    version = repo.store(session, fp, len(ms), cal.to_json(), metrics)
    log.info("calibration v%d fitted on %d measurements in %.1f s", version, len(ms), metrics["fit_s"])
    row = repo.by_version(session, version)
    assert row is not None
    return row


@dataclass
class Refit:
    """What recalibrating after an ingest did."""

    row: CalibrationRow | None          # the new version (None: no new row is scored, the calibration is unchanged)
    refitted_segments: list[str]
    scored_rows: int
    fit_s: float | None


def refit_and_store(session: Session, tables: Tables, ms: MeasurementSet, constants: CostConstants,
                    new_row_ids: Collection[str]) -> Refit:
    """A new calibration version after rows ``new_row_ids`` were added to the measurements ``ms``: the segments
    holding them refitted on top of the newest stored version (service/core/calibration/refit.py); a full fit when none
    is stored yet."""
    new_keys = [k for k, rid in zip(ms.keys, ms.row_ids, strict=True) if rid in new_row_ids]
    if not new_keys:
        return Refit(row=None, refitted_segments=[], scored_rows=0, fit_s=None)
    base_row = repo.latest(session)
    if base_row is None:
        full = fit_and_store(session, tables, ms, constants)
        return Refit(row=full, refitted_segments=sorted(full.params["segments"]), scored_rows=len(new_keys),
                     fit_s=full.metrics.get("fit_s"))
    t0 = time.perf_counter()
    base = Calibration.from_json(base_row.params, base_row.data_sha256, base_row.n_measurements)
    cal, refitted = refit_segments(tables, ms, constants, base, new_keys)
    cal = with_anchors(tables, ms, cal)
    fit_s = round(time.perf_counter() - t0, 2)
    fp = data_fingerprint(ms)
    metrics: dict[str, Any] = {"method": "refit", "base_version": base_row.version, "refitted_segments": refitted,
                               "fit_s": fit_s, "skipped": ms.skipped,
                               "in_sample": in_sample_report(tables, ms, cal), "held_out": _CV_MEMO.get(fp)}
    version = repo.store(session, fp, len(ms), cal.to_json(), metrics)
    log.info("calibration v%d: %d segments refitted on top of v%d in %.1f s", version, len(refitted),
             base_row.version, fit_s)
    row = repo.by_version(session, version)
    assert row is not None
    return Refit(row=row, refitted_segments=refitted, scored_rows=len(new_keys), fit_s=fit_s)


def state_from_row(row: CalibrationRow) -> CalibrationState:
    cal = Calibration.from_json(row.params, row.data_sha256, row.n_measurements)
    held = (row.metrics or {}).get("held_out")
    report = held or (row.metrics or {}).get("in_sample") or {}
    return CalibrationState(calibration=cal, version=row.version, segment_errors=report.get("by_segment", {}),
                            overall_errors=report.get("overall", {}),
                            error_kind="leave-one-source-out" if held else "in-sample")


def run_cross_validation(sessions: sessionmaker[Session], version: int, tables: Tables, ms: MeasurementSet,
                         constants: CostConstants) -> dict[str, Any] | None:
    """Leave-one-source-out error of a stored calibration's data; stored into its metrics. None (nothing stored)
    when the version was fitted on other rows than ``ms``."""
    fp = data_fingerprint(ms)
    with _MEMO_LOCK:
        report = _CV_MEMO.get(fp)
    if report is None:
        t0 = time.perf_counter()
        report = cross_validate(tables, ms, constants)
        report["elapsed_s"] = round(time.perf_counter() - t0, 1)
        _remember(_CV_MEMO, fp, report)
    with transaction(sessions) as session:
        row = repo.by_version(session, version)
        if row is None or row.data_sha256 != fp:
            return None
        repo.set_metrics(session, version, {**(row.metrics or {}), "held_out": report})
    log.info("calibration v%d: leave-one-source-out error stored", version)
    return report


def has_rows(ms: MeasurementSet) -> bool:
    return bool(len(ms)) and bool(np.isfinite(ms.y).any())
