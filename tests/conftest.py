"""Fixtures: real databases (SQLite always; PostgreSQL when TEST_POSTGRES_URL is reachable) through the
real migrations, and the real app over HTTP."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import settings
from sqlalchemy import Engine, create_engine, text

from service.main import create_app
from service.settings import Settings

# Property tests draw the same examples on every run (derandomize), so CI is reproducible and a failure can
# be replayed; HYPOTHESIS_PROFILE=explore draws fresh ones (and keeps a local database of failures).
settings.register_profile("deterministic", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

# Apps under test load everything before their first request (the server's default opens the port first:
# tests/api/test_lifecycle.py checks that one through a real uvicorn).
os.environ.setdefault("STARTUP_MODE", "blocking")
# Apps under test refit the calibration inside the ingest request (the server's default), so that its answer says
# what the refit did (tests/calibration/test_ingest_refit.py checks INGEST_REFIT=background).
os.environ.setdefault("INGEST_REFIT", "sync")

PG_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def _pg_reachable() -> str | None:
    try:
        eng = create_engine(PG_URL, connect_args={"connect_timeout": 3})
        with eng.connect() as conn:
            conn.execute(text("SELECT 1"))
        eng.dispose()
        return None
    except Exception as exc:  # the reason is shown in the skip message
        return f"PostgreSQL at {PG_URL} not reachable: {type(exc).__name__}: {exc}"


_PG_SKIP = _pg_reachable()


@contextmanager
def _database(kind: str, directory: Path) -> Iterator[str]:
    """The URL of an empty database of ``kind``: a SQLite file in ``directory``, or a fresh PostgreSQL schema
    (dropped afterwards)."""
    if kind == "sqlite":
        yield f"sqlite:///{directory / 'advisor.db'}"
        return
    if _PG_SKIP:
        if os.environ.get("CI"):
            pytest.fail(_PG_SKIP)
        pytest.skip(_PG_SKIP)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


_DB_KINDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture(params=_DB_KINDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database of each kind; each test gets its own (a fresh PostgreSQL schema)."""
    with _database(request.param, tmp_path) as url:
        yield url


@pytest.fixture(scope="module", params=_DB_KINDS)
def module_db_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An empty database of each kind shared by the tests of one module (for an app that is slow to start)."""
    with _database(request.param, tmp_path_factory.mktemp("db")) as url:
        yield url


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    from service.db.session import make_engine

    eng = make_engine(db_url)
    yield eng
    eng.dispose()


@pytest.fixture(scope="session")
def client() -> Iterator[TestClient]:
    """The real app on a SQLite file, started once for the API tests."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        # leave-one-source-out validation refits the model ~30 times (minutes): benchmarks/accuracy.py runs it
        settings = Settings(database_url=f"sqlite:///{d}/api.db", advisor_api_key="test-write-key",
                            calibration_cv="off")
        with TestClient(create_app(settings)) as c:
            yield c
