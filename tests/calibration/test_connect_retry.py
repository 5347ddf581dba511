"""The background processes (cross-validation, refit after ingests) retry a failed database connection: at nice 19
on a saturated machine a connection can time out, and the process must not die of it. Here the database's port
first refuses connections (nothing listens on it), then relays to the real PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url

from service.main import create_app
from service.settings import Settings
from tests.db_proxy import UPSTREAM, Proxy

ROOT = Path(__file__).resolve().parents[2]
PROCESS_TIMEOUT_S = 180.0           # a process start (imports, catalog, tables) at nice 19 on a loaded machine
RETRIED = "database connection failed"


@pytest.fixture
def closed_port_database(db_url: str) -> Iterator[tuple[str, Proxy]]:
    """The URL of a migrated and loaded database on a port nothing listens on yet, and the relay that will."""
    if not db_url.startswith("postgresql"):
        pytest.skip("the database's port is a TCP relay: PostgreSQL only")
    with TestClient(create_app(Settings(database_url=db_url, calibration_cv="off"))):
        pass
    proxy = Proxy(UPSTREAM)
    proxy.start()                           # takes a free port, which it gives back at once: nothing listens now
    proxy.cut()
    yield make_url(db_url).set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False), proxy
    proxy.cut()


def _start(args: list[str], url: str) -> subprocess.Popen[str]:
    env = {**os.environ, "DATABASE_URL": url, "LOG_LEVEL": "INFO", "LOG_FORMAT": "text"}
    return subprocess.Popen([sys.executable, "-m", *args], cwd=ROOT, env=env, text=True, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _open_after_first_failure(proc: subprocess.Popen[str], proxy: Proxy) -> None:
    """Wait until the process says a connection failed (the port refused it), then let the database through; fails
    when the process ends first (it gave up at once)."""
    assert proc.stderr is not None
    timer = threading.Timer(PROCESS_TIMEOUT_S, proc.kill)
    timer.start()
    try:
        seen: list[str] = []
        while line := proc.stderr.readline():
            seen.append(line)
            if RETRIED in line:
                break
        else:
            pytest.fail(f"the process ended without retrying: {''.join(seen)[-3000:]}")
    finally:
        timer.cancel()
    proxy.start()
    threading.Thread(target=proc.stderr.read, daemon=True).start()      # drain the rest of its log


def test_the_cross_validation_process_retries_the_connection(closed_port_database: tuple[str, Proxy]) -> None:
    url, proxy = closed_port_database
    proc = _start(["service.calibration.jobs", "--no-cross-validation"], url)
    _open_after_first_failure(proc, proxy)
    assert proc.wait(timeout=PROCESS_TIMEOUT_S) == 0


def test_the_refit_process_retries_the_connection(closed_port_database: tuple[str, Proxy]) -> None:
    url, proxy = closed_port_database
    proc = _start(["service.calibration.ingest_refit"], url)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write("refit\n")
        proc.stdin.flush()
        _open_after_first_failure(proc, proxy)
        # it connected, read the catalog, and found no ingest waiting
        assert json.loads(proc.stdout.readline()) == {"done": None}
    finally:
        proc.stdin.close()
    assert proc.wait(timeout=PROCESS_TIMEOUT_S) == 0
