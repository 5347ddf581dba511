"""Load, shedding and scale-out (not a test: it prints figures).

Starts uvicorn with several workers on a fresh PostgreSQL schema, then runs N concurrent clients for a fixed
time: 60% recommendations, 30% predictions, 10% catalog reads, plus one client posting a benchmark ingest every
``--ingest-every`` seconds (each a unique set of rows, resent until it lands) and, half-way, a recalibration
(``python -m service.calibration.jobs --fit``: a full refit on every stored row, then its leave-one-source-out error,
in its own low-priority process). A separate prober asks ``/healthz`` every 0.1 s, as an orchestrator would.

Clients behave as well-written ones do: a 503 with ``Retry-After`` is "shed" and the client waits that long
before its next request. Prints answered/shed counts, p50/p99 of answered requests by kind and of ``/healthz``,
client timeouts, and every other failure (any 5xx but a 503 with Retry-After, transport errors, statuses a
well-formed request should not get). Afterwards it checks in the database that every ingest landed exactly
once, and that a calibration made through one worker is used by every worker within CALIBRATION_REFRESH_S.
``--soak`` also samples the workers' resident memory.

    python benchmarks/load.py                          # 64 clients, 30 s, 2 workers
    python benchmarks/load.py --clients 16 --seconds 20
    python benchmarks/load.py --seconds 1200 --soak    # the 20-minute soak
    python benchmarks/load.py --seconds 300 --soak --malloc-arena-max default   # glibc's own arenas
    TEST_POSTGRES_URL=postgresql+psycopg://user@host:5432/db python benchmarks/load.py --port 8400
    python benchmarks/load.py --root /path/to/other/checkout   # the same load against another version
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import multiprocessing.queues
import os
import random
import socket
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parents[1]
PG_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
WRITE_KEY = "load-test-key"
REFRESH_S = 2.0            # CALIBRATION_REFRESH_S given to the workers
TIMEOUT_S = 30.0           # a client gives up on a request after this long (counted as a timeout)
RETRY_AFTER_CAP_S = 5.0    # longest wait a client honours before its next request
HEALTH_TIMEOUT_S = 2.0     # an orchestrator's liveness probe timeout
HEALTH_EVERY_S = 0.1

# The mix of the clients' requests: kind -> share.
MIX = {"recommendation": 0.60, "prediction": 0.30, "catalog": 0.10}

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
           "/v1/benchmarks?gpu=h100-sxm&limit=20", "/v1/calibration"]


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


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 600) -> float:
    """Seconds until /readyz answered 200 with nothing warming, five times in a row (every worker started)."""
    t0 = time.monotonic()
    ready = 0
    while ready < 5:
        if time.monotonic() - t0 > timeout_s or proc.poll() is not None:
            raise RuntimeError(f"server not ready in {timeout_s:.0f} s (exit code {proc.poll()})")
        try:
            r = httpx.get(f"{url}/readyz", timeout=5)
            ready = ready + 1 if r.status_code == 200 and not r.json().get("warming") else 0
        except httpx.HTTPError:
            ready = 0
        time.sleep(0.5)
    return time.monotonic() - t0


@contextlib.contextmanager
def server(workers: int, port: int, root: Path, cv: str, log: Path | None = None,
           arenas: str = "2") -> Iterator[tuple[str, str, subprocess.Popen[bytes]]]:
    """uvicorn with ``workers`` processes on a fresh PostgreSQL schema; yields (base url, database url, process)."""
    schema = f"load_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    db_url = f"{PG_URL}{'&' if '?' in PG_URL else '?'}options=-csearch_path%3D{schema}"
    env = {**os.environ, "DATABASE_URL": db_url, "CALIBRATION_CV": cv, "ADVISOR_API_KEY": WRITE_KEY,
           "CALIBRATION_REFRESH_S": str(REFRESH_S), "LOG_LEVEL": "INFO" if log else "WARNING",
           "STARTUP_MODE": "background"}
    env.pop("MALLOC_ARENA_MAX", None)
    if arenas != "default":          # as the Dockerfile sets it
        env["MALLOC_ARENA_MAX"] = arenas
    out = log.open("wb") if log else None
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "service.main:app", "--port", str(port),
                             "--workers", str(workers), "--log-level", "warning", "--timeout-graceful-shutdown",
                             "30"], cwd=root, env=env, stderr=out)
    url = f"http://127.0.0.1:{port}"
    try:
        print(f"server ready in {wait_ready(url, proc):.1f} s", flush=True)
        yield url, db_url, proc
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        if out:
            out.close()
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def processes() -> Iterator[tuple[int, int, bytes, int]]:
    """Every process this user can read: pid, parent pid, command line and resident memory (KiB), from /proc."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            status = (d / "status").read_text()
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            yield (int(d.name), int(fields["PPid"]), (d / "cmdline").read_bytes(),
                   int(fields.get("VmRSS", "0 kB").split()[0]))


def worker_rss_kib(parent: int) -> dict[int, int]:
    """Resident memory of each child process of ``parent`` (the uvicorn workers), KiB."""
    helpers = (b"service.calibration.jobs", b"warm_up", b"resource_tracker")
    return {pid: rss for pid, ppid, cmd, rss in processes()
            if ppid == parent and not any(part in cmd for part in helpers)}


def refit_rss_kib(workers: Iterable[int]) -> dict[int, int]:
    """Resident memory of the workers' refit processes (service/calibration/ingest_refit.py), KiB."""
    parents = set(workers)
    return {pid: rss for pid, ppid, cmd, rss in processes()
            if ppid in parents and b"service.calibration.ingest_refit" in cmd}


class Tally:
    def __init__(self) -> None:
        self.lat: dict[str, list[float]] = defaultdict(list)      # answered requests, seconds
        self.shed: dict[str, int] = defaultdict(int)
        self.timeouts: list[str] = []
        self.errors: list[str] = []
        self.health: list[float] = []
        self.landed: list[str] = []       # ingest tags that got 201 or 200 (duplicate)
        self.unlanded: list[str] = []
        self.ingest_tries = 0
        self.refits: dict[str, int] = defaultdict(int)             # ingest answers by calibration.refit
        self.by_path: dict[str, list[float]] = defaultdict(list)    # catalog reads by path


async def _request(c: httpx.AsyncClient, kind: str, rng: random.Random) -> httpx.Response:
    if kind == "prediction":
        return await c.post("/v1/predictions", json=rng.choice(PREDICTIONS))
    if kind == "recommendation":
        return await c.post("/v1/recommendations", json=rng.choice(RECOMMENDATIONS))
    return await c.get(rng.choice(CATALOG))


def _path(r: httpx.Response) -> str:
    return r.request.url.raw_path.decode().split("?")[0]


def _retry_after(r: httpx.Response) -> float | None:
    """The wait a 503 asks for, or None when it is not a retryable 503."""
    if r.status_code != 503 or "retry-after" not in r.headers:
        return None
    return min(float(r.headers["retry-after"]), RETRY_AFTER_CAP_S)


async def run_load(url: str, clients: int, seconds: float, ingest_every_s: float, recalibrate: bool,
                   db_url: str, root: Path) -> tuple[Tally, float, dict[str, Any]]:
    t = Tally()
    kinds, weights = list(MIX), list(MIX.values())
    recal: dict[str, Any] = {}

    # every client made before the clock starts: making one costs ~40 ms of CPU (its SSL context), which
    # otherwise lands in the first requests' latencies
    pool = [httpx.AsyncClient(base_url=url, timeout=TIMEOUT_S) for _ in range(clients + 1)]

    async def client(cid: int) -> None:
        rng = random.Random(cid)
        async with pool[cid] as c:
            while time.monotonic() < stop:
                kind = rng.choices(kinds, weights)[0]
                t0 = time.perf_counter()
                try:
                    r = await _request(c, kind, rng)
                except httpx.TimeoutException:
                    t.timeouts.append(kind)
                    continue
                except httpx.HTTPError as exc:
                    t.errors.append(f"{kind}: {type(exc).__name__}")
                    continue
                wait = _retry_after(r)
                if wait is not None:
                    t.shed[kind] += 1
                    await asyncio.sleep(wait)
                elif r.status_code == 200:
                    t.lat[kind].append(time.perf_counter() - t0)
                    if kind == "catalog":
                        t.by_path[_path(r)].append(t.lat[kind][-1])
                else:
                    t.errors.append(f"{kind}: {r.status_code} {r.text[:200]}")

    async def ingester() -> None:
        n = 0
        async with pool[clients] as c:
            while time.monotonic() < stop:
                tag = f"{uuid.uuid4().hex[:8]}-{n}"
                n += 1
                body = ingest_body(tag)
                for _ in range(20):                  # resent until it lands: the same content lands once
                    t.ingest_tries += 1
                    t0 = time.perf_counter()
                    try:
                        r = await c.post("/v1/benchmarks", json=body, headers={"Authorization": f"Bearer {WRITE_KEY}"})
                    except httpx.HTTPError as exc:
                        t.errors.append(f"ingest: {type(exc).__name__} (resent)")
                        await asyncio.sleep(1.0)
                        continue
                    if r.status_code in (200, 201):
                        t.lat["ingest"].append(time.perf_counter() - t0)
                        outcome = r.json().get("calibration") or {}
                        t.refits[outcome.get("refit", "?") if r.status_code == 201 else "duplicate"] += 1
                        t.landed.append(tag)
                        break
                    wait = _retry_after(r)
                    if wait is None:
                        t.errors.append(f"ingest: {r.status_code} {r.text[:200]}")
                        break
                    t.shed["ingest"] += 1
                    await asyncio.sleep(wait)
                else:
                    t.unlanded.append(tag)
                await asyncio.sleep(ingest_every_s)

    async def recalibration() -> None:
        await asyncio.sleep(seconds / 2)
        t0 = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "service.calibration.jobs", "--fit", "--low-priority", cwd=root,
            env={**os.environ, "DATABASE_URL": db_url, "LOG_LEVEL": "WARNING"},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        try:   # it runs at nice 19: on a busy machine it may not finish within the run
            out, _ = await asyncio.wait_for(proc.communicate(), timeout=max(stop - time.monotonic(), 0) + 60)
        except TimeoutError:
            proc.terminate()
            await proc.wait()
            recal.update(rc="(stopped)", s=time.perf_counter() - t0, out=["not finished 60 s after the load ended"])
            return
        recal.update(rc=proc.returncode, s=time.perf_counter() - t0, out=out.decode().strip().splitlines()[-2:])

    stop = time.monotonic() + seconds

    async def loaders() -> float:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(i) for i in range(clients)), *([ingester()] if ingest_every_s > 0 else []))
        return time.perf_counter() - t0

    # the prober is its own process, as an orchestrator is: its figures do not wait for this one's event loop
    ctx = multiprocessing.get_context("spawn")
    results: multiprocessing.queues.Queue[tuple[list[float], list[str], list[str]]] = ctx.Queue()
    probe = ctx.Process(target=prober, args=(url, seconds, results))
    probe.start()
    elapsed = (await asyncio.gather(loaders(), *([recalibration()] if recalibrate else [])))[0]
    t.health, timeouts, errors = await asyncio.to_thread(results.get, timeout=seconds + 120)
    probe.join()
    t.timeouts += timeouts
    t.errors += errors
    return t, elapsed, recal


def prober(url: str, seconds: float, results: multiprocessing.queues.Queue[Any]) -> None:
    """GET /healthz every HEALTH_EVERY_S for ``seconds``: (latencies, timeouts, failures) into ``results``."""
    lat: list[float] = []
    timeouts: list[str] = []
    errors: list[str] = []
    stop = time.monotonic() + seconds
    with httpx.Client(base_url=url, timeout=HEALTH_TIMEOUT_S) as c:
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            try:
                r = c.get("/healthz")
                if r.status_code == 200:
                    lat.append(time.perf_counter() - t0)
                else:
                    errors.append(f"healthz: {r.status_code}")
            except httpx.TimeoutException:
                timeouts.append("healthz")
            except httpx.HTTPError as exc:
                errors.append(f"healthz: {type(exc).__name__}")
            time.sleep(HEALTH_EVERY_S)
    results.put((lat, timeouts, errors))


def check_stored_once(db_url: str, landed: list[str]) -> tuple[int, int, int, int]:
    """(rows expected, rows stored for landed ingests, distinct row ids among them, rows of any other load ingest)."""
    eng = create_engine(db_url)
    with eng.connect() as conn:
        rows = conn.execute(text("SELECT row_id FROM measurements WHERE row_id LIKE 'user:load-%'")).scalars().all()
    eng.dispose()
    want = {f"user:load-{tag}-{i}" for tag in landed for i in range(2)}
    mine = [r for r in rows if r in want]
    return len(want), len(mine), len(set(mine)), len(rows) - len(mine)


def _refit_stored(url: str, previous: int) -> int:
    """The first calibration version above ``previous`` that GET /v1/calibration shows."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < 10 * REFRESH_S + 300:
        r = httpx.get(f"{url}/v1/calibration", timeout=30)
        if r.status_code == 200 and r.json()["version"] > previous:
            return int(r.json()["version"])
        time.sleep(0.2)
    raise RuntimeError(f"no calibration version after v{previous} was stored")


def check_calibration_spread(url: str) -> tuple[int, float, int]:
    """Ingest through one worker, then ask every worker (by repeated predictions) which calibration it uses.
    Returns (new version, seconds until 30 answers in a row used it, answers seen)."""
    r = httpx.post(f"{url}/v1/benchmarks", json=ingest_body(f"spread-{uuid.uuid4().hex[:6]}"),
                   headers={"Authorization": f"Bearer {WRITE_KEY}"}, timeout=300)
    r.raise_for_status()
    answer = r.json()
    version = answer["calibration_version"]
    if version is None:          # INGEST_REFIT=background: the refit is stored after the answer
        version = _refit_stored(url, answer["calibration"]["version"] or 0)
    t0 = time.monotonic()
    streak = seen = 0
    while streak < 30:
        if time.monotonic() - t0 > 10 * REFRESH_S + 30:
            raise RuntimeError(f"workers still not on calibration v{version}")
        resp = httpx.post(f"{url}/v1/predictions", json=PREDICTIONS[0], timeout=30)
        if resp.status_code == 200:
            seen += 1
            streak = streak + 1 if resp.json()["confidence"]["calibration_version"] >= version else 0
        time.sleep(0.05)
    return version, time.monotonic() - t0, seen


def _pct(v: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(v) * 1e3, q)) if v else float("nan")


def report(t: Tally, elapsed: float, args: argparse.Namespace) -> bool:
    answered = sum(len(v) for k, v in t.lat.items())
    shed = sum(t.shed.values())
    total = answered + shed + len(t.timeouts) + len(t.errors)
    print(f"{args.clients} clients + 1 ingester + /healthz prober, {args.workers} uvicorn workers, PostgreSQL, "
          f"{elapsed:.0f} s: {total} requests, {answered} answered ({answered / max(total, 1):.0%}, "
          f"{answered / elapsed:.1f}/s), {shed} shed (503 + Retry-After), {len(t.timeouts)} client timeouts, "
          f"{len(t.errors)} other failures")
    for kind in [*MIX, "ingest"]:
        v = t.lat.get(kind, [])
        print(f"  {kind:<15} answered {len(v):>6}  shed {t.shed.get(kind, 0):>6}  p50 {_pct(v, 50):8.1f} ms  "
              f"p99 {_pct(v, 99):8.1f} ms")
    for path, v in sorted(t.by_path.items()):
        print(f"    {path[:40]:<40} answered {len(v):>5}  p50 {_pct(v, 50):8.1f} ms  p99 {_pct(v, 99):8.1f} ms")
    every = [x for v in t.lat.values() for x in v]
    print(f"  {'all answered':<15} answered {len(every):>6}  p50 {_pct(every, 50):8.1f} ms  "
          f"p99 {_pct(every, 99):8.1f} ms")
    print(f"  {'/healthz':<15} answered {len(t.health):>6}  p50 {_pct(t.health, 50):8.1f} ms  "
          f"p99 {_pct(t.health, 99):8.1f} ms  max {_pct(t.health, 100):8.1f} ms  "
          f"timeouts ({HEALTH_TIMEOUT_S:g} s) {t.timeouts.count('healthz')}")
    for e in t.errors[:10]:
        print("  failure:", e)
    return answered > 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--port", type=int, default=0, help="default: any free port")
    ap.add_argument("--ingest-every", type=float, default=2.0, help="seconds between ingests (0: none)")
    ap.add_argument("--no-recalibration", action="store_true")
    ap.add_argument("--cv", default="background", help="CALIBRATION_CV of the workers")
    ap.add_argument("--soak", action="store_true", help="sample the workers' resident memory every 10 s")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout to serve (default: this one)")
    ap.add_argument("--server-log", type=Path, help="the workers' log (INFO: a line per request) into this file")
    ap.add_argument("--malloc-arena-max", default="2",
                    help="MALLOC_ARENA_MAX of the workers, as the Dockerfile sets it ('default': glibc's own)")
    args = ap.parse_args(argv)
    with server(args.workers, args.port or _free_port(), args.root, args.cv, args.server_log,
                args.malloc_arena_max) as (url, db_url, proc):
        rss: list[tuple[float, dict[int, int]]] = []
        refit_rss: list[dict[int, int]] = []
        stop = False

        async def sample() -> None:
            t0 = time.monotonic()
            while not stop:
                rss.append((time.monotonic() - t0, worker_rss_kib(proc.pid)))
                refit_rss.append(refit_rss_kib(rss[-1][1]))
                await asyncio.sleep(10)

        async def both() -> tuple[Tally, float, dict[str, Any]]:
            nonlocal stop
            sampler = asyncio.create_task(sample()) if args.soak else None
            out = await run_load(url, args.clients, args.seconds, args.ingest_every, not args.no_recalibration,
                                 db_url, args.root)
            stop = True
            if sampler:
                await sampler
            return out

        t, elapsed, recal = asyncio.run(both())
        expected, stored, distinct, stray = check_stored_once(db_url, t.landed)
        version, spread_s, seen = check_calibration_spread(url)
    ok = report(t, elapsed, args)
    once = expected == stored == distinct and stray == 0 and not t.unlanded
    print("ingest answers by refit: " + ", ".join(f"{k} {v}" for k, v in sorted(t.refits.items())))
    print(f"ingests landed {len(t.landed)} ({t.ingest_tries} posts), never landed {len(t.unlanded)}: rows expected "
          f"{expected}, stored {stored}, distinct {distinct}, stray {stray} ({'exactly once' if once else 'MISMATCH'})")
    if recal:
        print(f"recalibration (python -m service.calibration.jobs --fit, low priority) exit {recal['rc']} in "
              f"{recal['s']:.0f} s: {' / '.join(recal['out'])}")
    print(f"calibration v{version} made through one worker: used by every answer within {spread_s:.1f} s "
          f"({seen} predictions; CALIBRATION_REFRESH_S={REFRESH_S:g})")
    if rss:
        warm = next((s for s in rss if s[0] >= 0.2 * args.seconds), rss[0])
        last = rss[-1]
        for pid in sorted(last[1]):
            if pid in warm[1] and warm[1][pid]:
                print(f"  worker {pid} resident memory after warm-up ({warm[0]:.0f} s) {warm[1][pid] / 1024:.0f} MiB, "
                      f"at the end ({last[0]:.0f} s) {last[1][pid] / 1024:.0f} MiB: "
                      f"{(last[1][pid] / warm[1][pid] - 1) * 100:+.1f}%")
        for at, by_pid in rss[::12]:
            print(f"    at {at:5.0f} s: " + ", ".join(f"{p}: {v / 1024:.0f} MiB" for p, v in sorted(by_pid.items())))
        peak = {pid: max(s[1].get(pid, 0) for s in rss) for pid in last[1]}
        print(f"  peak resident memory by worker, MiB: {', '.join(f'{p}: {v / 1024:.0f}' for p, v in peak.items())}")
        for pid in sorted({p for sample in refit_rss for p in sample}):
            seen = [sample[pid] for sample in refit_rss if pid in sample]
            print(f"  refit process {pid}: {len(seen)} samples, resident memory first {seen[0] / 1024:.0f} MiB, "
                  f"last {seen[-1] / 1024:.0f} MiB, peak {max(seen) / 1024:.0f} MiB")
    server_errors = [e for e in t.errors if e.split(": ", 1)[-1][:1] == "5"]
    print(f"5xx other than 503 + Retry-After: {len(server_errors)}")
    return 0 if ok and once and not t.errors and not t.timeouts else 1


if __name__ == "__main__":
    sys.exit(main())
