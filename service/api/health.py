"""Liveness and readiness, answered on the event loop (never queued behind CPU-heavy requests)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import text

from service.api.problems import ProblemError

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """200 while the process serves HTTP, from the moment the port opens (also while it is starting)."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> dict[str, object]:
    """200 once the catalog and calibration are loaded and the database answers; ``warming`` lists what is still
    being prepared (the compiled kernels: CPU-heavy requests answer 503 with Retry-After until then). 503 while
    starting (``loading`` names what), when the database is unreachable, and once shutting down."""
    life = request.app.state.lifecycle
    state = life.state
    if not life.ready or life.draining or state is None:
        raise ProblemError(503, "Not ready", life.describe(), loading=life.loading, warming=life.warming)

    def ping() -> None:
        with state.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    try:
        await run_in_threadpool(ping)
    except Exception as exc:
        raise ProblemError(503, "Not ready", f"database unreachable: {type(exc).__name__}") from exc
    return {"status": "ready", "gpus": len(state.catalog.gpus), "models": len(state.catalog.models),
            "warming": list(life.warming)}
