"""Admission control: a worker takes on only as much CPU-heavy work as it has cores, and says so at once.

A recommendation searches thousands of candidates, a prediction may simulate a scheduler, an ingest refits the
calibration: each is CPU work in a thread. Queued without a bound, every request waits behind all the others
(seconds under load) and so do the cheap ones. This pure-ASGI middleware, in front of the app:

- counts the CPU-heavy requests in flight in this worker (``HEAVY``); one beyond ``max_in_flight`` is answered
  503 with ``Retry-After`` before its body is read, so the client can go elsewhere or come back; ingests are
  bounded apart (``max_ingests_in_flight``);
- answers every route but the health, metrics and docs routes 503 with ``Retry-After`` while the worker is
  still starting (service/lifecycle.py says what is still loading), and the heavy ones while its compiled
  kernels are still warming up;
- never holds back ``/healthz``, ``/readyz``, ``/metrics`` or catalog reads: they do not count, and the first
  three answer from the event loop.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from prometheus_client import Counter, Gauge

from service.api.operations import ASGIApp, Receive, Scope, Send
from service.settings import Settings

HEAVY = frozenset({("POST", "/v1/recommendations"), ("POST", "/v1/predictions")})
# Ingests (a refit each) have their own bound: they serialise on a database lock, so a second one in a worker only
# waits, and searches should not crowd out writes.
INGEST = ("POST", "/v1/benchmarks")
# Answered whatever the worker is doing (liveness, readiness, metrics, the docs pages and their schema).
ALWAYS = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/redoc",
                    "/docs/oauth2-redirect"})


# How often a worker with CPU-heavy requests in flight says so, and how long the saying lasts, seconds.
BUSY_RENEW_S = 0.1
BUSY_HOLD_S = 0.3


class BusySignal:
    """Tells background work on this machine that a worker is serving CPU-heavy requests.

    A file (named after the database URL) whose modification time every worker renews while it has such requests
    in flight; the background calibration process is paused while it is fresh (service/calibration/jobs.py). Even at
    nice 19 it slows a search sharing the cores: the scheduler gives it little time, but it still evicts caches
    and takes the sibling hardware thread."""

    def __init__(self, database_url: str) -> None:
        digest = hashlib.sha256(database_url.encode()).hexdigest()[:16]
        self.path = Path(tempfile.gettempdir()) / f"llm-deploy-advisor-busy-{digest}"
        self.path.touch()
        self.in_flight = 0
        self._renewer: threading.Thread | None = None

    def touch(self) -> None:
        try:
            os.utime(self.path)
        except OSError:
            self.path.touch()

    def start(self) -> None:
        """A request began: say so now, and keep saying it while any is in flight."""
        self.in_flight += 1
        self.touch()
        if self._renewer is None:
            self._renewer = threading.Thread(target=self._renew, name="busy-signal", daemon=True)
            self._renewer.start()

    def end(self) -> None:
        self.in_flight -= 1

    def _renew(self) -> None:
        while True:
            time.sleep(BUSY_RENEW_S)
            if self.in_flight > 0:
                self.touch()

    def busy(self) -> bool:
        """Whether any worker was serving within the last BUSY_HOLD_S."""
        try:
            return time.time() - self.path.stat().st_mtime < BUSY_HOLD_S
        except OSError:
            return False


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, which containers narrow), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:              # not on Linux
        return max(1, os.cpu_count() or 1)


def limit_for(settings: Settings) -> int:
    return settings.max_in_flight or usable_cores()


class AdmissionMiddleware:
    def __init__(self, app: ASGIApp, owner: FastAPI, limit: int, ingest_limit: int, retry_after_s: int,
                 signal: BusySignal | None) -> None:
        self.app = app
        self.signal = signal
        self.owner = owner
        self.limits = {"heavy": limit, "ingest": ingest_limit}
        self.retry_after_s = retry_after_s
        self.in_flight = {"heavy": 0, "ingest": 0}      # touched only on the event loop: no lock needed
        self._gauge: Gauge | None = None
        self._shed: Counter | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in ALWAYS:
            await self.app(scope, receive, send)
            return
        route = (scope.get("method"), scope.get("path"))
        kind = "heavy" if route in HEAVY else "ingest" if route == INGEST else None
        life = getattr(self.owner.state, "lifecycle", None)
        if life is not None and not life.ready:
            await self._refuse(scope, send, "starting", "Starting", f"the service is starting: {life.describe()}")
            return
        if kind is not None and life is not None and life.warming:
            await self._refuse(scope, send, "warming", "Warming up",
                               f"this worker is still warming up ({', '.join(life.warming)}); retry shortly")
            return
        if kind is None:
            await self.app(scope, receive, send)
            return
        if self.in_flight[kind] >= self.limits[kind]:
            what, setting = ("CPU-heavy requests", "MAX_IN_FLIGHT") if kind == "heavy" else \
                ("ingests", "MAX_INGESTS_IN_FLIGHT")
            await self._refuse(scope, send, "busy", "Busy",
                               f"this worker is at its bound of {self.limits[kind]} {what} in flight ({setting}); "
                               f"retry after {self.retry_after_s} s")
            return
        self.in_flight[kind] += 1
        self._metrics()[0].labels(kind).set(self.in_flight[kind])
        if self.signal is not None:
            self.signal.start()
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight[kind] -= 1
            self._metrics()[0].labels(kind).set(self.in_flight[kind])
            if self.signal is not None:
                self.signal.end()

    def _metrics(self) -> tuple[Gauge, Counter]:
        # made on first use: the app's registry (service/api/operations.py) exists once the app is built
        if self._gauge is None or self._shed is None:
            registry = self.owner.state.metrics.registry
            self._gauge = Gauge("advisor_heavy_in_flight", "CPU-heavy requests this worker is working on, by kind "
                                "(heavy: recommendations and predictions; ingest)", ["kind"], registry=registry)
            self._shed = Counter("advisor_shed_total", "requests answered 503 with Retry-After, by reason",
                                 ["reason"], registry=registry)
        return self._gauge, self._shed

    async def _refuse(self, scope: Scope, send: Send, reason: str, title: str, detail: str) -> None:
        self._metrics()[1].labels(reason).inc()
        problem: dict[str, Any] = {"type": "about:blank", "title": title, "status": 503, "detail": detail,
                                   "instance": scope.get("path", ""), "retry_after_s": self.retry_after_s}
        body = json.dumps(problem).encode()
        await send({"type": "http.response.start", "status": 503,
                    "headers": [(b"content-type", b"application/problem+json"),
                                (b"retry-after", str(self.retry_after_s).encode()),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def install(app: FastAPI, settings: Settings) -> None:
    """Add the middleware; install it before service/api/operations.py's, so that the request id, the log line
    and the metrics cover the requests it answers."""
    signal = BusySignal(settings.database_url) if settings.calibration_cv == "background" else None
    app.add_middleware(AdmissionMiddleware, owner=app, limit=limit_for(settings),
                       ingest_limit=settings.max_ingests_in_flight, retry_after_s=settings.retry_after_s,
                       signal=signal)
