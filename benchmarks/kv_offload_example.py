"""The worked example of docs/levers.md, "Prefix working set and KV offload to host memory" (not a test: it
prints figures): Llama-3.1-8B BF16 on one H100 SXM with vLLM, 4096 / 256 tokens, 32 clients, 75 % prefix hits,
predicted with every hit on the GPU, with a 20M-token working set, and with that set and a 200 GB host KV tier,
each analytic (the serving solve) and simulated. POST /v1/predictions in process, the real app on a fresh SQLite
file.

    python benchmarks/kv_offload_example.py
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
WORKLOAD: dict[str, Any] = {"input_tokens": 4096, "output_tokens": 256, "concurrency": 32,
                            "prefix_cache_hit_rate": 0.75}
WORKING_SET_TOK = 20_000_000
TIER_GB = 200
CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("every hit on the GPU", {}, {}),
    (f"working set {WORKING_SET_TOK:,} tokens", {}, {"prefix_working_set_tokens": WORKING_SET_TOK}),
    (f"working set and a {TIER_GB} GB host tier", {"kv_offload_gb": TIER_GB},
     {"prefix_working_set_tokens": WORKING_SET_TOK}),
]


def main() -> int:
    with tempfile.TemporaryDirectory() as d:
        os.environ.update({"DATABASE_URL": f"sqlite:///{d}/kv.db", "CALIBRATION_CV": "off",
                           "STARTUP_MODE": "blocking", "LOG_LEVEL": "WARNING"})
        from fastapi.testclient import TestClient

        from service.main import create_app

        with TestClient(create_app()) as client:
            for label, deployment, workload in CASES:
                ttft: list[str] = []
                notes: list[str] = []
                for simulate in (False, True):
                    body = {"model": MODEL, "deployment": {"gpu": "h100-sxm", "engine": "vllm", **deployment},
                            "workload": {**WORKLOAD, **workload}, "simulation": {"enabled": simulate}}
                    r = client.post("/v1/predictions", json=body)
                    r.raise_for_status()
                    answer = r.json()
                    ttft.append(f"{answer['predicted']['ttft_ms']:.1f}")
                    notes = [n for n in answer["notes"] if "working set" in n or "tier" in n]
                print(f"{label}: mean TTFT {ttft[0]} ms analytic, {ttft[1]} ms simulated")
                for note in notes:
                    print(f"  note: {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
