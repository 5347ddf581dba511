"""Start-up: migrate, load the catalog and the shipped measurements, and build what the core needs."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from gpu_catalog.loader import (
    DATA_DIR,
    SHIPPED_CSVS,
    Catalog,
    files_sha256,
    load_catalog,
    load_cost_constants,
    load_shipped_measurements,
)
from gpu_catalog.schema import CostConstants
from service.calibration import shipped as shipped_calibration
from service.calibration.fit import fit_and_store, measurement_set, run_cross_validation, state_from_row
from service.calibration.ingest_refit import RefitProcess, RefitThread
from service.calibration.jobs import CrossValidationProcess
from service.calibration.state import CalibrationState
from service.core.calibration import data_fingerprint
from service.core.costmodel import build_tables
from service.db import migrate
from service.db.session import make_engine, make_sessionmaker, transaction
from service.engines import vocabulary
from service.repository import calibrations as cal_repo
from service.repository import ingests as ingest_repo
from service.repository.catalog import read_catalog, stored_hash, sync_catalog
from service.repository.measurements import relink_models, sync_published
from service.settings import Settings
from service.state import AppState, Serving

log = logging.getLogger(__name__)

# Any fixed 64-bit number: the PostgreSQL advisory lock that serialises start-up across workers.
_STARTUP_LOCK_ID = 7_420_240_601
# What build_state reports as done, in order (service/lifecycle.py shows the ones still loading in /readyz).
STARTUP_STEPS = ("catalog", "calibration")


@contextmanager
def _startup_lock(engine: Engine) -> Iterator[None]:
    if engine.dialect.name != "postgresql":
        yield
        return
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _STARTUP_LOCK_ID})
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _STARTUP_LOCK_ID})
            conn.commit()


def migrate_and_load(engine: Engine, sessions: sessionmaker[Session], data_dir: Path = DATA_DIR) -> None:
    """Bring the schema to head and the catalog and shipped measurements up to date (idempotent)."""
    with _startup_lock(engine):
        migrate.upgrade(engine)
        files = load_catalog(data_dir)
        published_sha = files_sha256(SHIPPED_CSVS)
        with transaction(sessions) as session:
            changed = sync_catalog(session, files)
            added = 0
            if stored_hash(session, "published") != published_sha:
                # Parsing the shipped rows is the slow part of start-up: only when a shipped file changed.
                added = sync_published(session, load_shipped_measurements(), published_sha)
            if changed:
                relink_models(session)
        log.info("catalog %s; %d shipped measurements added", "reloaded" if changed else "unchanged", added)


def ensure_calibration(engine: Engine, sessions: sessionmaker[Session], catalog: Catalog,
                       constants: CostConstants, settings: Settings) -> tuple[CalibrationState, bool]:
    """A calibration of the stored measurements: the newest stored version if it was fitted on
    them, else the shipped calibration if it was (service/calibration/shipped.py), else a new fit; and whether
    that version still lacks its leave-one-source-out error."""
    tables = build_tables(catalog, constants)
    with _startup_lock(engine), transaction(sessions) as session:
        ms = measurement_set(session, catalog, tables, constants)
        row = cal_repo.latest(session)
        fp = data_fingerprint(ms)
        if row is None or row.data_sha256 != fp:
            shipped = shipped_calibration.matching(fp)
            row = shipped_calibration.store(session, shipped) if shipped else fit_and_store(session, tables, ms,
                                                                                              constants)
        calibration = state_from_row(row)
        version, needs_cv = row.version, not (row.metrics or {}).get("held_out")
    if needs_cv and settings.calibration_cv == "sync":
        run_cross_validation(sessions, version, tables, ms, constants)
        with transaction(sessions) as session:
            stored = cal_repo.by_version(session, version)
            assert stored is not None
            calibration = state_from_row(stored)
        needs_cv = False
    return calibration, needs_cv


def build_state(settings: Settings, done: Callable[[str], None] = lambda step: None) -> AppState:
    """Everything a worker needs to answer but its compiled kernels (service/lifecycle.py warms those);
    ``done(step)`` is called as each of ``STARTUP_STEPS`` completes."""
    t0 = time.perf_counter()
    engine = make_engine(settings.database_url)
    sessions = make_sessionmaker(engine)
    if settings.auto_migrate:
        migrate_and_load(engine, sessions)
    elif not migrate.is_at_head(engine):
        raise RuntimeError("database schema is not at head; run `alembic upgrade head` or set AUTO_MIGRATE=1")
    with transaction(sessions) as session:
        catalog = read_catalog(session)
    done("catalog")
    constants = load_cost_constants()
    calibration, needs_cv = ensure_calibration(engine, sessions, catalog, constants, settings)
    t_vocab = time.perf_counter()
    log.info("%d engine vocabularies read in %.2f s", vocabulary.warm_up(), time.perf_counter() - t_vocab)
    state = AppState(settings=settings, engine=engine, sessions=sessions, catalog=catalog, constants=constants,
                     serving=Serving.build(catalog, constants, calibration))
    if settings.calibration_cv == "background":
        state.cross_validation = CrossValidationProcess(settings.database_url)
        if needs_cv:
            state.cross_validation.ensure()
    if settings.ingest_refit != "inline":
        state.refit_process = RefitProcess(settings.database_url)
        state.refits = RefitThread(state.refit_after_ingests)
        with transaction(sessions) as session:
            waiting = bool(ingest_repo.awaiting_refit(session))
        if waiting:
            state.refits.wake()            # ingests whose refit a stopped worker never ran
    done("calibration")
    state.startup_s = time.perf_counter() - t0
    log.info("catalog and calibration in %.2f s: %d GPUs, %d models, calibration v%s", state.startup_s,
             len(catalog.gpus), len(catalog.models), calibration.version)
    return state
