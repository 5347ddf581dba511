"""The `vllm bench serve --save-result` parser, checked against numbers worked out from its fixture."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gpu_catalog.loader import parse_measurement_rows
from service.ingest.formats import (
    FormatError,
    WorkloadHint,
    parse_vllm_bench_serve,
)
from tests.ingest.formats.bench import DEP_VLLM, NO_HINT, SOURCE, common, load, one_row


@pytest.fixture
def vllm() -> dict[str, Any]:
    return load("vllm_bench_serve.json")


def test_vllm_fixture(vllm: dict[str, Any]) -> None:
    row = one_row(parse_vllm_bench_serve(vllm, DEP_VLLM, NO_HINT, SOURCE))
    common(row, DEP_VLLM)
    # 200 completed requests of the random dataset, 1024 prompt and 128 generated tokens each
    assert vllm["completed"] == 200 and vllm["total_input_tokens"] == 204800 and vllm["total_output_tokens"] == 25600
    assert row["input_tokens"] == 204800 / 200 == 1024.0
    assert row["output_tokens"] == 25600 / 200 == 128.0
    assert (row["mode"], row["concurrency"], row["request_rate"]) == ("concurrency", 16, None)
    assert row["requests_per_s"] == vllm["request_throughput"] == pytest.approx(200 / vllm["duration"])
    assert row["output_tok_s"] == vllm["output_throughput"] == pytest.approx(25600 / vllm["duration"])
    assert row["total_tok_s"] == vllm["total_token_throughput"] == pytest.approx((204800 + 25600) / vllm["duration"])
    assert (row["ttft_ms"], row["ttft_stat"]) == (vllm["mean_ttft_ms"], "mean")
    assert (row["tpot_ms"], row["tpot_stat"]) == (vllm["mean_tpot_ms"], "mean")
    assert (row["itl_ms"], row["itl_stat"]) == (vllm["mean_itl_ms"], "mean")
    assert (row["e2e_ms"], row["e2e_stat"]) == (vllm["mean_e2el_ms"], "mean")
    # the file keeps every request's latency (s): the mean of those is the mean E2EL (ms)
    assert row["e2e_ms"] == pytest.approx(sum(vllm["latencies"]) / 200 * 1000)
    assert row["engine_version"] == "0.11.0" and row["orig_model"] == "meta-llama/Llama-3.1-8B-Instruct"
    notes = json.loads(row["notes"])
    assert notes["tool"] == "vllm bench serve" and notes["format"] == "vllm_bench_serve"
    assert notes["latency_stats_ms"]["ttft"] == {"median": vllm["median_ttft_ms"], "std": vllm["std_ttft_ms"],
                                                 "p90": vllm["p90_ttft_ms"], "p99": vllm["p99_ttft_ms"]}
    assert notes["latency_stats_ms"]["e2el"]["p99"] == vllm["p99_e2el_ms"]
    assert notes["run"]["failed"] == 0 and notes["run"]["date"] == vllm["date"]


@pytest.mark.parametrize(("rate", "cap", "mode", "want_rate", "want_conc"), [
    (8.0, None, "request_rate", 8.0, None),
    ("inf", None, "offline", None, None),
    (8.0, 16, "concurrency", 8.0, 16),
    ("inf", 16, "concurrency", None, 16),
])
def test_vllm_load_modes(vllm: dict[str, Any], rate: Any, cap: int | None, mode: str, want_rate: float | None,
                         want_conc: int | None) -> None:
    vllm["request_rate"], vllm["max_concurrency"] = rate, cap
    row = one_row(parse_vllm_bench_serve(vllm, DEP_VLLM, NO_HINT, SOURCE))
    assert (row["mode"], row["request_rate"], row["concurrency"]) == (mode, want_rate, want_conc)


def test_vllm_appended_runs_are_rows(vllm: dict[str, Any]) -> None:
    second = copy.deepcopy(vllm)
    second["max_concurrency"], second["mean_ttft_ms"] = 32, vllm["mean_ttft_ms"] * 1.5
    rows = parse_vllm_bench_serve([vllm, second], DEP_VLLM, NO_HINT, SOURCE)
    parse_measurement_rows(rows, "posted")
    assert [r["concurrency"] for r in rows] == [16, 32]
    assert rows[0]["row_id"] != rows[1]["row_id"]
    assert rows[0]["row_id"] == parse_vllm_bench_serve(vllm, DEP_VLLM, NO_HINT, SOURCE)[0]["row_id"]
    with pytest.raises(FormatError) as exc:
        parse_vllm_bench_serve([vllm, copy.deepcopy(vllm)], DEP_VLLM, NO_HINT, SOURCE)
    assert exc.value.field == "result.1"
    with pytest.raises(FormatError) as exc:
        parse_vllm_bench_serve([vllm, {"completed": 0}], DEP_VLLM, NO_HINT, SOURCE)
    assert exc.value.field == "result.1.completed"


def test_vllm_zero_latency_means_not_measured(vllm: dict[str, Any]) -> None:
    vllm["mean_ttft_ms"] = vllm["median_ttft_ms"] = vllm["std_ttft_ms"] = 0.0  # non-streaming endpoint
    vllm["p90_ttft_ms"] = vllm["p99_ttft_ms"] = 0.0
    row = one_row(parse_vllm_bench_serve(vllm, DEP_VLLM, NO_HINT, SOURCE))
    assert row["ttft_ms"] is None and row["ttft_stat"] is None
    assert json.loads(row["notes"])["not_measured"] == ["mean_ttft_ms"]


def test_vllm_hint_fills_what_the_file_lacks(vllm: dict[str, Any]) -> None:
    del vllm["max_concurrency"], vllm["request_rate"]  # as older benchmark_serving.py files
    with pytest.raises(FormatError) as exc:
        parse_vllm_bench_serve(vllm, DEP_VLLM, NO_HINT, SOURCE)
    assert exc.value.field == "result.request_rate"
    row = one_row(parse_vllm_bench_serve(vllm, DEP_VLLM, WorkloadHint(concurrency=16), SOURCE))
    assert (row["mode"], row["concurrency"]) == ("concurrency", 16)
    assert json.loads(row["notes"])["from_hint"] == ["concurrency"]


def test_vllm_hint_contradicting_the_file(vllm: dict[str, Any]) -> None:
    with pytest.raises(FormatError) as exc:
        parse_vllm_bench_serve(vllm, DEP_VLLM, WorkloadHint(concurrency=8), SOURCE)
    assert exc.value.field == "hint.concurrency"
    with pytest.raises(FormatError) as exc:
        parse_vllm_bench_serve(vllm, DEP_VLLM, WorkloadHint(request_rate=4.0), SOURCE)  # file: inf
    assert exc.value.field == "hint.request_rate"
    # measured token counts win over hinted ones
    row = one_row(parse_vllm_bench_serve(vllm, DEP_VLLM, WorkloadHint(input_tokens=1000, concurrency=16), SOURCE))
    assert row["input_tokens"] == 1024.0
