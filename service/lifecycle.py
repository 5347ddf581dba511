"""A worker's life: start-up behind an open port, warm-up of the compiled kernels, and a graceful stop.

Start-up (``STARTUP_MODE=background``, the default) runs in a thread while the port is already open: ``/healthz``
answers 200 at once and ``/readyz`` 503 naming what is still loading (the catalog, the calibration), then 200.
The numba kernels are compiled meanwhile in child processes, one per module, which fill numba's on-disk cache
on the other cores; the worker then loads them from that cache. Until they are loaded the worker answers
CPU-heavy requests 503 with Retry-After (service/admission.py) and ``/readyz`` lists them under ``warming``.
A restart finds them cached and only loads them.

On SIGTERM uvicorn stops accepting connections and lets the requests in flight finish (bounded by its
``--timeout-graceful-shutdown``); this module turns ``/readyz`` to 503 ("shutting down") as soon as the signal
arrives, so that a load balancer stops sending, and ends the background cross-validation and refit processes.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import logging
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from fastapi import FastAPI

from service.settings import Settings
from service.startup import STARTUP_STEPS, build_state
from service.state import AppState

log = logging.getLogger(__name__)

# Longest a stopping worker waits for a refit after an ingest to finish, seconds: a refit of a few segments
# fits well within it, and a refit cut short is rolled back and run by the next start.
REFIT_DRAIN_S = 30.0
# Modules whose numba kernels a worker compiles (or loads from the cache) before CPU-heavy requests.
KERNEL_MODULES = ("service.core.serve_kernel", "service.core.sim_kernel", "service.core.ranking")


class Lifecycle:
    """What a worker has loaded so far (read by /readyz and the admission middleware)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.loading: list[str] = list(STARTUP_STEPS)
        self.warming: list[str] = ["kernels"]
        self.failed: str | None = None
        self.draining = False
        self.state: AppState | None = None

    @property
    def ready(self) -> bool:
        return self.state is not None and not self.loading and self.failed is None

    def done(self, step: str) -> None:
        for pending in (self.loading, self.warming):
            if step in pending:
                pending.remove(step)
        log.info("start-up: %s done at %.1f s%s", step, time.perf_counter() - self.t0,
                 f"; still loading: {', '.join(self.loading + self.warming)}" if self.loading or self.warming
                 else "; ready")

    def describe(self) -> str:
        if self.failed:
            return f"start-up failed: {self.failed}"
        if self.draining:
            return "shutting down"
        return f"still loading: {', '.join(self.loading)}" if self.loading else "ready"


def _kernels_cached(module: ModuleType) -> bool:
    """Whether every numba kernel of ``module`` has a valid entry in numba's on-disk cache (if this cannot be
    told, False: the kernels are then compiled in a child process, which costs only time)."""
    try:
        from numba.core.registry import CPUDispatcher

        kernels = [v for v in vars(module).values() if isinstance(v, CPUDispatcher)]
        return all(k._cache._cache_file._load_index() for k in kernels)  # type: ignore[attr-defined]
    except Exception:
        return False


def _compile_in_child(module_name: str) -> subprocess.Popen[bytes]:
    """A child process that compiles ``module_name``'s kernels into numba's on-disk cache. Workers starting
    together take turns per module (a lock file), so each kernel is compiled once and then loaded."""
    code = ("import fcntl, importlib, sys; lock = open(sys.argv[2], 'a+b'); fcntl.flock(lock, fcntl.LOCK_EX); "
            "importlib.import_module(sys.argv[1]).warm_up()")
    digest = hashlib.sha256(str(Path(__file__).resolve()).encode()).hexdigest()[:12]
    lock = Path(tempfile.gettempdir()) / f"llm-deploy-advisor-numba-{module_name}-{digest}.lock"
    return subprocess.Popen([sys.executable, "-c", code, module_name, str(lock)])


def warm_kernels() -> float:
    """Compile (in child processes, in parallel) whatever is not cached, then load every kernel; seconds."""
    t0 = time.perf_counter()
    modules = {name: importlib.import_module(name) for name in KERNEL_MODULES}
    children = [_compile_in_child(name) for name, m in modules.items() if not _kernels_cached(m)]
    if children:
        log.info("start-up: compiling %d kernel modules in child processes", len(children))
    for child in children:
        child.wait()
    for m in modules.values():
        m.warm_up()                        # from the on-disk cache now (or compiled here if a child failed)
    return time.perf_counter() - t0


def _chain_sigterm(life: Lifecycle) -> None:
    """Mark the worker draining when SIGTERM arrives, then let uvicorn's own handler stop it."""
    if threading.current_thread() is not threading.main_thread():
        return                             # signals can only be handled on the main thread (not under TestClient)
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: FrameType | None) -> None:
        life.draining = True
        if callable(previous):
            previous(signum, frame)

    signal.signal(signal.SIGTERM, on_term)


def _start(app: FastAPI, settings: Settings, life: Lifecycle) -> None:
    def load() -> None:
        try:
            state = build_state(settings, life.done)
        except Exception as exc:
            life.failed = f"{type(exc).__name__}: {exc}"
            log.exception("start-up failed")
            return
        life.state = state
        app.state.app_state = state
        log.info("start-up: ready to serve after %.1f s", time.perf_counter() - life.t0)

    def warm() -> None:
        try:
            log.info("start-up: kernels ready in %.2f s", warm_kernels())
        except Exception:
            log.exception("kernel warm-up failed; kernels compile on first use")
        life.done("kernels")

    if settings.startup_mode == "blocking":
        load()
        warm()
        if life.failed:
            raise RuntimeError(life.failed)
        return
    threading.Thread(target=warm, name="warm-kernels", daemon=True).start()
    threading.Thread(target=load, name="startup", daemon=True).start()


def lifespan(settings: Settings) -> Callable[[FastAPI], Any]:
    @asynccontextmanager
    async def run(app: FastAPI) -> AsyncIterator[None]:
        life = Lifecycle()
        app.state.lifecycle = life
        app.state.app_state = None
        _chain_sigterm(life)
        _start(app, settings, life)
        yield
        life.draining = True
        state = life.state
        if state is not None:
            if state.refits is not None:
                # an ingest's refit lost here is run by the next start, but finishing it now serves it sooner
                await asyncio.to_thread(state.refits.wait_idle, REFIT_DRAIN_S)
            if state.refit_process is not None:
                state.refit_process.stop()
            if state.cross_validation is not None:
                state.cross_validation.stop()
            state.engine.dispose()

    return run
