"""Calibration work off the serving path: a full refit and the leave-one-source-out error, in their own process.

The leave-one-source-out run refits the model once per source; in a serving worker it would take the cores the
searches need. Here it runs in a separate process at the lowest CPU priority (nice 19), paused whenever a worker
on this machine is serving a CPU-heavy request (a low priority alone still shares caches and hardware threads
with the search), started by a worker when the newest calibration has no held-out error yet
(``CALIBRATION_CV=background``), or on demand:

    python -m service.calibration.jobs                  # held-out error of the newest version, if it lacks one
    python -m service.calibration.jobs --fit            # a full refit on every stored measurement, then its error
    python -m service.calibration.jobs --fit --no-cross-validation

``DATABASE_URL`` names the database, as for the service. Results are stored in the calibration versions, where
every worker reads them within ``CALIBRATION_REFRESH_S``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.orm import Session, sessionmaker

from gpu_catalog.loader import Catalog, load_cost_constants
from gpu_catalog.schema import CostConstants
from service.admission import BusySignal
from service.calibration.fit import fit_and_store, measurement_set, refit_and_store, run_cross_validation
from service.core.costmodel import Tables, build_tables
from service.db.session import make_engine, make_sessionmaker, retrying, transaction, wait_for_database
from service.repository import calibrations as cal_repo
from service.repository import ingests as ingest_repo
from service.repository.catalog import read_catalog

log = logging.getLogger(__name__)

# A newer version may appear while one is cross-validated (an ingest): the process goes on to it, this many times.
MAX_ROUNDS = 10
# How often the worker that started the process looks whether serving is going on, seconds.
GATE_POLL_S = 0.02


def lowest_priority() -> None:
    """Nice 19: against a busy worker (nice 0) the scheduler gives this process ~1.5% of a core (CFS weights 15
    and 1024). Not SCHED_IDLE: on a machine busy with other work that would never let it finish."""
    with contextlib.suppress(OSError):
        os.nice(19)


def cross_validate_pending(sessions: sessionmaker[Session], catalog: Catalog, tables: Tables,
                           constants: CostConstants) -> list[int]:
    """The held-out error of the newest version while it lacks one; the versions given one."""
    done: list[int] = []
    for _ in range(MAX_ROUNDS):
        with transaction(sessions) as session:
            row = cal_repo.latest(session)
            if row is None or (row.metrics or {}).get("held_out"):
                return done
            version = row.version
            ms = measurement_set(session, catalog, tables, constants)
        if run_cross_validation(sessions, version, tables, ms, constants) is not None:
            done.append(version)
    return done


def full_refit(sessions: sessionmaker[Session], catalog: Catalog, tables: Tables, constants: CostConstants) -> int:
    """A new version fitted on every stored measurement (not segment by segment); the version number.

    The fit runs outside the ingest lock (ingests go on meanwhile); the version is stored under it, and rows an
    ingest added during the fit are refitted on top of it at once, so the newest version covers every row."""
    with transaction(sessions) as session:
        ms = measurement_set(session, catalog, tables, constants)
    from service.core.calibration import fit

    t0 = time.perf_counter()
    cal = fit(tables, ms, constants)
    fit_s = time.perf_counter() - t0
    with transaction(sessions) as session:
        ingest_repo.lock(session)
        row = fit_and_store(session, tables, ms, constants, fitted=(cal, fit_s))
        now = measurement_set(session, catalog, tables, constants)
        added = set(now.row_ids) - set(ms.row_ids)
        version = row.version
        if added:
            refit = refit_and_store(session, tables, now, constants, added)
            version = refit.row.version if refit.row is not None else version
    return version


# --- the background process, one per database on this machine ---------------------------------------------


def _lock_path(database_url: str) -> Path:
    digest = hashlib.sha256(database_url.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"llm-deploy-advisor-cv-{digest}.lock"


class CrossValidationProcess:
    """Starts ``python -m service.calibration.jobs`` at the lowest priority when a version lacks its held-out error.

    One such process per database on this machine: it holds an exclusive lock on a file named after the database
    URL (handed over from the worker that started it), so the other workers see it running and start none."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.proc: subprocess.Popen[bytes] | None = None
        self.busy = BusySignal(database_url)

    def ensure(self) -> bool:
        """Start the process unless one is running; whether this call started it."""
        if self.proc is not None and self.proc.poll() is None:
            return False
        with open(_lock_path(self.database_url), "a+b") as lock:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False               # another worker's process is at it
            env = {**os.environ, "DATABASE_URL": self.database_url, "NUMBA_NUM_THREADS": "1",
                   "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
            # the child inherits the locked file description: the lock is held until it exits
            self.proc = subprocess.Popen([sys.executable, "-m", "service.calibration.jobs", "--low-priority",
                                          "--lock-fd", str(lock.fileno())], env=env, pass_fds=(lock.fileno(),))
        log.info("leave-one-source-out cross-validation started in process %d at the lowest priority", self.proc.pid)
        threading.Thread(target=self._gate, args=(self.proc,), name="cv-gate", daemon=True).start()
        return True

    def _gate(self, proc: subprocess.Popen[bytes]) -> None:
        """Pause the process while any worker on this machine serves CPU-heavy requests, resume it once they have
        been idle for BUSY_HOLD_S: it runs in the gaps. SIGTSTP, not SIGSTOP: the process defers it until its
        database transaction ends (``PauseOutsideTransactions``), so a pause never holds a lock. Sent at every
        poll, so a deferred pause is not lost to a resume in between."""
        while proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTSTP if self.busy.busy() else signal.SIGCONT)
            time.sleep(GATE_POLL_S)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 5.0) -> None:
        """End the process (a later start begins again: nothing half-stored, each result is one UPDATE)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGCONT)       # a stopped process does not act on SIGTERM
        self.proc.terminate()
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class PauseOutsideTransactions:
    """In the background process: SIGTSTP stops it at once, or, inside a database transaction, when the
    transaction ends (a stopped process holding SQLite's write lock would block every ingest)."""

    def __init__(self, engine: Engine) -> None:
        self.depth = 0
        self.pending = False
        signal.signal(signal.SIGTSTP, self._pause)
        signal.signal(signal.SIGCONT, self._resumed)
        event.listen(engine, "begin", self._begin)
        event.listen(engine, "commit", self._end)
        event.listen(engine, "rollback", self._end)

    def _pause(self, signum: int, frame: FrameType | None) -> None:
        if self.depth:
            self.pending = True
        else:
            os.kill(os.getpid(), signal.SIGSTOP)

    def _resumed(self, signum: int, frame: FrameType | None) -> None:
        self.pending = False

    def _begin(self, conn: Any) -> None:
        self.depth += 1

    def _end(self, conn: Any) -> None:
        self.depth = max(0, self.depth - 1)
        if not self.depth and self.pending:
            self.pending = False
            os.kill(os.getpid(), signal.SIGSTOP)


def read_catalog_in(sessions: sessionmaker[Session]) -> Catalog:
    with transaction(sessions) as session:
        return read_catalog(session)


def open_job(database_url: str, pause_outside_transactions: bool = False
             ) -> tuple[Engine, sessionmaker[Session], Catalog, CostConstants, Tables]:
    """A calibration process's database, stored catalog, cost constants and tables (waiting for the database;
    ``pause_outside_transactions``: a worker's job, which the worker pauses while it serves)."""
    engine = make_engine(database_url)
    if pause_outside_transactions:
        PauseOutsideTransactions(engine)
    wait_for_database(engine)
    sessions = make_sessionmaker(engine)
    catalog = retrying(lambda: read_catalog_in(sessions))
    constants = load_cost_constants()
    return engine, sessions, catalog, constants, build_tables(catalog, constants)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fit", action="store_true", help="a full refit on every stored measurement first")
    ap.add_argument("--no-cross-validation", action="store_true", help="skip the leave-one-source-out error")
    ap.add_argument("--low-priority", action="store_true", help="run only on otherwise idle cores")
    ap.add_argument("--lock-fd", type=int, help=argparse.SUPPRESS)   # held until exit (CrossValidationProcess)
    args = ap.parse_args(argv)
    if args.low_priority:
        lowest_priority()
    from service.settings import Settings

    settings = Settings()
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # started by a worker (a lock fd), it is paused while the worker serves
    engine, sessions, catalog, constants, tables = open_job(settings.database_url, args.lock_fd is not None)
    if args.fit:
        t0 = time.perf_counter()
        version = full_refit(sessions, catalog, tables, constants)
        print(f"calibration v{version}: full refit in {time.perf_counter() - t0:.1f} s")
    if not args.no_cross_validation:
        t0 = time.perf_counter()
        done = retrying(lambda: cross_validate_pending(sessions, catalog, tables, constants))
        print(f"leave-one-source-out error stored for versions {done or 'none (already current)'} in "
              f"{time.perf_counter() - t0:.1f} s")
    engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
