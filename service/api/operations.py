"""Operations: request ids and JSON logs, a request-body limit, Prometheus metrics, optional CORS.

One pure-ASGI middleware does the per-request work (no BaseHTTPMiddleware: it would buffer streamed
bodies and cost a task per request):

- every request gets an id (the caller's ``X-Request-ID`` if it sends a sane one, else a new one),
  returned in the ``X-Request-ID`` header and attached to every log line written while it runs;
- a body larger than ``max_body_bytes`` is refused with 413 before the app reads it (by its
  ``Content-Length``, and by counting when the body is streamed without one);
- request counts and latencies by route template, method and status go to a per-app Prometheus
  registry served at ``GET /metrics``.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI, Response
from fastapi.middleware.cors import CORSMiddleware
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.exceptions import HTTPException

from service.settings import Settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
_SANE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
# Latency buckets, seconds: predictions take milliseconds, searches tens of ms, ingests with a refit seconds.
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# The methods metrics name (RFC 9110 section 9 and PATCH); any other token a client sends is counted as "other", so
# that request content cannot add label values (each is a series kept for the worker's life).
METRIC_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"})


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request id (when inside a request)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"), "level": record.levelname,
                               "logger": record.name, "msg": record.getMessage()}
        rid = getattr(record, "request_id", None) or REQUEST_ID.get()
        if rid:
            out["request_id"] = rid
        for key in ("method", "path", "status", "duration_ms"):
            if hasattr(record, key):
                out[key] = getattr(record, key)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_logging(settings: Settings) -> None:
    root = logging.getLogger()
    root.setLevel(settings.log_level.upper())
    handler = next((h for h in root.handlers if getattr(h, "_advisor", False)), None)
    if handler is None:
        handler = logging.StreamHandler()
        handler._advisor = True  # type: ignore[attr-defined]
        for h in list(root.handlers):           # one handler, our format
            root.removeHandler(h)
        root.addHandler(handler)
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else
                         logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))


class Metrics:
    """The app's Prometheus registry (one per app, so that several apps in one process do not collide)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("advisor_http_requests_total", "HTTP requests by route, method and status",
                                ["route", "method", "status"], registry=self.registry)
        self.latency = Histogram("advisor_http_request_duration_seconds", "HTTP request latency, seconds",
                                 ["route", "method"], buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.candidates = Counter("advisor_search_candidates_total",
                                  "deployment candidates decided by recommendation searches", registry=self.registry)
        self.calibration_version = Gauge("advisor_calibration_version", "calibration version in use by this worker",
                                         registry=self.registry)


class RequestMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics, max_body_bytes: int) -> None:
        self.app = app
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self.log = logging.getLogger("service.access")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        given = headers.get("x-request-id", "")
        rid = given if _SANE_ID.match(given) else uuid.uuid4().hex
        token = REQUEST_ID.set(rid)
        t0 = time.perf_counter()
        status = {"code": 500}

        async def send_wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", rid.encode())]
            await send(message)

        try:
            length = headers.get("content-length")
            if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
                await self._too_large(scope, send_wrapped)
                return
            seen = {"bytes": 0}

            async def receive_limited() -> Message:
                message = await receive()
                if message["type"] == "http.request":
                    seen["bytes"] += len(message.get("body", b""))
                    if seen["bytes"] > self.max_body_bytes:
                        raise _BodyTooLarge(self.max_body_bytes)
                return message

            try:
                await self.app(scope, receive_limited, send_wrapped)
            except _BodyTooLarge:
                await self._too_large(scope, send_wrapped)
        finally:
            elapsed = time.perf_counter() - t0
            route = scope.get("route")       # set by recent Starlette routers; else the endpoint's path
            template = getattr(route, "path", None) or self._template(scope)
            method = scope.get("method", "")
            label = method if method in METRIC_METHODS else "other"
            self.metrics.requests.labels(template, label, str(status["code"])).inc()
            self.metrics.latency.labels(template, label).observe(elapsed)
            self.log.info("%s %s %d %.1f ms", method, scope.get("path", ""), status["code"], elapsed * 1e3,
                          extra={"request_id": rid, "method": method, "path": scope.get("path", ""),
                                 "status": status["code"],
                                 "duration_ms": round(elapsed * 1e3, 2)})
            REQUEST_ID.reset(token)

    @staticmethod
    def _template(scope: Scope) -> str:
        """The route's path template (bounded label values: never the raw path with its ids)."""
        endpoint = scope.get("endpoint")
        app = scope.get("app")
        for r in getattr(getattr(app, "router", None), "routes", []):
            if endpoint is not None and getattr(r, "endpoint", None) is endpoint:
                return str(getattr(r, "path", "unmatched"))
        return "unmatched"

    async def _too_large(self, scope: Scope, send: Send) -> None:
        body = json.dumps({"type": "about:blank", "title": "Request body too large", "status": 413,
                           "detail": _too_large_detail(self.max_body_bytes),
                           "instance": scope.get("path", "")}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/problem+json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class _BodyTooLarge(HTTPException):
    """An HTTPException, so that FastAPI's body reader passes it on (it turns any other error into a 400)
    and the app's handler answers the 413; raised outside a route, the middleware answers it."""

    def __init__(self, max_body_bytes: int) -> None:
        super().__init__(413, _too_large_detail(max_body_bytes))


def _too_large_detail(max_body_bytes: int) -> str:
    return f"the body exceeds {max_body_bytes} bytes (MAX_BODY_BYTES)"


def install(app: FastAPI, settings: Settings) -> Metrics:
    metrics = Metrics()
    app.state.metrics = metrics

    @app.get("/metrics", include_in_schema=False)
    async def prometheus_metrics() -> Response:
        state = getattr(app.state, "app_state", None)
        if state is not None and state.serving.calibration.version is not None:
            metrics.calibration_version.set(state.serving.calibration.version)
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type", "X-Request-ID"])
    app.add_middleware(RequestMiddleware, metrics=metrics, max_body_bytes=settings.max_body_bytes)
    return metrics
