"""What a worker serves from: the long-lived resources, and the calibration in use as one immutable snapshot.

Requests run in threads. Each takes the snapshot once (``AppState.current()``) and answers from it to the end;
a new calibration builds a new snapshot and replaces the old one whole, so no request ever sees a calibration
change under it, and none waits for one.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from gpu_catalog.loader import Catalog
from gpu_catalog.schema import CostConstants
from service.calibration.fit import measurement_set, run_cross_validation, state_from_row
from service.calibration.ingest_refit import RefitProcess, RefitProcessFailed, RefitThread, refit_waiting
from service.calibration.jobs import CrossValidationProcess
from service.calibration.state import CalibrationState
from service.core.calibration import MeasurementSet
from service.db.session import transaction
from service.prediction.advisor import Advisor
from service.recommendation.answer import Recommender
from service.repository import calibrations as cal_repo
from service.settings import Settings

log = logging.getLogger(__name__)

HELD_OUT = "leave-one-source-out"


@dataclass(frozen=True)
class Serving:
    """One calibration and the predictor and recommender built on it; never changed once built."""

    calibration: CalibrationState
    advisor: Advisor
    recommender: Recommender

    @classmethod
    def build(cls, catalog: Catalog, constants: CostConstants, calibration: CalibrationState) -> Serving:
        advisor = Advisor(catalog, constants, calibration)
        return cls(calibration=calibration, advisor=advisor, recommender=Recommender(advisor))


@dataclass
class AppState:
    """A worker's resources (settings, database, catalog) and the serving snapshot, replaced whole."""

    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    catalog: Catalog
    constants: CostConstants
    serving: Serving
    startup_s: float = 0.0
    calibration_checked_at: float = field(default_factory=time.monotonic)
    cross_validation: CrossValidationProcess | None = None    # CALIBRATION_CV=background
    refits: RefitThread | None = None                          # INGEST_REFIT=sync or background
    refit_process: RefitProcess | None = None                  # the refit's low-priority process (same)
    _swap: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def current(self) -> Serving:
        """The snapshot with the newest stored calibration: another worker (or an ingest) may have made one.

        Checks the database at most every ``calibration_refresh_s`` seconds; a request calls this once."""
        now = time.monotonic()
        if now - self.calibration_checked_at >= self.settings.calibration_refresh_s:
            self.calibration_checked_at = now
            self.reload_calibration()
        return self.serving

    def use(self, calibration: CalibrationState) -> None:
        """Serve ``calibration`` from now on (requests under way finish on the snapshot they took)."""
        self.serving = Serving.build(self.catalog, self.constants, calibration)

    def refit_after_ingests(self) -> None:
        """Refit on every ingest waiting for it (service/calibration/ingest_refit.py) and serve the result: in the
        refit process, or in this worker when that process cannot run."""
        if self.refit_process is not None:
            try:
                done = self.refit_process.refit()
            except RefitProcessFailed:
                log.exception("refit process failed; refitting in the worker")
            else:
                if done is not None and done.stored:
                    self.held_out_for(done.version)
                self.reload_calibration()          # another worker's refit may have covered this worker's ingests
                return
        pending = refit_waiting(self.sessions, self.catalog, self.serving.advisor.tables, self.constants)
        if pending is not None and pending.refit.row is not None:
            self.held_out_for(pending.version, pending.measurements)
        self.reload_calibration()

    def held_out_for(self, version: int | None, ms: MeasurementSet | None = None) -> None:
        """After a new version is committed: its held-out error as ``calibration_cv`` says (``ms``: its
        measurements, read again when not given)."""
        if version is None:
            return
        if self.settings.calibration_cv == "sync":
            tables = self.serving.advisor.tables
            if ms is None:
                with transaction(self.sessions) as session:
                    ms = measurement_set(session, self.catalog, tables, self.constants)
            run_cross_validation(self.sessions, version, tables, ms, self.constants)
        elif self.settings.calibration_cv == "background" and self.cross_validation is not None:
            self.cross_validation.ensure()

    def reload_calibration(self) -> None:
        try:
            self._reload_calibration()
        except OperationalError as exc:
            # the database is away: keep predicting with the calibration in hand (it is complete, and
            # versioned); requests that must store something answer 503 on their own
            log.warning("calibration check skipped, database unavailable: %s", type(exc.orig).__name__)

    def _reload_calibration(self) -> None:
        # one thread at a time reads and swaps, so a row read earlier never replaces a snapshot built later
        with self._swap, transaction(self.sessions) as session:
            row = cal_repo.latest(session)
            if row is None:
                return
            held = bool((row.metrics or {}).get("held_out"))
            cur = self.serving.calibration
            if row.version != cur.version or (held and cur.error_kind != HELD_OUT):
                self.use(state_from_row(row))
        if not held and self.cross_validation is not None:
            self.cross_validation.ensure()
