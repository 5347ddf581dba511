"""Held-out error of the latency predictions, by model family x metric x concurrency bucket, and the datasheet
floor check (benchmarks/accuracy.py prints these; the figures are computed here so that tests exercise them).

Leave-one-model-family-out: for each family that has latency measurements (TTFT or TPOT), the calibration is
fitted on every other family's rows and predicts that family's latency rows. The errors are signed
(predicted / measured - 1, %) and absolute, and summarised by their medians per family x metric x bucket.

The floor: a closed-loop run of one client cannot be faster than the datasheet allows. Its TTFT is at least
the prompt's FLOPs over the peak FLOPs of the GPUs that compute it, its TPOT at least the bytes a decode step
reads (weights, the routed experts one token uses, one sequence's KV cache) over the peak bandwidth.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gpu_catalog.schema import CostConstants
from service.core.calibration.fit import fit
from service.core.calibration.measurements import METRICS, MeasurementSet
from service.core.calibration.predict import predict_measured
from service.core.candidates import MODES
from service.core.memory import static_terms
from service.core.tables import Tables
from service.core.types import F

# concurrency buckets of the headline table: (label, lowest clients, highest clients)
BUCKETS = (("1", 1.0, 1.0), ("2-8", 2.0, 8.0), ("9-64", 9.0, 64.0), (">64", 65.0, np.inf))
LOADED_MODES = (MODES["concurrency"], MODES["static_batch"])


def latency_rows(ms: MeasurementSet) -> NDArray[np.bool_]:
    """Mask of the rows with a measured TTFT or TPOT."""
    return np.isfinite(ms.y[:, 1]) | np.isfinite(ms.y[:, 2])


def bucket_labels(ms: MeasurementSet) -> list[str]:
    """Concurrency bucket of each row (closed-loop clients or static batch size); other modes by name."""
    out = []
    for mode, load in zip(ms.cand.mode, ms.cand.load, strict=True):
        if int(mode) not in LOADED_MODES:
            out.append(next(k for k, v in MODES.items() if v == int(mode)))
            continue
        out.append(next(lab for lab, lo, hi in BUCKETS if lo <= round(float(load)) <= hi))
    return out


def held_out_by_family(tables: Tables, ms: MeasurementSet, constants: CostConstants) -> F:
    """(n, 3) predictions of each latency row by a calibration fitted without its model family (NaN for rows
    without latency)."""
    pred = np.full_like(ms.y, np.nan)
    lat = latency_rows(ms)
    fam = np.asarray(ms.families)
    for family in sorted(set(fam[lat].tolist())):
        held = np.flatnonzero(lat & (fam == family))
        cal = fit(tables, ms.take(np.flatnonzero(fam != family)), constants)
        pred[held] = predict_measured(tables, ms.take(held), cal)
    return pred


def _cell(signed: F) -> dict[str, Any]:
    e = signed[np.isfinite(signed)]
    if not len(e):
        return {"n": 0, "signed_median_pct": None, "abs_median_pct": None}
    return {"n": len(e), "signed_median_pct": round(float(np.median(e)), 1),
            "abs_median_pct": round(float(np.median(np.abs(e))), 1)}


def family_table(ms: MeasurementSet, pred: F) -> dict[str, Any]:
    """Signed and absolute median % error of the latency rows: overall per metric, and per family x metric x
    bucket; with the largest signed bias of any family x bucket cell."""
    lat = latency_rows(ms)
    with np.errstate(invalid="ignore", divide="ignore"):
        signed = (pred / ms.y - 1.0) * 100.0
    signed[np.logical_not(lat)] = np.nan
    fam = np.asarray(ms.families)
    buckets = np.asarray(bucket_labels(ms))
    cells: list[dict[str, Any]] = []
    for family in sorted(set(fam[lat].tolist())):
        for j, metric in enumerate(METRICS):
            for b in sorted(set(buckets[lat & (fam == family)].tolist()), key=_bucket_order):
                c = _cell(signed[(fam == family) & (buckets == b), j])
                if c["n"]:
                    cells.append({"family": family, "metric": metric, "bucket": b, **c})
    worst = {m: max((c for c in cells if c["metric"] == m), key=lambda c: abs(c["signed_median_pct"]), default=None)
             for m in METRICS}
    return {"rows": int(lat.sum()), "families": len(set(fam[lat].tolist())),
            "overall": {m: _cell(signed[:, j]) for j, m in enumerate(METRICS)},
            "by_bucket": {b: {m: _cell(signed[buckets == b, j]) for j, m in enumerate(METRICS)}
                          for b in sorted(set(buckets[lat].tolist()), key=_bucket_order)},
            "cells": cells, "worst_bias": worst}


def _bucket_order(label: str) -> int:
    order = [lab for lab, _, _ in BUCKETS]
    return order.index(label) if label in order else len(order)


def datasheet_floor(tables: Tables, ms: MeasurementSet) -> F:
    """(n, 2) lowest TTFT and TPOT (s) one request alone can reach on the datasheet peaks."""
    s = static_terms(tables, ms.cand)
    prefill_s = (s.lin_flops_tok * s.isl / (s.tp * s.gemm_flops_s) + s.attn_prefill_flops / (s.tp * s.attn_flops_s))
    with np.errstate(divide="ignore"):
        expert_share = np.where(s.experts > 0, np.minimum(s.experts_per_token / np.maximum(s.experts, 1.0), 1.0), 0.0)
    step_bytes = s.dense_weights + s.expert_weights * expert_share + s.seq_mean
    decode_s = s.pp * step_bytes / s.bw_bytes_s
    return np.stack([prefill_s, decode_s], axis=1)


def floor_check(tables: Tables, ms: MeasurementSet, pred: F) -> dict[str, Any]:
    """Concurrency-1 rows: how many predictions (and measurements) fall below the datasheet floor."""
    one = np.isin(ms.cand.mode, LOADED_MODES) & (np.round(ms.cand.load) == 1) & latency_rows(ms)
    idx = np.flatnonzero(one)
    floor = datasheet_floor(tables, ms.take(idx)) if len(idx) else np.zeros((0, 2))
    out: dict[str, Any] = {"rows": len(idx)}
    for k, (metric, col) in enumerate((("ttft", 1), ("tpot", 2))):
        meas, p, fl = ms.y[idx, col], pred[idx, col], floor[:, k]
        has = np.isfinite(meas)
        below = has & (p < fl)
        out[metric] = {"n": int(has.sum()), "predicted_below_floor": int(below.sum()),
                       "measured_below_floor": int((has & (meas < fl)).sum()),
                       "median_measured_over_floor": round(float(np.median(meas[has] / fl[has])), 2)
                       if has.any() else None,
                       "median_predicted_over_floor": round(float(np.median(p[has] / fl[has])), 2)
                       if has.any() else None,
                       "below_floor_rows": [ms.row_ids[i] for i in idx[below]]}
    return out


def format_table(table: dict[str, Any], floors: dict[str, Any] | None = None,
                 metrics: Sequence[str] = METRICS) -> list[str]:
    """The headline as text lines."""
    lines = [f"leave-one-model-family-out over {table['families']} families, {table['rows']} latency rows; "
             "median error % signed / absolute (n)"]
    for m in metrics:
        c = table["overall"][m]
        lines.append(f"  overall {m:<10} {_fmt(c)}")
    lines.append("by concurrency bucket:")
    for b, cells in table["by_bucket"].items():
        lines.append(f"  {b:<12} " + "   ".join(f"{m} {_fmt(cells[m])}" for m in metrics))
    lines.append("by family x bucket:")
    for fam in sorted({c["family"] for c in table["cells"]}):
        for b in sorted({c["bucket"] for c in table["cells"] if c["family"] == fam}, key=_bucket_order):
            got = {c["metric"]: c for c in table["cells"] if c["family"] == fam and c["bucket"] == b}
            empty = {"n": 0}
            lines.append(f"  {fam:<18} {b:<12} " + "   ".join(f"{m} {_fmt(got.get(m, empty))}" for m in metrics))
    for m in metrics:
        w = table["worst_bias"][m]
        if w:
            lines.append(f"largest signed bias, {m}: {w['signed_median_pct']:+.1f}% ({w['family']}, {w['bucket']}, "
                         f"n={w['n']})")
    if floors is not None:
        for m in ("ttft", "tpot"):
            f = floors[m]
            lines.append(f"concurrency-1 floor, {m}: {f['predicted_below_floor']} of {f['n']} predictions below the "
                         f"datasheet floor ({f['measured_below_floor']} measurements below it); median measured / "
                         f"floor {f['median_measured_over_floor']}, predicted / floor "
                         f"{f['median_predicted_over_floor']}")
    return lines


def _fmt(c: dict[str, Any]) -> str:
    if not c.get("n"):
        return f"{'-':>15}"
    return f"{c['signed_median_pct']:+7.1f}/{c['abs_median_pct']:5.1f} ({c['n']})"
