"""The refit after ingests, off the request: the ingest stores its rows and answers; a thread of the worker then
refits the calibration on every ingest still waiting for one, in one transaction.

One refit covers every ingest stored before it started, so a burst of ingests costs one or two refits, not one
each. An ingest whose refit was lost (the worker stopped first) is covered by the next refit of any worker, and
a worker looks for such ingests when it starts.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from gpu_catalog.loader import Catalog
from gpu_catalog.schema import CostConstants
from service.calibration.fit import Refit, measurement_set, refit_and_store
from service.core.calibration import MeasurementSet
from service.core.costmodel import Tables
from service.db.session import transaction
from service.repository import calibrations as cal_repo
from service.repository import ingests as ingest_repo

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PendingRefit:
    """What a refit of waiting ingests did: the refit, the measurements it saw, and the ingests it covered."""

    refit: Refit
    measurements: MeasurementSet
    ingest_ids: list[int]


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
    return PendingRefit(refit=refit, measurements=ms, ingest_ids=ids)


class RefitThread:
    """Runs ``work`` in one thread of this worker whenever woken; wakes during a run ask for one more run after it
    (so an ingest stored while a refit runs is never left out), never for one each."""

    def __init__(self, work: Callable[[], None]) -> None:
        self._work = work
        self._cond = threading.Condition()
        self._asked = False
        self._running = False
        self._thread: threading.Thread | None = None

    def wake(self) -> None:
        with self._cond:
            self._asked = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="ingest-refit", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        """Whether every asked run has finished within ``timeout_s`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._asked and not self._running, timeout_s)

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._asked)
                self._asked, self._running = False, True
            try:
                self._work()
            except Exception:
                # the ingests stay waiting: the next ingest, or the next start of a worker, refits them
                log.exception("refit after ingest failed")
            finally:
                with self._cond:
                    self._running = False
                    self._cond.notify_all()
