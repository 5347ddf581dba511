"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import text

from service.api.deps import StateDep
from service.api.problems import ProblemError

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
def readyz(state: StateDep) -> dict[str, object]:
    try:
        with state.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        raise ProblemError(503, "Not ready", f"database unreachable: {type(exc).__name__}") from exc
    if not state.catalog.gpus:
        raise ProblemError(503, "Not ready", "catalog not loaded")
    return {"status": "ready", "gpus": len(state.catalog.gpus), "models": len(state.catalog.models)}
