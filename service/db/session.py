"""Engine, session factory and the transaction boundary.

A request's transaction is owned by its session dependency (service/api/deps.py): committed when the route
returns, rolled back when it raises. One route ends it early: an ingest with ``INGEST_REFIT=sync`` commits its rows
through ``finish`` before it waits for the refit process, which must see them (service/api/benchmarks.py); the
dependency then ends the read that follows. Work outside requests (start-up, calibration jobs) opens one with
``transaction``. Nothing else commits or rolls back; both end a transaction through ``finish``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger(__name__)
T = TypeVar("T")

# Connection attempts of a background process (cross-validation, refit) before it gives up, and the wait before the
# second one, seconds, doubled after each failure (1 + 2 + 4 + 8 + 16 = 31 s of waiting in all). At nice 19 on a
# saturated machine such a process gets a few percent of a core, which may not complete PostgreSQL's handshake
# (its SCRAM authentication is CPU work) within the 5 s connect timeout; the load comes in bursts, so a later
# attempt gets through.
CONNECT_ATTEMPTS = 6
CONNECT_BACKOFF_S = 1.0


class JSONText(str):
    """A JSON document already encoded (pydantic's ``model_dump_json``): a JSON column stores it as it is. A
    recommendation's answer is encoded once, for the response, instead of dumped to a dict and encoded again
    (an answer is tens of kilobytes: encoding it twice is a visible part of a request)."""


def _json_serializer(value: Any) -> str:
    return str(value) if isinstance(value, JSONText) else json.dumps(value)


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        # timeout: seconds a writer waits for SQLite's file lock before failing.
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30},
                               json_serializer=_json_serializer)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.close()

        return engine
    # Connections per process (FastAPI's threadpool runs sync routes on up to 40 threads); connect_timeout
    # in seconds, so an unreachable database fails fast instead of hanging a request.
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20,
                         connect_args={"connect_timeout": 5}, json_serializer=_json_serializer)


def retrying(work: Callable[[], T], attempts: int = CONNECT_ATTEMPTS, backoff_s: float = CONNECT_BACKOFF_S) -> T:
    """``work()``, run again after a failed or lost database connection (``OperationalError``), ``attempts`` times
    in all with a doubling wait: for background processes, which run at the lowest priority. ``work`` must be
    safe to repeat (one transaction, rolled back when it failed). Raises the last error when every attempt failed."""
    for attempt in range(attempts):
        try:
            return work()
        except OperationalError as exc:
            if attempt == attempts - 1:
                raise
            wait_s = backoff_s * 2 ** attempt
            log.warning("database connection failed (%s), attempt %d of %d; again in %.0f s",
                        type(exc.orig).__name__, attempt + 1, attempts, wait_s)
            time.sleep(wait_s)
    raise AssertionError("unreachable")


def wait_for_database(engine: Engine) -> None:
    """Return once a connection to the database opens (``retrying``'s bound)."""

    def connect() -> None:
        with engine.connect():
            pass

    retrying(connect)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


_AFTER_COMMIT = "after_commit"


def after_commit(session: Session, action: Callable[[], None]) -> None:
    """Run ``action`` once ``session``'s transaction has committed, never if it rolls back: for work that must see
    the data stored (another session reading it, a new calibration put to use)."""
    session.info.setdefault(_AFTER_COMMIT, []).append(action)


def finish(session: Session, ok: bool) -> None:
    """Commit (then run the after-commit actions) when ``ok``, else roll back; close the session either way."""
    try:
        if ok:
            session.commit()
            for action in session.info.pop(_AFTER_COMMIT, []):
                action()
        else:
            session.rollback()
    finally:
        session.info.pop(_AFTER_COMMIT, None)
        session.close()


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One transaction outside a request: committed on success, rolled back on any error."""
    session = factory()
    try:
        yield session
    except BaseException:
        finish(session, ok=False)
        raise
    finish(session, ok=True)
