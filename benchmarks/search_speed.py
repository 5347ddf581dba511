"""Speed of POST /v1/recommendations over HTTP (not a test: it prints figures).

A fixed set of 24 varied requirements (small and large models, dense and MoE, chat / batch / api, tight
and loose SLAs, all GPUs allowed unless the requirement says otherwise) against uvicorn with the real app
on a fresh SQLite file. Prints, per requirement, the candidates searched, scored and feasible and the
latency; then p50 / p99 over all requests after the first of each requirement, and the first ones apart.

    python benchmarks/search_speed.py              # 24 requirements x 5 rounds
    python benchmarks/search_speed.py --rounds 1
    python benchmarks/search_speed.py --levers     # every requirement allows every lever (constraints.levers)
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np
from predict_speed import running_server

M8 = "meta-llama/Llama-3.1-8B-Instruct"
M70 = "meta-llama/Llama-3.1-70B-Instruct"


def wl(i: int, o: int, **load: Any) -> dict[str, Any]:
    return {"input_tokens": i, "output_tokens": o, **load}


REQUIREMENTS: list[dict[str, Any]] = [
    {"model": M8, "workload": wl(1024, 256, concurrency=50), "scenario": "chat"},
    {"model": M8, "workload": wl(2048, 512, concurrency=200), "scenario": "api"},
    {"model": M8, "workload": wl(1024, 1024, offline=True), "scenario": "batch"},
    {"model": M8, "workload": wl(512, 128, request_rate=20.0), "sla": {"ttft_ms": 300, "tpot_ms": 30,
                                                                       "percentile": "p99"}},
    {"model": "meta-llama/Llama-2-7b-hf", "workload": wl(256, 256, concurrency=50),
     "sla": {"ttft_ms": 200, "percentile": "p95"}, "constraints": {"gpus": ["a10"], "max_gpus": 1}},
    {"model": M70, "workload": wl(1024, 256, concurrency=50), "scenario": "chat"},
    {"model": M70, "workload": wl(4096, 512, concurrency=256), "scenario": "api"},
    {"model": M70, "workload": wl(2048, 2048, offline=True), "scenario": "batch"},
    {"model": M70, "workload": wl(1024, 256, request_rate=5.0), "sla": {"e2e_ms": 10000},
     "objective": "min_latency"},
    {"model": M70, "workload": wl(1024, 256, concurrency=8), "constraints": {"gpus": ["a10", "l4"], "max_gpus": 1}},
    {"model": "Qwen/Qwen3-30B-A3B", "workload": wl(1024, 512, concurrency=64), "scenario": "chat"},
    {"model": "Qwen/Qwen3-30B-A3B", "workload": wl(1024, 512, offline=True), "objective": "max_throughput"},
    {"model": "mistralai/Mixtral-8x7B-Instruct-v0.1", "workload": wl(2048, 256, concurrency=32),
     "scenario": "api"},
    {"model": "deepseek-ai/DeepSeek-V3", "workload": wl(2048, 512, concurrency=64), "scenario": "api"},
    {"model": "deepseek-ai/DeepSeek-V3", "workload": wl(1024, 1024, offline=True), "scenario": "batch",
     "constraints": {"multi_node": True}},
    {"model": "Qwen/Qwen2.5-7B-Instruct", "workload": wl(8000, 200, concurrency=16),
     "sla": {"ttft_ms": 2000, "tpot_ms": 40, "percentile": "p90"}, "objective": "balanced"},
    {"model": "Qwen/Qwen2.5-72B-Instruct", "workload": wl(1024, 256, concurrency=100),
     "sla": {"ttft_ms": 1000, "tpot_ms": 60, "percentile": "p95"}, "constraints": {"max_usd_per_hour": 60}},
    {"model": "google/gemma-2-9b-it", "workload": wl(1024, 256, concurrency=30), "scenario": "chat"},
    {"model": "meta-llama/Llama-3.2-3B", "workload": wl(1024, 256, concurrency=100), "scenario": "api"},
    {"model": M8, "workload": wl(32000, 512, concurrency=8, max_context_tokens=65536),
     "sla": {"ttft_ms": 5000, "percentile": "p95"}},
    {"model": M8, "workload": wl(128, 64, request_rate=500.0), "sla": {"tpot_ms": 20}, "objective": "min_cost"},
    {"model": M70, "workload": wl(1024, 256, concurrency=1000), "scenario": "api",
     "constraints": {"max_gpus": 64}},
    {"model": "openai/gpt-oss-20b", "workload": wl(1024, 512, concurrency=64), "scenario": "chat"},
    {"model": M8, "workload": wl(1024, 256, concurrency=50), "sla": {"ttft_ms": 20}, "top_k": 10},
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--levers", action="store_true",
                    help="allow speculative, cpu_offload and prefix_cache in every requirement")
    args = ap.parse_args(argv)
    requirements = REQUIREMENTS
    if args.levers:
        requirements = [{**b, "constraints": {**b.get("constraints", {}),
                                              "levers": ["speculative", "cpu_offload", "prefix_cache"]}}
                        for b in REQUIREMENTS]
    import httpx

    times: list[float] = []
    searched: list[int] = []
    with running_server() as url, httpx.Client(base_url=url, timeout=120) as client:
        first: list[float] = []
        for i, body in enumerate(requirements):              # warm-up, and each must be answered
            t0 = time.perf_counter()
            r = client.post("/v1/recommendations", json=body)
            first.append(time.perf_counter() - t0)
            if r.status_code != 200:
                print(f"#{i}: {r.status_code} {r.text[:300]}")
                return 1
        for rnd in range(args.rounds):
            for i, body in enumerate(requirements):
                t0 = time.perf_counter()
                r = client.post("/v1/recommendations", json=body)
                times.append(time.perf_counter() - t0)
                r.raise_for_status()
                j = r.json()
                searched.append(j["search"]["candidates"])
                if rnd == 0:
                    s = j["search"]
                    top = j["recommendations"][0]["why"][:90] if j["recommendations"] else \
                        "infeasible: " + j["explanation"]["summary"][:80]
                    print(f"#{i:2d} {body['model'][:34]:<34} candidates {s['candidates']:>7} scored {s['scored']:>6} "
                          f"solved {s['solved']:>6} feasible {s['feasible']:>6} {times[-1] * 1e3:6.1f} ms  {top}")
    ms = np.asarray(times) * 1e3
    print(f"\n{len(ms)} requests ({len(requirements)} requirements x {args.rounds}): candidates per request "
          f"median {int(np.median(searched))}, min {min(searched)}, max {max(searched)}; "
          f"latency p50 {np.percentile(ms, 50):.1f} ms, p90 {np.percentile(ms, 90):.1f} ms, "
          f"p99 {np.percentile(ms, 99):.1f} ms (uvicorn, one worker, SQLite)")
    # the warm-up round: the server's first request, and the first of each model shape and set of constraints,
    # build what later ones reuse (the table of allowed layouts, kept per calibration); the figures above are
    # of the rounds after it
    cold = np.asarray(first) * 1e3
    which = " (the server's first request)" if int(np.argmax(cold)) == 0 else ""
    print(f"warm-up round (each requirement's first request, in order): p50 {np.percentile(cold, 50):.1f} ms, "
          f"max {cold.max():.1f} ms{which}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
