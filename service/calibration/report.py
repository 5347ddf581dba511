"""A stored calibration version -> the public report of GET /v1/calibration."""

from __future__ import annotations

from typing import Any

from gpu_catalog.loader import Catalog
from service.core.calibration import CLASS_LEVEL, LEVELS, Calibration, calibration_engine
from service.db.models import Calibration as CalibrationRow
from service.schemas.calibration import (
    PARAMETER_DESCRIPTIONS,
    CalibrationPublic,
    ErrorReport,
    Fallback,
    Segment,
)

REPRODUCE = ("python benchmarks/accuracy.py --group source --database-url \"$DATABASE_URL\"  (leave-one-source-out "
             "over the stored quality=good measurements, the same code and rows as the held-out report here; without "
             "--group it first prints the leave-one-model-family-out headline on the latency rows)")


def _parent(key: str, level: str, arch_of: dict[str, str]) -> str | None:
    parts = key.split("/")
    if level == "global":
        return None
    if level == "engine":
        return "global"
    if level in ("engine/class", "engine/arch"):
        return parts[0]
    if level == "engine/gpu":
        arch = arch_of.get(parts[1])
        return f"{parts[0]}/{arch}" if arch else parts[0]
    return f"{parts[0]}/{parts[1]}"


def _report(data: dict[str, Any] | None, kind: str) -> ErrorReport | None:
    return ErrorReport.model_validate({**data, "kind": kind}) if data else None


def fallbacks(cal: Calibration, catalog: Catalog) -> list[Fallback]:
    """Catalog GPU x engine combinations with no measurements, and the segment their predictions use."""
    out: list[Fallback] = []
    for gpu in catalog.gpus:
        for engine in catalog.engines:
            if gpu.vendor not in engine.vendors:
                continue
            key = (calibration_engine(engine.id, gpu.vendor), gpu.architecture, gpu.id, "")
            if f"{key[0]}/{gpu.id}" in cal.segments:
                continue
            seg, info = cal.lookup(key)
            out.append(Fallback(gpu=gpu.id, engine=engine.id, architecture=gpu.architecture, segment=seg,
                                level=info["level"], measurements=int(info["n"])))
    return out


def public(row: CalibrationRow, catalog: Catalog, latest_version: int,
           cv_mode: str = "background") -> CalibrationPublic:
    cal = Calibration.from_json(row.params, row.data_sha256, row.n_measurements)
    metrics = row.metrics or {}
    arch_of: dict[str, str] = {g.id: g.architecture for g in catalog.gpus}
    order = {lv: i for i, lv in enumerate((*LEVELS[:2], CLASS_LEVEL, *LEVELS[2:]))}
    segments = [Segment(key=k, level=s["level"], parent=_parent(k, s["level"], arch_of), measurements=int(s["n"]),
                        params=s["params"], owns=s.get("owns"), latency_measurements=s.get("latency_n"),
                        architectures=s.get("architectures"), latency_sources=s.get("sources"))
                for k, s in sorted(cal.segments.items(), key=lambda kv: (order[kv[1]["level"]], kv[0]))]
    held = _report(metrics.get("held_out"), "leave-one-source-out")
    in_sample = _report(metrics.get("in_sample"), "in-sample")
    error = held or in_sample
    if error is None:  # every stored version has at least its in-sample report
        raise ValueError(f"calibration v{row.version} has no error report")
    return CalibrationPublic(
        version=row.version, current=row.version == latest_version, created_at=row.created_at,
        data_sha256=row.data_sha256, n_measurements=row.n_measurements, method=metrics.get("method", "full"),
        base_version=metrics.get("base_version"), refitted_segments=metrics.get("refitted_segments", []),
        fit_s=metrics.get("fit_s"), levels=list(LEVELS), parameters=dict(PARAMETER_DESCRIPTIONS),
        generation=cal.generation, segments=segments, error=error, held_out=held, in_sample=in_sample,
        # the background process computes it for the newest version only
        held_out_status="computed" if held else ("pending" if cv_mode != "off" and row.version == latest_version
                                                 else "off"),
        error_current=held is not None, shipped=bool(metrics.get("shipped")),
        not_scored=metrics.get("skipped", {}), no_measurements=fallbacks(cal, catalog), reproduce=REPRODUCE)
