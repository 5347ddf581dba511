"""How the CLI reaches the service: a running one over HTTP (``--url``), or the real app started in this
process and called through its ASGI interface (the same routes, validation and database code as the server)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

# Seconds a call may take over HTTP: a search answers in tens of ms, a cold server's first one in seconds.
HTTP_TIMEOUT_S = 120.0


class ServiceError(Exception):
    """A 4xx/5xx answer (its problem detail), or no answer at all."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@asynccontextmanager
async def connect(url: str | None, api_key: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the service at ``url``; without one, of the app started in this process on
    ``DATABASE_URL`` (default: the SQLite file in the working directory), called through httpx's ASGI
    transport, its start-up and shut-down run around the calls."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    if url:
        async with httpx.AsyncClient(base_url=url.rstrip("/"), headers=headers, timeout=HTTP_TIMEOUT_S) as client:
            yield client
        return
    # imported here: the app (numpy, numba, the catalog) is not needed to talk to a running service
    from service.main import create_app
    from service.settings import Settings

    # the service's log lines go to stderr, quiet unless LOG_LEVEL asks for them; the leave-one-source-out
    # validation of a new calibration (minutes, in a background thread) would be cut short by the command's
    # exit, so it is off unless CALIBRATION_CV asks for it (answers then quote in-sample errors); the command
    # asks as soon as the app has started, so start-up loads everything first (a server opens its port early);
    # an ingest's refit runs before its answer, in this process (a one-shot command starts no refit process)
    defaults: dict[str, Any] = {"log_level": "WARNING", "calibration_cv": "off", "startup_mode": "blocking",
                                "ingest_refit": "inline"}
    settings = Settings(**{k: v for k, v in defaults.items() if k.upper() not in os.environ})
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://in-process", headers=headers,
                                     timeout=HTTP_TIMEOUT_S) as client:
            yield client


def problem_text(r: httpx.Response) -> str:
    """One line from an RFC 9457 problem body (title, detail, field path, valid choices), else the raw body."""
    try:
        body = r.json()
    except ValueError:
        return f"HTTP {r.status_code}: {r.text.strip()[:500]}"
    if not isinstance(body, dict):
        return f"HTTP {r.status_code}: {json.dumps(body)[:500]}"
    head = f"HTTP {r.status_code} {body.get('title', '')}".rstrip()
    extra = []
    field = body.get("field")
    if field:
        extra.append("field: " + (".".join(str(f) for f in field) if isinstance(field, list) else str(field)))
    detail = str(body.get("detail", ""))
    valid = ", ".join(str(v) for v in body.get("valid") or [])
    if valid and valid not in detail:
        extra.append(f"valid: {valid}")
    return f"{head}: {detail}" + (f" ({'; '.join(extra)})" if extra else "")


async def call(client: httpx.AsyncClient, method: str, path: str, body: Any = None,
               params: dict[str, str] | None = None) -> httpx.Response:
    """The answer to one request; a 4xx/5xx or a connection failure raises ``ServiceError``."""
    try:
        r = await client.request(method, path, json=body, params=params)
    except httpx.HTTPError as exc:
        raise ServiceError(f"cannot reach {client.base_url}: {exc}") from exc
    if r.status_code >= 400:
        raise ServiceError(problem_text(r), r.status_code)
    return r
