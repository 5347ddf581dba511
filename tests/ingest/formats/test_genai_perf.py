"""The `genai-perf profile` parser, checked against numbers worked out from its fixture."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.ingest.formats import (
    FormatError,
    WorkloadHint,
    parse_genai_perf,
)
from tests.ingest.formats.bench import DEP_VLLM, NO_HINT, SOURCE, common, load, one_row


@pytest.fixture
def gap() -> dict[str, Any]:
    return load("genai_perf_profile_export.json")


def test_genai_perf_fixture(gap: dict[str, Any]) -> None:
    row = one_row(parse_genai_perf(gap, DEP_VLLM, NO_HINT, SOURCE))
    common(row, DEP_VLLM)
    assert gap["request_count"]["avg"] == 320.0
    assert row["input_tokens"] == gap["input_sequence_length"]["avg"] == 1024.0
    assert row["output_tokens"] == gap["output_sequence_length"]["avg"] == 256.0
    assert (row["mode"], row["concurrency"], row["request_rate"]) == ("concurrency", 32, None)
    assert gap["input_config"]["perf_analyzer"]["stimulus"] == {"concurrency": 32}
    assert row["requests_per_s"] == gap["request_throughput"]["avg"]
    assert row["output_tok_s"] == gap["output_token_throughput"]["avg"]
    # output throughput = requests/s x 256 tokens (every request generated 256 tokens)
    assert row["output_tok_s"] == pytest.approx(row["requests_per_s"] * 256)
    assert row["total_tok_s"] is None  # genai-perf does not report it
    assert (row["ttft_ms"], row["ttft_stat"]) == (gap["time_to_first_token"]["avg"], "mean")
    assert (row["tpot_ms"], row["tpot_stat"]) == (gap["inter_token_latency"]["avg"], "mean")
    assert row["itl_ms"] is None
    assert (row["e2e_ms"], row["e2e_stat"]) == (gap["request_latency"]["avg"], "mean")
    assert row["orig_model"] == "meta-llama/Llama-3.1-8B-Instruct" and row["engine_version"] == "0.11.0"
    notes = json.loads(row["notes"])
    assert notes["tool"] == "genai-perf profile" and notes["format"] == "genai_perf"
    ttft = notes["stats"]["time_to_first_token_ms"]
    assert (ttft["p50"], ttft["p99"], ttft["max"]) == (gap["time_to_first_token"]["p50"],
                                                       gap["time_to_first_token"]["p99"],
                                                       gap["time_to_first_token"]["max"])
    assert notes["stats"]["time_to_second_token"]["avg"] == gap["time_to_second_token"]["avg"]
    assert notes["request_count"] == 320.0


def test_genai_perf_request_rate_and_legacy_input_config(gap: dict[str, Any]) -> None:
    gap["input_config"]["perf_analyzer"]["stimulus"] = {"request_rate": 10.0}
    row = one_row(parse_genai_perf(gap, DEP_VLLM, NO_HINT, SOURCE))
    assert (row["mode"], row["request_rate"], row["concurrency"]) == ("request_rate", 10.0, None)
    # genai-perf < 0.0.13 dumped its CLI arguments flat
    gap["input_config"] = {"model": ["meta-llama/Llama-3.1-8B-Instruct"], "concurrency": 1, "request_rate": None,
                           "streaming": True}
    del gap["request_count"]  # not reported before 0.0.13 either
    row = one_row(parse_genai_perf(gap, DEP_VLLM, NO_HINT, SOURCE))
    assert (row["mode"], row["concurrency"]) == ("concurrency", 1)
    assert row["orig_model"] == "meta-llama/Llama-3.1-8B-Instruct"
    del gap["input_config"]
    with pytest.raises(FormatError) as exc:
        parse_genai_perf(gap, DEP_VLLM, NO_HINT, SOURCE)
    assert exc.value.field == "result.input_config.perf_analyzer.stimulus"
    assert one_row(parse_genai_perf(gap, DEP_VLLM, WorkloadHint(concurrency=4), SOURCE))["concurrency"] == 4


def test_genai_perf_token_hint(gap: dict[str, Any]) -> None:
    del gap["input_sequence_length"]
    with pytest.raises(FormatError) as exc:
        parse_genai_perf(gap, DEP_VLLM, NO_HINT, SOURCE)
    assert exc.value.field == "result.input_sequence_length"
    row = one_row(parse_genai_perf(gap, DEP_VLLM, WorkloadHint(input_tokens=1024), SOURCE))
    assert row["input_tokens"] == 1024
