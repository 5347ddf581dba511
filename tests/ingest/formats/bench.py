"""What the parser tests share: the fixture files of tests/fixtures/bench/ (see the README there), the deployments
they were run on, and the checks every parsed row passes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpu_catalog.loader import parse_measurement_rows
from gpu_catalog.schema import MEASUREMENT_COLUMNS
from service.ingest.formats import (
    DeploymentInfo,
    WorkloadHint,
    parse_genai_perf,
    parse_trtllm_bench,
    parse_vllm_bench_serve,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bench"
SOURCE = "test fixture: simulated run (not a measurement)"

DEP_VLLM = DeploymentInfo(model="meta-llama/Llama-3.1-8B-Instruct", gpu="h100-sxm", gpu_count=1, tp=1, pp=1,
                          replicas=1, weight_dtype="bf16", kv_dtype="auto", engine="vllm", engine_version="0.11.0")
DEP_TRT = replace(DEP_VLLM, engine="trtllm", engine_version=None, weight_dtype="fp8", kv_dtype="fp8")
NO_HINT = WorkloadHint()


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def one_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    assert len(rows) == 1
    parsed = parse_measurement_rows(rows, "posted")  # the loader's own validation of measurement rows
    assert len(parsed) == 1
    assert tuple(rows[0]) == MEASUREMENT_COLUMNS
    return rows[0]


def common(row: dict[str, Any], dep: DeploymentInfo) -> None:
    assert row["row_id"].startswith("user-") and len(row["row_id"]) == len("user-") + 16
    assert (row["quality"], row["source_id"], row["source"]) == ("good", "user", SOURCE)
    assert (row["model"], row["gpu"], row["gpu_count"], row["engine"]) == (dep.model, dep.gpu, dep.gpu_count,
                                                                           dep.engine)
    assert (row["tp"], row["pp"], row["dp"]) == (dep.tp, dep.pp, dep.replicas)
    assert (row["weight_dtype"], row["kv_dtype"]) == (dep.weight_dtype, dep.kv_dtype)


# the three tools by their short names in the parametrised tests
PARSE = {"vllm": parse_vllm_bench_serve, "gap": parse_genai_perf, "trt": parse_trtllm_bench}
FILES = {"vllm": "vllm_bench_serve.json", "gap": "genai_perf_profile_export.json", "trt": "trtllm_bench_report.json"}
DEPS = {"vllm": DEP_VLLM, "gap": DEP_VLLM, "trt": DEP_TRT}
