"""The `trtllm-bench ... --report_json` parser, checked against numbers worked out from its fixture."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from service.ingest.formats import (
    FormatError,
    WorkloadHint,
    parse_trtllm_bench,
)
from tests.ingest.formats.bench import DEP_TRT, DEP_VLLM, NO_HINT, SOURCE, common, load, one_row


@pytest.fixture
def trt() -> dict[str, Any]:
    return load("trtllm_bench_report.json")


def test_trtllm_fixture(trt: dict[str, Any]) -> None:
    row = one_row(parse_trtllm_bench(trt, DEP_TRT, NO_HINT, SOURCE))
    common(row, DEP_TRT)
    info, perf, stream = trt["request_info"], trt["performance"], trt["streaming_metrics"]
    assert (info["num_requests"], info["avg_input_length"], info["avg_output_length"]) == (512, 1024.0, 512.0)
    assert (row["input_tokens"], row["output_tokens"]) == (1024.0, 512.0)
    assert (row["mode"], row["concurrency"], row["request_rate"]) == ("offline", None, None)
    assert row["requests_per_s"] == perf["request_throughput_req_s"]
    assert row["requests_per_s"] == pytest.approx(512 / (perf["total_latency_ms"] / 1000))
    assert row["output_tok_s"] == perf["system_output_throughput_tok_s"]
    assert row["output_tok_s"] == pytest.approx(512 * 512 / (perf["total_latency_ms"] / 1000))
    assert row["total_tok_s"] == perf["system_total_throughput_tok_s"]
    assert row["total_tok_s"] == pytest.approx(512 * (1024 + 512) / (perf["total_latency_ms"] / 1000))
    assert row["output_tok_s_per_gpu"] == perf["output_throughput_per_gpu_tok_s"] == row["output_tok_s"] / 1
    assert (row["ttft_ms"], row["ttft_stat"]) == (stream["avg_ttft_ms"], "mean")
    assert (row["tpot_ms"], row["tpot_stat"]) == (stream["avg_tpot_ms"], "mean")
    assert (row["e2e_ms"], row["e2e_stat"]) == (perf["avg_request_latency_ms"], "mean")
    assert row["itl_ms"] is None and row["ep"] is None
    assert row["max_batch"] == trt["world_info"]["max_batch_size"] == 2048
    assert row["engine_version"] == trt["engine"]["version"] == "1.2.0"  # the report's, as the caller gave none
    assert (row["orig_gpu"], row["orig_model"]) == ("NVIDIA H100 80GB HBM3", "meta-llama/Llama-3.1-8B-Instruct")
    notes = json.loads(row["notes"])
    assert notes["tool"] == "trtllm-bench throughput" and notes["format"] == "trtllm_bench"
    assert notes["streaming_metrics"]["ttft_percentiles"]["p99"] == stream["ttft_percentiles"]["p99"]
    lat = perf["request_latency_percentiles_ms"]
    assert notes["performance"]["request_latency_percentiles_ms"]["p50"] == lat["p50"]
    assert "offline" in notes["mode_basis"]


def test_trtllm_concurrency_from_hint_and_caller_version(trt: dict[str, Any]) -> None:
    dep = replace(DEP_TRT, engine_version="1.2.0rc2")
    row = one_row(parse_trtllm_bench(trt, dep, WorkloadHint(concurrency=64), SOURCE))
    assert (row["mode"], row["concurrency"], row["engine_version"]) == ("concurrency", 64, "1.2.0rc2")
    assert json.loads(row["notes"])["from_hint"] == ["concurrency"]


def test_trtllm_report_must_match_the_deployment(trt: dict[str, Any]) -> None:
    with pytest.raises(FormatError) as exc:
        parse_trtllm_bench(trt, replace(DEP_TRT, gpu_count=2, tp=2), NO_HINT, SOURCE)
    assert exc.value.field == "deployment.gpu_count"
    with pytest.raises(FormatError) as exc:
        parse_trtllm_bench(trt, DEP_VLLM, NO_HINT, SOURCE)
    assert exc.value.field == "deployment.engine"
