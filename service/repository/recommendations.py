"""Stored recommendations: each answer as it was sent, with the request that asked for it."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from service.db.models import RecommendationRecord
from service.db.session import JSONText


def add(session: Session, rec_id: str, request: dict[str, Any], response_json: str,
        calibration_version: int | None) -> None:
    """Store an answer; ``response_json`` is its JSON text, stored as it is (not decoded and encoded again)."""
    session.add(RecommendationRecord(id=rec_id, request=request, response=JSONText(response_json),
                                     calibration_version=calibration_version))


def by_id(session: Session, rec_id: str) -> RecommendationRecord | None:
    return session.get(RecommendationRecord, rec_id)
