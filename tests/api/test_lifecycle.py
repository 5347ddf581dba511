"""A real uvicorn, as deployed: the port opens before the service is ready, a full worker sheds load with 503 and
Retry-After while /healthz stays fast, and SIGTERM lets an ingest in flight commit."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
WRITE_KEY = "lifecycle-write-key"
# This project's helpers may use 127.0.0.1:8400-8499 (the machine is shared): a free port from that range.
PORTS = range(8440, 8500)
BIG_SEARCH = {"model": "meta-llama/Llama-3.1-70B-Instruct", "scenario": "api",
              "workload": {"input_tokens": 2048, "output_tokens": 512, "concurrency": 128}}


def _free_port() -> int:
    return free_port(PORTS)


@contextmanager
def uvicorn(tmp_path: Path, **env: str) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    db = tmp_path / "advisor.db"
    port = _free_port()
    full_env = {**os.environ, "DATABASE_URL": f"sqlite:///{db}", "CALIBRATION_CV": "off", "LOG_LEVEL": "WARNING",
                "ADVISOR_API_KEY": WRITE_KEY, **env}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "service.main:app", "--port", str(port),
                             "--log-level", "warning", "--timeout-graceful-shutdown", "60"], cwd=ROOT, env=full_env)
    try:
        yield f"http://127.0.0.1:{port}", proc, db
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=60)


def _wait(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 300) -> None:
    """Until /readyz is 200 with nothing warming."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "server exited"
        try:
            r = httpx.get(f"{url}/readyz", timeout=5)
            if r.status_code == 200 and not r.json()["warming"]:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError("not ready in time")


def test_port_opens_at_once_and_readyz_says_what_is_loading(tmp_path: Path) -> None:
    with uvicorn(tmp_path, STARTUP_MODE="background") as (url, proc, _):
        seen: list[tuple[int, dict[str, Any]]] = []
        early_heavy: httpx.Response | None = None
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert proc.poll() is None, "server exited"
            try:
                health = httpx.get(f"{url}/healthz", timeout=5)
            except httpx.ConnectError:
                time.sleep(0.05)
                continue
            assert health.status_code == 200
            ready = httpx.get(f"{url}/readyz", timeout=5)
            seen.append((ready.status_code, ready.json()))
            if ready.status_code == 503 and early_heavy is None:
                early_heavy = httpx.post(f"{url}/v1/predictions", json=BIG_SEARCH, timeout=5)
            if ready.status_code == 200:
                break
            time.sleep(0.05)
        # the port was open (healthz 200) while the service was still loading
        status, body = seen[0]
        assert status == 503, f"ready at the first answer: start-up did not run behind an open port ({body})"
        assert body["loading"] and set(body["loading"]) <= {"catalog", "calibration"}
        assert body["detail"].startswith("still loading")
        assert seen[-1][0] == 200
        # a request that needs the service meanwhile is told to come back, not held
        assert early_heavy is not None and early_heavy.status_code == 503
        assert early_heavy.headers["retry-after"] == "1"


def test_full_worker_sheds_with_retry_after_while_healthz_stays_fast(tmp_path: Path) -> None:
    with uvicorn(tmp_path, STARTUP_MODE="blocking", MAX_IN_FLIGHT="1") as (url, proc, _):
        _wait(url, proc)

        async def load() -> tuple[list[tuple[httpx.Response, float]], list[float]]:
            async with httpx.AsyncClient(base_url=url, timeout=60) as c:
                async def one() -> tuple[httpx.Response, float]:
                    t0 = time.perf_counter()
                    r = await c.post("/v1/recommendations", json=BIG_SEARCH)
                    return r, time.perf_counter() - t0

                async def probe() -> list[float]:
                    lat = []
                    for _ in range(20):
                        t0 = time.perf_counter()
                        assert (await c.get("/healthz")).status_code == 200
                        lat.append(time.perf_counter() - t0)
                        await asyncio.sleep(0.01)
                    return lat

                searches = asyncio.gather(*(one() for _ in range(8)))
                health = await probe()
                return await searches, health

        answers, health = asyncio.run(load())
    codes = sorted(r.status_code for r, _ in answers)
    assert 200 in codes and 503 in codes and set(codes) == {200, 503}, codes
    slowest_ok = max(s for r, s in answers if r.status_code == 200)
    for r, seconds in answers:
        if r.status_code == 503:
            assert r.headers["retry-after"] == "1"
            assert r.headers["content-type"] == "application/problem+json"
            assert r.json()["title"] == "Busy" and "MAX_IN_FLIGHT" in r.json()["detail"]
            assert seconds < slowest_ok          # refused at once, not after waiting for a slot
    assert max(health) < 0.5, f"/healthz took {max(health):.3f} s behind the searches"


def test_sigterm_lets_an_ingest_in_flight_commit_whole(tmp_path: Path) -> None:
    rows = [{"row_id": f"drain-{i}", "source": "graceful shutdown test", "engine": "vllm", "engine_version": "0.11.0",
             "gpu": "l40s", "gpu_count": 1, "model": "meta-llama/Llama-3.1-8B-Instruct", "weight_dtype": "fp8",
             "tp": 1, "mode": "concurrency", "input_tokens": 1024, "output_tokens": 128, "concurrency": 1 + i,
             "output_tok_s": 100.0 + 10 * i, "ttft_ms": 150.0, "ttft_stat": "mean", "tpot_ms": 9.0,
             "tpot_stat": "mean"} for i in range(200)]
    with uvicorn(tmp_path, STARTUP_MODE="blocking") as (url, proc, db):
        _wait(url, proc)

        async def run() -> tuple[httpx.Response, bool]:
            async with httpx.AsyncClient(base_url=url, timeout=120) as c:
                ingest = asyncio.create_task(c.post("/v1/benchmarks", json={"format": "rows", "rows": rows},
                                                    headers={"Authorization": f"Bearer {WRITE_KEY}"}))
                deadline = time.monotonic() + 60
                while 'advisor_heavy_in_flight{kind="ingest"} 1.0' not in (await c.get("/metrics")).text:
                    assert time.monotonic() < deadline and not ingest.done(), "the ingest was never in flight"
                    await asyncio.sleep(0.005)
                proc.send_signal(signal.SIGTERM)
                await asyncio.sleep(0.3)
                refused = False
                if not ingest.done():          # the listening socket is closed at once
                    try:
                        async with httpx.AsyncClient(base_url=url, timeout=5) as fresh:
                            await fresh.get("/healthz")
                    except httpx.ConnectError:
                        refused = True
                    assert refused, "a new connection was accepted after SIGTERM"
                return await ingest, refused

        answer, _ = asyncio.run(run())
        # uvicorn re-raises the signal once it has shut down cleanly (so a supervisor sees why it ended)
        assert proc.wait(timeout=90) in (0, -signal.SIGTERM)
    assert answer.status_code == 201, answer.text
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT count(*), count(DISTINCT row_id) FROM measurements "
                              "WHERE row_id LIKE 'user:drain-%'").fetchone()
    assert stored == (len(rows), len(rows))


@pytest.mark.parametrize("limit", ["0", "3"])
def test_the_bound_defaults_to_the_cores(limit: str) -> None:
    from service.admission import limit_for, usable_cores
    from service.settings import Settings

    assert limit_for(Settings(max_in_flight=int(limit))) == (int(limit) or usable_cores())
