"""Load and scale-out (not a test: it prints figures).

Starts uvicorn with several workers on a fresh PostgreSQL schema, then runs N concurrent clients for a
fixed time, mixing recommendations, predictions, catalog reads and benchmark ingests (each ingest a
unique set of rows). Prints requests/s, p50/p99 latency per kind and overall, and the error count
(5xx, transport errors, or any status a well-formed request should not get). Afterwards it checks in
the database that every accepted ingest is stored exactly once, and that a calibration made through
one worker (by an ingest) is used by every worker within CALIBRATION_REFRESH_S.

    python benchmarks/load.py                          # 64 clients, 60 s, 2 workers
    python benchmarks/load.py --clients 16 --seconds 20
    TEST_POSTGRES_URL=postgresql+psycopg://user@host:5432/db python benchmarks/load.py
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import socket
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parents[1]
PG_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
WRITE_KEY = "load-test-key"
REFRESH_S = 2.0            # CALIBRATION_REFRESH_S given to the workers

# The mix: kind -> share of requests (ingests refit the calibration, seconds each: kept rare).
MIX = {"prediction": 0.40, "recommendation": 0.25, "catalog": 0.33, "ingest": 0.02}

PREDICTIONS = [
    {"model": "meta-llama/Llama-3.1-8B-Instruct", "deployment": {"gpu": "l4"},
     "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 16}},
    {"model": "meta-llama/Llama-3.1-70B-Instruct",
     "deployment": {"gpu": "h100-sxm", "tp": 4, "weight_dtype": "fp8", "kv_dtype": "fp8", "engine": "trtllm"},
     "workload": {"input_tokens": 2048, "output_tokens": 128, "concurrency": 64}},
    {"model": "Qwen/Qwen3-30B-A3B", "deployment": {"gpu": "h200-sxm", "tp": 2, "weight_dtype": "fp8"},
     "workload": {"input_tokens": 1024, "output_tokens": 512, "request_rate": 4.0}},
]
RECOMMENDATIONS = [
    {"model": "meta-llama/Llama-3.1-8B-Instruct", "workload": {"input_tokens": 1024, "output_tokens": 256,
                                                               "concurrency": 50}, "scenario": "chat"},
    {"model": "meta-llama/Llama-3.1-70B-Instruct", "workload": {"input_tokens": 2048, "output_tokens": 512,
                                                                "concurrency": 128}, "scenario": "api"},
    {"model": "meta-llama/Llama-2-7b-hf", "workload": {"input_tokens": 256, "output_tokens": 256, "concurrency": 50},
     "sla": {"ttft_ms": 200, "percentile": "p95"}, "constraints": {"gpus": ["a10"], "max_gpus": 1}},
]
CATALOG = ["/v1/gpus", "/v1/gpus/h100-sxm", "/v1/models/meta-llama/Llama-3.1-70B-Instruct", "/v1/quantizations",
           "/v1/benchmarks?gpu=h100-sxm&limit=20", "/v1/calibration", "/healthz"]


def ingest_body(tag: str) -> dict[str, Any]:
    """Two rows of a made-up lab run (a load-test artefact: stored in a throwaway schema, never shipped)."""
    rows = [{"row_id": f"load-{tag}-{i}", "source": f"load test {tag}", "engine": "vllm", "engine_version": "0.11.0",
             "gpu": "l40s", "gpu_count": 1, "model": "meta-llama/Llama-3.1-8B-Instruct", "weight_dtype": "fp8",
             "kv_dtype": "auto", "tp": 1, "pp": 1, "dp": 1, "mode": "concurrency", "input_tokens": 1024,
             "output_tokens": 128, "concurrency": 8 * (i + 1), "output_tok_s": 900.0 + 100 * i,
             "ttft_ms": 150.0 + 20 * i, "ttft_stat": "mean", "tpot_ms": 9.0 + i, "tpot_stat": "mean"}
            for i in range(2)]
    return {"format": "rows", "rows": rows}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def server(workers: int) -> Iterator[tuple[str, str]]:
    """uvicorn with ``workers`` processes on a fresh PostgreSQL schema; yields (base url, database url)."""
    schema = f"load_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    db_url = f"{PG_URL}{'&' if '?' in PG_URL else '?'}options=-csearch_path%3D{schema}"
    port = _free_port()
    env = {**os.environ, "DATABASE_URL": db_url, "CALIBRATION_CV": "off", "ADVISOR_API_KEY": WRITE_KEY,
           "CALIBRATION_REFRESH_S": str(REFRESH_S), "LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "service.main:app", "--port", str(port),
                             "--workers", str(workers), "--log-level", "warning"], cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        ready = 0
        while ready < 5:                       # several answers in a row: every worker has started
            if time.monotonic() > deadline:
                raise RuntimeError("server not ready in 600 s")
            try:
                ready = ready + 1 if httpx.get(f"{url}/readyz", timeout=5).status_code == 200 else 0
            except httpx.HTTPError:
                ready = 0
            time.sleep(0.5)
        yield url, db_url
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


async def run_load(url: str, clients: int, seconds: float) -> dict[str, Any]:
    lat: dict[str, list[float]] = defaultdict(list)
    errors: list[str] = []
    accepted: list[str] = []
    kinds, weights = list(MIX), list(MIX.values())
    stop = time.monotonic() + seconds

    async def client(cid: int) -> None:
        rng = random.Random(cid)
        n = 0
        async with httpx.AsyncClient(base_url=url, timeout=120) as c:
            while time.monotonic() < stop:
                kind = rng.choices(kinds, weights)[0]
                t0 = time.perf_counter()
                try:
                    if kind == "prediction":
                        r = await c.post("/v1/predictions", json=rng.choice(PREDICTIONS))
                        ok = r.status_code == 200
                    elif kind == "recommendation":
                        r = await c.post("/v1/recommendations", json=rng.choice(RECOMMENDATIONS))
                        ok = r.status_code == 200
                    elif kind == "catalog":
                        r = await c.get(rng.choice(CATALOG))
                        ok = r.status_code == 200
                    else:
                        tag = f"{cid}-{n}"
                        n += 1
                        r = await c.post("/v1/benchmarks", json=ingest_body(tag),
                                         headers={"Authorization": f"Bearer {WRITE_KEY}"})
                        ok = r.status_code == 201
                        if ok:
                            accepted.append(tag)
                except httpx.HTTPError as exc:
                    errors.append(f"{kind}: {type(exc).__name__}")
                    continue
                lat[kind].append(time.perf_counter() - t0)
                if not ok:
                    errors.append(f"{kind}: {r.status_code} {r.text[:200]}")

    t0 = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    return {"lat": lat, "errors": errors, "accepted": accepted, "elapsed": time.perf_counter() - t0}


def check_stored_once(db_url: str, accepted: list[str]) -> tuple[int, int, int]:
    """(rows expected, rows stored, distinct row ids stored) for the load test's ingests."""
    eng = create_engine(db_url)
    with eng.connect() as conn:
        stored, distinct = conn.execute(text(
            "SELECT count(*), count(DISTINCT row_id) FROM measurements WHERE row_id LIKE 'user:load-%'")).one()
    eng.dispose()
    return 2 * len(accepted), int(stored), int(distinct)


def check_calibration_spread(url: str) -> tuple[int, float, int]:
    """Ingest through one worker, then ask every worker (by repeated predictions) which calibration it uses.
    Returns (new version, seconds until 30 answers in a row used it, answers seen)."""
    r = httpx.post(f"{url}/v1/benchmarks", json=ingest_body(f"spread-{uuid.uuid4().hex[:6]}"),
                   headers={"Authorization": f"Bearer {WRITE_KEY}"}, timeout=300)
    r.raise_for_status()
    version = int(r.json()["calibration_version"])
    t0 = time.monotonic()
    streak = seen = 0
    while streak < 30:
        if time.monotonic() - t0 > 10 * REFRESH_S + 30:
            raise RuntimeError(f"workers still not on calibration v{version}")
        p = httpx.post(f"{url}/v1/predictions", json=PREDICTIONS[0], timeout=30).json()
        seen += 1
        streak = streak + 1 if p["confidence"]["calibration_version"] >= version else 0
        time.sleep(0.05)
    return version, time.monotonic() - t0, seen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    with server(args.workers) as (url, db_url):
        out = asyncio.run(run_load(url, args.clients, args.seconds))
        expected, stored, distinct = check_stored_once(db_url, out["accepted"])
        version, spread_s, seen = check_calibration_spread(url)
    lat, errors = out["lat"], out["errors"]
    total = sum(len(v) for v in lat.values())
    print(f"{args.clients} clients, {args.workers} uvicorn workers, PostgreSQL, {out['elapsed']:.0f} s: "
          f"{total} requests, {total / out['elapsed']:.1f} requests/s, {len(errors)} errors")
    for kind in [*MIX, "all"]:
        v = np.asarray([x for vals in lat.values() for x in vals] if kind == "all" else lat.get(kind, [])) * 1e3
        if len(v):
            print(f"  {kind:<15} n={len(v):>6}  p50 {np.percentile(v, 50):8.1f} ms  p99 {np.percentile(v, 99):8.1f} ms")
    for e in errors[:10]:
        print("  error:", e)
    print(f"ingests accepted {len(out['accepted'])}: rows expected {expected}, stored {stored}, distinct {distinct} "
          f"({'exactly once' if expected == stored == distinct else 'MISMATCH'})")
    print(f"calibration v{version} made through one worker: used by every answer within {spread_s:.1f} s "
          f"({seen} predictions; CALIBRATION_REFRESH_S={REFRESH_S:g})")
    return 0 if not errors and expected == stored == distinct else 1


if __name__ == "__main__":
    sys.exit(main())
