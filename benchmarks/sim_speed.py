"""Speed of the scheduler simulation (not a test: it prints figures).

1. Core: each configuration below (catalog models and GPUs, every workload mode, fixed and spread lengths,
   both engines' schedulers) simulated at the default request count, best of ``--repeats``: time per
   configuration (building the replica's step tables included), requests simulated per second (warm-up and
   cool-down included) and event-loop turns.
2. API (``--api``): POST /v1/predictions with and without the simulation, and POST /v1/recommendations with
   an SLA at p95 (its top candidates verified by simulation) and the same SLA on means (no simulation),
   in-process on the real app (SQLite, calibrated at start-up: ~15 s); median of ``--api-repeats`` after one
   warm-up call each.

    python benchmarks/sim_speed.py
    python benchmarks/sim_speed.py --requests 1000 --api
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from typing import Any

import numpy as np

from gpu_catalog.loader import load_catalog, load_cost_constants
from service.core.costmodel import MODES, Candidates, Params, build_tables, static_terms
from service.core.simulate import DEFAULT_REQUESTS, Lengths, Load, replica, simulate

# model, GPU, TP, weight dtype, engine, mode, load (clients or req/s per replica), input, output, length spread
# (standard deviation as a share of the mean): a mix of sizes, loads and both schedulers
CONFIGS: list[tuple[str, str, int, str, str, str, float, int, int, float]] = [
    ("meta-llama/Llama-3.1-8B", "h100-sxm", 1, "bf16", "vllm", "request_rate", 0.5, 1024, 256, 0.0),
    ("meta-llama/Llama-3.1-8B", "h100-sxm", 1, "bf16", "vllm", "request_rate", 10.0, 1024, 256, 0.5),
    ("meta-llama/Llama-3.1-8B", "l4", 1, "fp8", "vllm", "concurrency", 16, 1024, 256, 0.0),
    ("meta-llama/Llama-3.1-8B", "a100-80gb-sxm", 1, "bf16", "vllm", "concurrency", 128, 512, 512, 1.0),
    ("meta-llama/Llama-3.1-70B", "h100-sxm", 4, "fp8", "trtllm", "concurrency", 64, 2048, 128, 0.0),
    ("meta-llama/Llama-3.1-70B", "h100-sxm", 4, "fp8", "trtllm", "request_rate", 4.0, 2048, 128, 0.5),
    ("Qwen/Qwen3-30B-A3B", "h200-sxm", 2, "fp8", "vllm", "offline", 0.0, 1024, 1024, 0.5),
    ("mistralai/Mixtral-8x7B-v0.1", "h100-sxm", 2, "bf16", "trtllm", "request_rate", 6.0, 4096, 256, 0.3),
    ("deepseek-ai/DeepSeek-V3", "h200-sxm", 8, "fp8", "vllm", "concurrency", 256, 8192, 1024, 0.0),
    ("meta-llama/Llama-3.1-8B", "h100-sxm", 1, "bf16", "vllm", "request_rate", 0.05, 100_000, 64, 0.0),
]


def core_speed(requests: int, repeats: int) -> None:
    catalog, constants = load_catalog(), load_cost_constants()
    t = build_tables(catalog, constants)
    idx = t.index()
    params = Params(**{k: np.asarray(b.initial) for k, b in constants.initial_params.items()})
    total_s = total_req = 0.0
    print(f"core: {requests} measured requests per configuration, best of {repeats}")
    for model, gpu, tp, wd, engine, mode, load, isl, osl, spread in CONFIGS:
        m = catalog.resolve_model(model)
        assert m is not None
        one = np.ones(1)
        c = Candidates(
            model=np.asarray([idx["model"][m.id]]), gpu=np.asarray([idx["gpu"][gpu]]),
            wdtype=np.asarray([idx["wdtype"][wd]]), kvdtype=np.asarray([idx["kvdtype"]["auto"]]),
            budget=np.asarray([0 if engine == "vllm" else 1]), tp=one * tp, pp=one, ep=one, replicas=one,
            max_num_seqs=one * (1024 if engine == "vllm" else 2048), max_batched_tok=one * 8192, mem_fraction=one * 0.9,
            reserve_full=one * (engine != "vllm"),
            input_tok=one * isl, output_tok=one * osl, mode=np.asarray([MODES[mode]]), load=one * load,
            context_tok=one * (isl + osl) * (4 if spread else 1), first_wave_share=one * (mode == "offline"))
        st = static_terms(t, c)
        spec = Load(MODES[mode], load, Lengths(float(isl), spread * isl), Lengths(float(osl), spread * osl),
                    requests=requests)
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            r = simulate(replica(st, params, 0, reserve_full=engine == "trtllm"), spec)
            best = min(best, time.perf_counter() - t0)
        total_s += best
        total_req += r.simulated
        print(f"  {model.split('/')[1]:<20} {gpu:<14} TP{tp} {engine:<6} {mode:<12} {load:>7g} {isl:>6}/{osl:<5} "
              f"spread {spread:<3}: {best * 1e3:6.1f} ms, {r.simulated:>5} requests ({r.simulated / best:>9,.0f}/s), "
              f"{r.events:>5} events, {r.steps:>7} steps")
    print(f"  all: {total_req / total_s:,.0f} simulated requests/s; {total_s / len(CONFIGS) * 1e3:.1f} ms per "
          "configuration on average")


def api_speed(repeats: int) -> None:
    from fastapi.testclient import TestClient

    from service.main import create_app
    from service.settings import Settings

    logging.disable(logging.INFO)
    predict: dict[str, Any] = {
        "model": "meta-llama/Llama-3.1-70B-Instruct",
        "deployment": {"gpu": "h100-sxm", "tp": 4, "weight_dtype": "fp8", "kv_dtype": "fp8", "engine": "trtllm"},
        "workload": {"input_tokens": 2048, "output_tokens": 128, "request_rate": 4.0}}
    recommend: dict[str, Any] = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "workload": {"input_tokens": 1024, "output_tokens": 256, "request_rate": 4.0},
        "sla": {"ttft_ms": 1000, "tpot_ms": 50, "percentile": "p95"},
        "constraints": {"gpus": ["l4", "a100-80gb-sxm", "h100-sxm"], "max_gpus": 8}}
    cases = [
        ("POST /v1/predictions, simulated (2000 requests)", "/v1/predictions", predict),
        ("POST /v1/predictions, simulation off", "/v1/predictions", {**predict, "simulation": {"enabled": False}}),
        ("POST /v1/recommendations, p95 SLA verified", "/v1/recommendations", recommend),
        ("POST /v1/recommendations, p95 SLA, simulation off", "/v1/recommendations",
         {**recommend, "simulation": {"enabled": False}}),
    ]
    with tempfile.TemporaryDirectory() as d:
        settings = Settings(database_url=f"sqlite:///{d}/speed.db", calibration_cv="off", log_level="WARNING",
                            startup_mode="blocking")
        with TestClient(create_app(settings)) as client:
            print(f"api (in-process, median of {repeats}):")
            for label, path, body in cases:
                client.post(path, json=body).raise_for_status()
                times = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    client.post(path, json=body).raise_for_status()
                    times.append(time.perf_counter() - t0)
                print(f"  {label:<52} {np.median(times) * 1e3:7.1f} ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=DEFAULT_REQUESTS)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--api", action="store_true", help="also time the endpoints with and without simulation")
    ap.add_argument("--api-repeats", type=int, default=7)
    args = ap.parse_args(argv)
    core_speed(args.requests, args.repeats)
    if args.api:
        api_speed(args.api_repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
