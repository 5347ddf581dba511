"""The refit after ingests, off the serving path: the ingest commits its rows; a thread of the worker then has its
refit process (a child at the lowest CPU priority) refit the calibration on every ingest still waiting for one, in
one transaction, and serves the new version. With ``INGEST_REFIT=sync`` the request waits for that refit (the thread
waits on a pipe, using no CPU) and answers with the version it produced; with ``background`` it answers first.

The refit is CPU work (least squares over the segments' rows, then the in-sample error of every row); in the worker
it would hold the interpreter lock the searches need. In its own process at nice 19 it takes only cores the
searches leave idle.

One refit covers every ingest stored before it started, so a burst of ingests costs one or two refits, not one
each. An ingest whose refit was lost (the worker stopped first) is covered by the next refit of any worker, and
a worker looks for such ingests when it starts.

    python -m service.calibration.ingest_refit      # the refit process: one refit per line read from stdin
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from gpu_catalog.loader import Catalog
from gpu_catalog.schema import CostConstants
from service.calibration.fit import Refit, measurement_set, refit_and_store
from service.core.calibration import MeasurementSet
from service.core.costmodel import Tables
from service.db.session import retrying, transaction
from service.repository import calibrations as cal_repo
from service.repository import ingests as ingest_repo

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PendingRefit:
    """What a refit of waiting ingests did: the refit, the measurements it saw, and the ingests it covered."""

    refit: Refit
    measurements: MeasurementSet
    ingest_ids: list[int]
    version: int | None                # the version those ingests were given: the one in use after the refit


def refit_waiting(sessions: sessionmaker[Session], catalog: Catalog, tables: Tables,
                  constants: CostConstants) -> PendingRefit | None:
    """In one transaction, under the ingest lock: the calibration refitted on the rows of every ingest waiting
    for it, and those ingests given the version in use after it; None when no ingest waits."""
    with transaction(sessions) as session:
        ingest_repo.lock(session)
        waiting = ingest_repo.awaiting_refit(session)
        if not waiting:
            return None
        ids = [i.id for i in waiting]
        ms = measurement_set(session, catalog, tables, constants)
        refit = refit_and_store(session, tables, ms, constants, ingest_repo.row_ids_of(session, ids))
        latest = cal_repo.latest(session)
        version = refit.row.version if refit.row is not None else (latest.version if latest is not None else None)
        for ingest in waiting:
            ingest_repo.set_calibration(session, ingest, version)
    log.info("calibration v%s after ingests %s", version, ids)
    return PendingRefit(refit=refit, measurements=ms, ingest_ids=ids, version=version)


class RefitThread:
    """Runs ``work`` in one thread of this worker whenever woken; wakes during a run ask for one more run after it
    (so an ingest stored while a refit runs is never left out), never for one each."""

    def __init__(self, work: Callable[[], None]) -> None:
        self._work = work
        self._cond = threading.Condition()
        self._asked = False
        self._running = False
        self._started = 0                  # runs begun, and runs ended (done or failed)
        self._ended = 0
        self._thread: threading.Thread | None = None

    def wake(self) -> int:
        """Ask for a run; its number (``wait_for`` it): the next run to begin, which sees everything stored now."""
        with self._cond:
            self._asked = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="ingest-refit", daemon=True)
                self._thread.start()
            self._cond.notify_all()
            return self._started + 1

    def wait_for(self, run: int, timeout_s: float) -> bool:
        """Whether run number ``run`` has ended within ``timeout_s`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: self._ended >= run, timeout_s)

    def wait_idle(self, timeout_s: float) -> bool:
        """Whether every asked run has finished within ``timeout_s`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._asked and not self._running, timeout_s)

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._asked)
                self._asked, self._running = False, True
                self._started += 1
            try:
                self._work()
            except Exception:
                # the ingests stay waiting: the next ingest, or the next start of a worker, refits them
                log.exception("refit after ingest failed")
            finally:
                with self._cond:
                    self._running = False
                    self._ended += 1
                    self._cond.notify_all()


# --- the refit process ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RefitDone:
    """What one refit in the refit process did (crosses the pipe as JSON)."""

    version: int | None                # the version in use after it
    stored: bool                       # whether it stored a new version


class RefitProcessFailed(RuntimeError):
    """The refit process could not start, died, or reported an error."""


class RefitProcess:
    """This worker's refit process: ``python -m service.calibration.ingest_refit`` at nice 19, started on first use
    (and again after it died), one refit per request line. One caller at a time (the worker's RefitThread)."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def refit(self) -> RefitDone | None:
        """The refit of every waiting ingest, done in the process; None when none was waiting. The calling thread
        waits on the pipe meanwhile."""
        with self._lock:
            proc = self._started()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write("refit\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
            except OSError as exc:
                raise RefitProcessFailed(f"refit process {proc.pid}: {exc}") from exc
            if not line:
                code = proc.wait()
                self.proc = None
                raise RefitProcessFailed(f"refit process {proc.pid} ended with code {code}")
        answer = json.loads(line)
        if "error" in answer:
            raise RefitProcessFailed(f"refit process {proc.pid}: {answer['error']}")
        done = answer.get("done")
        return RefitDone(**done) if done is not None else None

    def _started(self) -> subprocess.Popen[str]:
        if self.proc is not None and self.proc.poll() is None:
            return self.proc
        # one thread for numeric libraries: the process is to use one core at most
        env = {**os.environ, "DATABASE_URL": self.database_url, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
               "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "service.calibration.ingest_refit"], env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        log.info("refit process %d started at the lowest priority", self.proc.pid)
        return self.proc

    def stop(self, timeout_s: float = 5.0) -> None:
        """End the process: it exits once its stdin closes (after the refit under way, if any); after
        ``timeout_s`` it is terminated, so a worker's shutdown is not held by a long refit."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait()


def serve(lines: Callable[[], str], answer: Callable[[str], None]) -> None:
    """The refit process: connect (retrying: at nice 19 on a busy machine a connection can time out), then one
    refit of the waiting ingests per request line, one JSON answer line each, until stdin ends."""
    from service.calibration.jobs import lowest_priority, open_job
    from service.core import serve_kernel
    from service.settings import Settings

    lowest_priority()
    settings = Settings()
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    engine, sessions, catalog, constants, tables = open_job(settings.database_url)
    serve_kernel.warm_up()                 # from numba's on-disk cache, which the worker filled
    while line := lines():
        if not line.strip():
            continue
        try:
            pending = retrying(lambda: refit_waiting(sessions, catalog, tables, constants))
        except Exception as exc:
            log.exception("refit failed")
            answer(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
            continue
        done = None if pending is None else {"version": pending.version, "stored": pending.refit.row is not None}
        answer(json.dumps({"done": done}))
    engine.dispose()


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)

    # the answers get the pipe to themselves: anything else written to stdout (a library's print) goes to stderr
    pipe = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    def answer(text: str) -> None:
        pipe.write(text + "\n")
        pipe.flush()

    serve(sys.stdin.readline, answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
