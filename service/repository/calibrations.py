"""Stored calibrations: each fit is a new version; the newest is current; old ones stay readable."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpu_catalog.schema import MEASUREMENT_COLUMNS
from service.db.models import Calibration as CalibrationRow
from service.db.models import Measurement


def latest(session: Session) -> CalibrationRow | None:
    return session.scalars(select(CalibrationRow).order_by(CalibrationRow.version.desc()).limit(1)).first()


def by_version(session: Session, version: int) -> CalibrationRow | None:
    return session.get(CalibrationRow, version)


def store(session: Session, data_sha256: str, n_measurements: int, params: dict[str, Any],
          metrics: dict[str, Any]) -> int:
    row = CalibrationRow(data_sha256=data_sha256, n_measurements=n_measurements, params=params, metrics=metrics)
    session.add(row)
    session.flush()
    return row.version


def set_metrics(session: Session, version: int, metrics: dict[str, Any]) -> None:
    row = session.get(CalibrationRow, version)
    if row is not None:
        row.metrics = metrics
        session.flush()


def measurement_rows(session: Session, quality: str | None = "good") -> list[dict[str, Any]]:
    """Stored measurements as published.csv-shaped dicts (the calibration's input)."""
    cols = [getattr(Measurement, c) for c in MEASUREMENT_COLUMNS]
    stmt = select(*cols).order_by(Measurement.row_id)
    if quality:
        stmt = stmt.where(Measurement.quality == quality)
    return [dict(zip(MEASUREMENT_COLUMNS, r, strict=True)) for r in session.execute(stmt)]
