"""Speed of the cost model (not a test: it prints figures).

1. Core: candidates scored per second by ``evaluate`` on a batch of varied candidates (every catalog
   model x GPU x dtype x layout x load that the grid below yields, repeated to the requested size).
2. API: time per ``POST /v1/predictions`` through HTTP against a running uvicorn (the real app on a
   SQLite file), over a fixed list of varied requests; p50 / p90 / p99 in ms.

    python benchmarks/predict_speed.py                    # both, 1e6 candidates, 400 requests
    python benchmarks/predict_speed.py --candidates 200000 --requests 0
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from gpu_catalog.loader import load_catalog, load_cost_constants
from service.core.costmodel import MODES, Candidates, Params, build_tables, evaluate

ROOT = Path(__file__).resolve().parents[1]

# Varied deployments for the API timing (ids are catalog ids; the mix covers engines, modes and sizes)
REQUESTS: list[tuple[str, str, int, str, str, str, dict[str, Any]]] = [
    ("meta-llama/Llama-3.1-8B-Instruct", "l4", 1, "bf16", "auto", "vllm", {"concurrency": 16}),
    ("meta-llama/Llama-3.1-8B-Instruct", "a10", 1, "int4-awq", "auto", "vllm", {"concurrency": 50}),
    ("meta-llama/Llama-3.1-70B-Instruct", "h100-sxm", 4, "fp8", "fp8", "trtllm", {"concurrency": 64}),
    ("meta-llama/Llama-3.1-70B-Instruct", "a100-80gb-sxm", 2, "int4-awq", "auto", "vllm", {"request_rate": 2.0}),
    ("Qwen/Qwen3-30B-A3B", "h200-sxm", 2, "fp8", "fp8", "vllm", {"offline": True}),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "h100-sxm", 2, "bf16", "auto", "trtllm", {"request_rate": 8.0}),
    ("deepseek-ai/DeepSeek-V3", "h200-sxm", 8, "fp8", "auto", "vllm", {"concurrency": 128}),
    ("meta-llama/Llama-3.1-8B-Instruct", "mi300x", 1, "bf16", "auto", "vllm", {"concurrency": 256}),
]


def core_speed(n_target: int, repeats: int) -> tuple[int, float]:
    t, cand, params = _grid(n_target)
    evaluate(t, cand, params)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        evaluate(t, cand, params)
        best = min(best, time.perf_counter() - t0)
    return len(cand), best


def root_precision(n_target: int) -> dict[str, float]:
    """Largest relative change of TTFT, TPOT and throughput when the serving solve runs 60 root-finding
    steps instead of the shipped number (the converged answer against the one served)."""
    from service.core import serve_kernel

    t, cand, params = _grid(n_target)
    served = evaluate(t, cand, params)
    shipped = serve_kernel._ROOT_STEPS
    serve_kernel._ROOT_STEPS = 60
    try:
        converged = evaluate(t, cand, params)
    finally:
        serve_kernel._ROOT_STEPS = shipped
    ok = served.fits
    return {name: float(np.max(np.abs(getattr(served, name)[ok] / getattr(converged, name)[ok] - 1.0)))
            for name in ("ttft_s", "tpot_s", "output_tok_s")}


def _grid(n_target: int) -> tuple[Any, Candidates, Params]:
    catalog, constants = load_catalog(), load_cost_constants()
    t = build_tables(catalog, constants)
    idx = t.index()
    grid = list(itertools.product(range(len(t.model_ids)), range(len(idx["gpu"])), [idx["wdtype"]["bf16"],
                idx["wdtype"]["fp8"]], [1.0, 2.0, 4.0, 8.0], list(MODES.values()), [1.0, 16.0, 256.0]))
    reps = -(-n_target // len(grid))
    g = np.asarray(grid * reps)[:n_target]
    n = len(g)

    def full(v: float) -> np.ndarray:
        return np.full(n, v)

    cand = Candidates(
        model=g[:, 0].astype(np.int64), gpu=g[:, 1].astype(np.int64), wdtype=g[:, 2].astype(np.int64),
        kvdtype=np.full(n, idx["kvdtype"]["auto"]), budget=np.zeros(n, dtype=np.int64), tp=g[:, 3].astype(float),
        pp=full(1.0), ep=full(1.0), replicas=full(1.0), max_num_seqs=full(256.0), max_batched_tok=full(8192.0),
        mem_fraction=full(0.9), reserve_full=full(0.0), input_tok=full(1024.0), output_tok=full(256.0),
        mode=g[:, 4].astype(np.int64),
        load=g[:, 5].astype(float), context_tok=full(1280.0),
        first_wave_share=(g[:, 4] == MODES["offline"]).astype(float))
    params = Params(**{k: np.full(n, b.initial) for k, b in constants.initial_params.items()})
    return t, cand, params


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_server() -> Iterator[str]:
    """uvicorn with the real app on a fresh SQLite file (migrated and calibrated at start-up)."""
    with tempfile.TemporaryDirectory() as d:
        # BENCH_PORT: a fixed port (a machine shared by several runs may assign each a range)
        port = int(os.environ.get("BENCH_PORT") or _free_port())
        env = {**os.environ, "DATABASE_URL": f"sqlite:///{d}/speed.db", "CALIBRATION_CV": "off",
               "LOG_LEVEL": "WARNING"}
        proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "service.main:app", "--port", str(port),
                                 "--log-level", "warning"], cwd=ROOT, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            import httpx
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                with contextlib.suppress(httpx.HTTPError):
                    r = httpx.get(f"{url}/readyz", timeout=2)
                    if r.status_code == 200 and not r.json().get("warming"):   # kernels loaded too
                        break
                time.sleep(0.5)
            else:
                raise RuntimeError("server did not become ready in 300 s")
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def api_speed(n_requests: int) -> list[float]:
    import httpx

    bodies = [{"model": m, "deployment": {"gpu": g, "tp": tp, "weight_dtype": wd, "kv_dtype": kv, "engine": e},
               "workload": {"input_tokens": 1024, "output_tokens": 256, **load}}
              for m, g, tp, wd, kv, e, load in REQUESTS]
    times: list[float] = []
    with running_server() as url, httpx.Client(base_url=url) as client:
        for body in bodies:                       # warm-up, and every request must succeed
            r = client.post("/v1/predictions", json=body)
            r.raise_for_status()
        for i in range(n_requests):
            t0 = time.perf_counter()
            r = client.post("/v1/predictions", json=bodies[i % len(bodies)])
            times.append(time.perf_counter() - t0)
            r.raise_for_status()
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidates", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--check-root", action="store_true",
                    help="also print how far the shipped root-finding steps are from a converged solve")
    args = ap.parse_args(argv)
    if args.check_root:
        worst = root_precision(200_000)
        print("root precision (largest relative change vs 60 steps, 200k candidates): "
              + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))
    if args.candidates:
        n, best = core_speed(args.candidates, args.repeats)
        print(f"core: {n} candidates in {best * 1e3:.0f} ms (best of {args.repeats}) = {n / best:,.0f} candidates/s")
    if args.requests:
        ms = np.asarray(api_speed(args.requests)) * 1e3
        print(f"api: POST /v1/predictions x {len(ms)} over HTTP (uvicorn, one worker, SQLite): "
              f"p50 {np.percentile(ms, 50):.2f} ms, p90 {np.percentile(ms, 90):.2f} ms, "
              f"p99 {np.percentile(ms, 99):.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
