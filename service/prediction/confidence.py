"""How far a prediction can be trusted: the calibration segment it used and that segment's measured error."""

from __future__ import annotations

from service.calibration.state import CalibrationState
from service.core.calibration import LEVELS, METRICS, segment_key
from service.schemas.predictions import Confidence


def segment_confidence(state: CalibrationState, key: tuple[str, str, str, str], mode: str, cls: str = "") -> Confidence:
    """How far to trust a prediction of segment ``key``: the segment the calibration used, its measurements and
    the error of that segment (else of its nearest ancestor with held-out rows, else overall)."""
    cal = state.calibration
    seg, info = cal.lookup(key)
    sw_seg, sw = cal.overheads(key, cls)
    engine, arch, gpu, dtype = key
    metrics = ("throughput",) if mode == "offline" else METRICS
    err = None
    err_seg = seg
    # the error of the segment used, else of its nearest ancestor that has held-out rows
    for level in reversed(LEVELS[: LEVELS.index(info["level"]) + 1]):
        k = segment_key(level, key)
        stats = state.segment_errors.get(k)
        vals = [stats[mn]["median_ape_pct"] for mn in metrics if stats and stats[mn]["median_ape_pct"] is not None]
        if vals:
            err, err_seg = max(vals), k
            break
    if err is None and state.overall_errors:
        vals = [state.overall_errors[mn]["median_ape_pct"] for mn in metrics
                if state.overall_errors[mn]["median_ape_pct"] is not None]
        err, err_seg = (max(vals) if vals else None), "overall"
    n = int(info["n"])
    if info["level"] == "engine/gpu/dtype":
        basis = f"calibrated on {n} measurements of {gpu}/{engine}/{dtype}"
    elif info["level"] == "engine/gpu":
        basis = f"no {dtype} measurements on {gpu}/{engine}: calibrated on {n} measurements of {gpu}/{engine}"
    elif info["level"] == "engine/arch":
        basis = (f"no measurements for {gpu} with {engine}: roofline with {arch}-architecture efficiencies "
                 f"({n} measurements)")
    elif info["level"] == "engine":
        basis = (f"no measurements for {arch} GPUs with {engine}: roofline with {engine} efficiencies "
                 f"({n} measurements)")
    else:
        basis = f"no measurements for {engine}: roofline with global efficiencies ({n} measurements)"
    if err_seg != seg:
        basis += f"; error band from {err_seg}"
    lat_n, archs = sw.get("latency_n"), sw.get("architectures")
    if lat_n is not None:
        basis += f"; overheads from {sw_seg}: {lat_n} latency measurements of {archs} architectures"
    return Confidence(error_pct=err, error_kind=state.error_kind, basis=basis, segment=seg, measurements=n,
                      calibration_version=state.version, overheads_segment=sw_seg,
                      latency_measurements=lat_n, latency_architectures=archs)
