"""Search latency while the calibration is refitted after an ingest, against no refit, in the same run, for each
INGEST_REFIT mode (not a test: it prints figures).

For each mode, starts uvicorn (one worker on a fresh PostgreSQL schema as load.py does, or a SQLite file;
CALIBRATION_CV=off so that only the refit runs besides the searches) and alternates two phases:

- idle: the search_speed.py requirements one after another, back to back;
- refit: a benchmark ingest (unique rows) is posted from another thread; the same searches run back to back until
  the new calibration version is in use (sync: the ingest's answer; background: GET /v1/calibration shows it).
  Only searches that start and end inside that window count.

Prints p50/p99 of each phase and their ratio, and how long the refits took. On SQLite a search waits for the
refit's whole transaction (both write: the search stores its answer), so few searches fall inside a refit.

    python benchmarks/refit_interference.py                       # both modes, 3 cycles each
    python benchmarks/refit_interference.py --modes background --cycles 5
    python benchmarks/refit_interference.py --sqlite
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
from load import WRITE_KEY, _free_port, ingest_body, server, wait_ready
from search_speed import REQUIREMENTS

ROOT = Path(__file__).resolve().parents[1]


def timed_search(client: httpx.Client, body: dict[str, object]) -> tuple[float, float]:
    t0 = time.perf_counter()
    client.post("/v1/recommendations", json=body).raise_for_status()
    return t0, time.perf_counter()


def refit_window(url: str, mode: str, done: threading.Event, out: list[float]) -> None:
    """Posts an ingest and sets ``done`` once its calibration version is in use; ``out`` gets (start, end)."""
    with httpx.Client(base_url=url, timeout=600) as c:
        before = c.get("/v1/calibration").json()["version"]
        t0 = time.perf_counter()
        r = c.post("/v1/benchmarks", json=ingest_body(f"refit-{uuid.uuid4().hex[:8]}"),
                   headers={"Authorization": f"Bearer {WRITE_KEY}"})
        r.raise_for_status()
        if mode == "background":
            while c.get("/v1/calibration").json()["version"] == before:
                time.sleep(0.05)
        out += [t0, time.perf_counter()]
    done.set()


@contextlib.contextmanager
def sqlite_server(port: int) -> Iterator[str]:
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "DATABASE_URL": f"sqlite:///{d}/refit.db", "CALIBRATION_CV": "off",
               "ADVISOR_API_KEY": WRITE_KEY, "CALIBRATION_REFRESH_S": "3600", "LOG_LEVEL": "WARNING"}
        proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "service.main:app", "--port", str(port),
                                 "--log-level", "warning"], cwd=ROOT, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, proc)
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=60)


@contextlib.contextmanager
def postgres_server(port: int) -> Iterator[str]:
    with server(1, port, ROOT, "off") as (url, _, _):
        yield url


def run_mode(mode: str, cycles: int, port: int, sqlite: bool,
             verbose: bool = False) -> tuple[list[float], list[float], list[float]]:
    idle: list[float] = []
    busy: list[float] = []
    refit_s: list[float] = []
    os.environ["INGEST_REFIT"] = mode          # the server's environment starts from this one
    serve = sqlite_server if sqlite else postgres_server
    with serve(port) as url, httpx.Client(base_url=url, timeout=300) as client:
        for body in REQUIREMENTS:                                  # warm-up
            timed_search(client, body)
        for _ in range(cycles):
            idle += [e - s for s, e in (timed_search(client, b) for b in REQUIREMENTS)]
            done = threading.Event()
            window: list[float] = []
            spans = []
            poster = threading.Thread(target=refit_window, args=(url, mode, done, window))
            poster.start()
            i = 0
            while not done.is_set():
                spans.append(timed_search(client, REQUIREMENTS[i % len(REQUIREMENTS)]))
                i += 1
            poster.join()
            inside = [e - s for s, e in spans if s >= window[0] and e <= window[1]]
            busy += inside
            refit_s.append(window[1] - window[0])
            if verbose and inside:
                print(f"  refit {len(refit_s)}: {refit_s[-1]:.1f} s, {len(inside)} searches inside, p50 "
                      f"{np.median(inside) * 1e3:.1f} ms, max {max(inside) * 1e3:.1f} ms", flush=True)
    return idle, busy, refit_s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", nargs="+", default=["sync", "background"], choices=["sync", "background", "inline"])
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--sqlite", action="store_true", help="a SQLite file instead of PostgreSQL")
    ap.add_argument("--verbose", action="store_true", help="each refit's duration and searches")
    args = ap.parse_args(argv)
    for mode in args.modes:
        idle, busy, refit_s = run_mode(mode, args.cycles, args.port or _free_port(), args.sqlite, args.verbose)
        i, b = np.asarray(idle) * 1e3, np.asarray(busy) * 1e3
        print(f"INGEST_REFIT={mode}: {len(refit_s)} refits, {np.median(refit_s):.1f} s median "
              f"(ingest posted -> new version in use)")
        print(f"  {len(i)} searches, no refit:      p50 {np.percentile(i, 50):7.1f} ms, "
              f"p99 {np.percentile(i, 99):7.1f} ms")
        if len(b):
            print(f"  {len(b)} searches, during a refit: p50 {np.percentile(b, 50):7.1f} ms, "
                  f"p99 {np.percentile(b, 99):7.1f} ms")
            print(f"  ratio: p50 {np.percentile(b, 50) / np.percentile(i, 50):.2f}, "
                  f"p99 {np.percentile(b, 99) / np.percentile(i, 99):.2f}")
        else:
            print("  no search fell wholly inside a refit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
