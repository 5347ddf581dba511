"""Errors of a calibration against measurements: absolute percentage errors, summaries, leave-one-source-out
cross-validation and the breakdowns of GET /v1/calibration."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gpu_catalog.schema import CostConstants
from service.core.calibration.fit import fit
from service.core.calibration.measurements import METRICS, MeasurementSet, split_layout
from service.core.calibration.predict import predict_measured
from service.core.tables import Tables
from service.core.types import F


def ape(pred: F, meas: F) -> F:
    """Absolute percentage error, % (NaN where either is missing)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.abs(pred / meas - 1.0) * 100.0


def summarise(errors: F) -> dict[str, Any]:
    e = errors[np.isfinite(errors)]
    if not len(e):
        return {"n": 0, "median_ape_pct": None, "p90_ape_pct": None}
    return {"n": len(e), "median_ape_pct": round(float(np.median(e)), 1),
            "p90_ape_pct": round(float(np.percentile(e, 90)), 1)}


BREAKDOWNS = ("gpu", "engine", "dtype", "mode", "segment", "layout")


def cross_validate(tables: Tables, ms: MeasurementSet, constants: CostConstants,
                   group: str = "source") -> dict[str, Any]:
    """Leave-one-group-out (group: ``source`` or model ``family``): for each group, fit on the others and
    predict its rows.

    Returns the per-row held-out predictions' errors summarised overall and by GPU, engine, dtype, mode
    and fitted segment (the segment a prediction for that row would use)."""
    pred = np.full_like(ms.y, np.nan)
    labels = np.asarray(ms.sources if group == "source" else ms.families)
    seg_used: list[str] = [""] * len(ms)
    for src in sorted(set(labels.tolist())):
        held = np.flatnonzero(labels == src)
        train = np.flatnonzero(labels != src)
        cal = fit(tables, ms.take(train), constants)
        test = ms.take(held)
        pred[held] = predict_measured(tables, test, cal)
        for i, k in zip(held, test.keys, strict=True):
            seg_used[i] = cal.lookup(k)[0]
    report = error_report(ms, pred, seg_used)
    report["held_out_by"] = group
    report["groups"] = len(set(labels.tolist()))
    return report


def layout_labels(ms: MeasurementSet) -> list[str]:
    """Each row's layout class: ``moe dp/ep > 1`` (attention data parallelism or expert parallelism), ``moe``
    (MoE or MLA model, experts split by TP), or ``dense``."""
    split = split_layout(ms)
    return ["dense" if c == "dense" else "moe dp/ep > 1" if s else "moe"
            for c, s in zip(ms.classes, split.tolist(), strict=True)]


def error_report(ms: MeasurementSet, pred: F, seg_used: Sequence[str]) -> dict[str, Any]:
    errors = ape(pred, ms.y)
    labels = {"gpu": [k[2] for k in ms.keys], "engine": [k[0] for k in ms.keys], "dtype": [k[3] for k in ms.keys],
              "mode": list(ms.modes), "segment": list(seg_used), "layout": layout_labels(ms)}
    report: dict[str, Any] = {"rows": len(ms), "sources": len(set(ms.sources)),
                              "overall": {m: summarise(errors[:, j]) for j, m in enumerate(METRICS)}}
    for name in BREAKDOWNS:
        lab = np.asarray(labels[name])
        report[f"by_{name}"] = {
            v: {m: summarise(errors[lab == v, j]) for j, m in enumerate(METRICS)} for v in sorted(set(labels[name]))}
    return report
