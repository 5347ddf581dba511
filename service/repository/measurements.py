"""Measurement persistence: the shipped published.csv and users' ingests."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, func, insert, select, update
from sqlalchemy.orm import Session

from gpu_catalog.schema import MeasurementRow
from service.db.models import BenchmarkSource, Measurement, ModelAlias
from service.repository.catalog import record_hash


def alias_map(session: Session) -> dict[str, str]:
    return {a: m for a, m in session.execute(select(ModelAlias.alias_lower, ModelAlias.model_id))}


def row_dict(row: MeasurementRow, aliases: dict[str, str], **extra: Any) -> dict[str, Any]:
    data = row.model_dump()
    data["model_id"] = aliases.get(row.model.lower())
    data.update(extra)
    return data


def ensure_sources(session: Session, rows: Sequence[MeasurementRow], shipped: bool) -> None:
    have = set(session.scalars(select(BenchmarkSource.id)))
    for r in rows:
        if r.source_id not in have:
            session.add(BenchmarkSource(id=r.source_id, description=r.source, shipped=shipped))
            have.add(r.source_id)
    session.flush()


def sync_published(session: Session, rows: Sequence[MeasurementRow], content_sha256: str) -> int:
    """Insert the shipped rows that are not stored yet; returns how many were added."""
    ensure_sources(session, rows, shipped=True)
    have = set(session.scalars(select(Measurement.row_id)))
    aliases = alias_map(session)
    new = [row_dict(r, aliases, submitted_by="catalog") for r in rows if r.row_id not in have]
    for start in range(0, len(new), 2000):
        session.execute(insert(Measurement), new[start:start + 2000])
    record_hash(session, "published", content_sha256)
    session.flush()
    return len(new)


def relink_models(session: Session) -> None:
    """Point every measurement at its catalog model (after the catalog changed), in one UPDATE."""
    resolved = (select(ModelAlias.model_id)
                .where(ModelAlias.alias_lower == func.lower(Measurement.model))
                .scalar_subquery())
    session.execute(update(Measurement).values(model_id=resolved))
    session.flush()


def file_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def filtered(gpu: str | None, model_id: str | None, engine: str | None, weight_dtype: str | None,
             source_id: str | None, quality: str | None) -> Select[Measurement]:
    stmt = select(Measurement)
    if gpu:
        stmt = stmt.where(Measurement.gpu == gpu)
    if model_id:
        stmt = stmt.where(Measurement.model_id == model_id)
    if engine:
        stmt = stmt.where(Measurement.engine == engine)
    if weight_dtype:
        stmt = stmt.where(Measurement.weight_dtype == weight_dtype)
    if source_id:
        stmt = stmt.where(Measurement.source_id == source_id)
    if quality:
        stmt = stmt.where(Measurement.quality == quality)
    return stmt


def page(session: Session, stmt: Select[Measurement], limit: int, offset: int) -> tuple[int, list[Measurement]]:
    total = session.scalar(select(func.count()).select_from(stmt.subquery())) or 0
    items = list(session.scalars(stmt.order_by(Measurement.id).limit(limit).offset(offset)))
    return total, items
