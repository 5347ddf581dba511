"""Start-up: migrate, load the catalog and the shipped measurements, and build what the core needs."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from gpu_catalog.loader import DATA_DIR, PUBLISHED_CSV, Catalog, load_catalog, load_measurements
from service.db import migrate
from service.db.session import make_engine, make_sessionmaker, transaction
from service.repository.catalog import read_catalog, stored_hash, sync_catalog
from service.repository.measurements import file_sha256, relink_models, sync_published
from service.settings import Settings

log = logging.getLogger(__name__)

# Any fixed 64-bit number: the PostgreSQL advisory lock that serialises start-up across workers.
_STARTUP_LOCK_ID = 7_420_240_601


@dataclass
class AppState:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    catalog: Catalog
    startup_s: float = 0.0


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
        published_sha = file_sha256(PUBLISHED_CSV.read_bytes())
        with transaction(sessions) as session:
            changed = sync_catalog(session, files)
            added = 0
            if stored_hash(session, "published") != published_sha:
                # Parsing 10k rows is the slow part of start-up: only when the file changed.
                added = sync_published(session, load_measurements(), published_sha)
            if changed:
                relink_models(session)
        log.info("catalog %s; %d shipped measurements added", "reloaded" if changed else "unchanged", added)


def build_state(settings: Settings) -> AppState:
    t0 = time.perf_counter()
    engine = make_engine(settings.database_url)
    sessions = make_sessionmaker(engine)
    if settings.auto_migrate:
        migrate_and_load(engine, sessions)
    elif not migrate.is_at_head(engine):
        raise RuntimeError("database schema is not at head; run `alembic upgrade head` or set AUTO_MIGRATE=1")
    with transaction(sessions) as session:
        catalog = read_catalog(session)
    state = AppState(settings=settings, engine=engine, sessions=sessions, catalog=catalog)
    state.startup_s = time.perf_counter() - t0
    log.info("ready in %.2f s: %d GPUs, %d models", state.startup_s, len(catalog.gpus), len(catalog.models))
    return state
