"""Persistence of users' ingests (POST /v1/benchmarks): each one stored whole, in the caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import false, insert, select, text, update
from sqlalchemy.orm import Session

from gpu_catalog.schema import MeasurementRow
from service.db.models import BenchmarkSource, Ingest, Measurement
from service.repository.measurements import alias_map, row_dict

# Any fixed 64-bit number (distinct from start-up's): the PostgreSQL advisory lock that serialises ingests,
# so that each one refits on top of the calibration the previous one produced.
_INGEST_LOCK_ID = 7_420_240_602
# Rows per INSERT statement (as start-up loads published.csv) and ids per IN list (well within SQLite's
# bound-parameter limit, 32766 since 3.32).
_ROWS_PER_INSERT = 2000
_IDS_PER_QUERY = 1000


def lock(session: Session) -> None:
    """Serialise ingests until the caller's transaction ends.

    PostgreSQL: a transaction-scoped advisory lock. SQLite: a write that matches no row, which takes the
    database's write lock (held to commit) and makes every later read of this transaction see what the
    previous writer committed."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _INGEST_LOCK_ID})
    else:
        session.execute(update(Ingest).where(false()).values(row_count=Ingest.row_count))


def by_content(session: Session, content_sha256: str) -> Ingest | None:
    return session.scalar(select(Ingest).where(Ingest.content_sha256 == content_sha256))


def measurement_ids(session: Session, ingest_id: int) -> list[int]:
    return list(session.scalars(select(Measurement.id).where(Measurement.ingest_id == ingest_id)
                                .order_by(Measurement.id)))


def row_ids(session: Session, ingest_id: int) -> list[str]:
    return list(session.scalars(select(Measurement.row_id).where(Measurement.ingest_id == ingest_id)
                                .order_by(Measurement.id)))


def stored_row_ids(session: Session, row_ids: Sequence[str]) -> dict[str, tuple[int, int | None]]:
    """row_id -> (measurement id, ingest id) of those already stored."""
    found: dict[str, tuple[int, int | None]] = {}
    for start in range(0, len(row_ids), _IDS_PER_QUERY):
        chunk = list(row_ids[start:start + _IDS_PER_QUERY])
        stmt = select(Measurement.row_id, Measurement.id, Measurement.ingest_id).where(Measurement.row_id.in_(chunk))
        for row_id, mid, iid in session.execute(stmt):
            found[row_id] = (mid, iid)
    return found


def add(session: Session, content_sha256: str, fmt: str, submitted_by: str, rows: Sequence[MeasurementRow],
        source_description: str, model_families: Sequence[str | None]) -> tuple[Ingest, list[int]]:
    """Store one ingest and its rows (their ``source_id`` becomes ``user:<ingest id>``); returns the ingest and
    the new measurement ids in row order. Flushes, never commits."""
    ingest = Ingest(content_sha256=content_sha256, format=fmt, submitted_by=submitted_by, row_count=len(rows))
    session.add(ingest)
    session.flush()
    source_id = f"user:{ingest.id}"
    session.add(BenchmarkSource(id=source_id, description=source_description, shipped=False))
    session.flush()
    aliases = alias_map(session)
    values: list[dict[str, Any]] = []
    for row, family in zip(rows, model_families, strict=True):
        data = row_dict(row, aliases, source_id=source_id, ingest_id=ingest.id, submitted_by=submitted_by)
        data["model_family"] = data.get("model_family") or family
        values.append(data)
    for start in range(0, len(values), _ROWS_PER_INSERT):
        session.execute(insert(Measurement), values[start:start + _ROWS_PER_INSERT])
    session.flush()
    stmt = select(Measurement.row_id, Measurement.id).where(Measurement.ingest_id == ingest.id)
    ids = {row_id: mid for row_id, mid in session.execute(stmt)}
    return ingest, [ids[r.row_id] for r in rows]


def set_calibration(session: Session, ingest: Ingest, version: int | None) -> None:
    ingest.calibration_version = version
    session.flush()


def awaiting_refit(session: Session) -> list[Ingest]:
    """Ingests whose rows no calibration version has been fitted on yet (stored, refit still to come)."""
    return list(session.scalars(select(Ingest).where(Ingest.calibration_version.is_(None)).order_by(Ingest.id)))


def row_ids_of(session: Session, ingest_ids: Sequence[int]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(ingest_ids), _IDS_PER_QUERY):
        chunk = list(ingest_ids[start:start + _IDS_PER_QUERY])
        found.update(session.scalars(select(Measurement.row_id).where(Measurement.ingest_id.in_(chunk))))
    return found
