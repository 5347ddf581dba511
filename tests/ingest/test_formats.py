"""Benchmark result files -> measurement rows: the real formats of vllm bench serve, genai-perf and trtllm-bench
(fixtures in tests/fixtures/bench/, see the README there), checked against numbers worked out from the fixtures."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpu_catalog.loader import parse_measurement_rows
from gpu_catalog.schema import MEASUREMENT_COLUMNS
from service.ingest.formats import (
    PARSERS,
    DeploymentInfo,
    FormatError,
    WorkloadHint,
    parse_genai_perf,
    parse_trtllm_bench,
    parse_vllm_bench_serve,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bench"
SOURCE = "test fixture: simulated run (not a measurement)"

DEP_VLLM = DeploymentInfo(model="meta-llama/Llama-3.1-8B-Instruct", gpu="h100-sxm", gpu_count=1, tp=1, pp=1,
                          replicas=1, weight_dtype="bf16", kv_dtype="auto", engine="vllm", engine_version="0.11.0")
DEP_TRT = replace(DEP_VLLM, engine="trtllm", engine_version=None, weight_dtype="fp8", kv_dtype="fp8")
NO_HINT = WorkloadHint()


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


@pytest.fixture
def vllm() -> dict[str, Any]:
    return load("vllm_bench_serve.json")


@pytest.fixture
def gap() -> dict[str, Any]:
    return load("genai_perf_profile_export.json")


@pytest.fixture
def trt() -> dict[str, Any]:
    return load("trtllm_bench_report.json")


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


# --- vllm bench serve -----------------------------------------------------------------------------------------


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


# --- genai-perf ---------------------------------------------------------------------------------------------------


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


# --- trtllm-bench -------------------------------------------------------------------------------------------------


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


# --- bad input names the field --------------------------------------------------------------------------------

PARSE = {"vllm": parse_vllm_bench_serve, "gap": parse_genai_perf, "trt": parse_trtllm_bench}
FILES = {"vllm": "vllm_bench_serve.json", "gap": "genai_perf_profile_export.json", "trt": "trtllm_bench_report.json"}
DEPS = {"vllm": DEP_VLLM, "gap": DEP_VLLM, "trt": DEP_TRT}
_DELETE = object()


def mutate(doc: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        doc = doc[key]
    if value is _DELETE:
        del doc[last]
    else:
        doc[last] = value


BAD = [
    # required field missing
    ("vllm", "completed", _DELETE, "result.completed"),
    ("vllm", "total_output_tokens", _DELETE, "result.total_output_tokens"),
    ("gap", "request_throughput", _DELETE, "result.request_throughput"),
    ("gap", "output_token_throughput.avg", _DELETE, "result.output_token_throughput.avg"),
    ("trt", "performance", _DELETE, "result.performance"),
    ("trt", "request_info.num_requests", _DELETE, "result.request_info.num_requests"),
    # wrong type
    ("vllm", "mean_ttft_ms", "70.9", "result.mean_ttft_ms"),
    ("vllm", "max_concurrency", "16", "result.max_concurrency"),
    ("vllm", "request_rate", "fast", "result.request_rate"),
    ("vllm", "completed", True, "result.completed"),
    ("gap", "time_to_first_token.avg", "118.5", "result.time_to_first_token.avg"),
    ("gap", "request_latency", [1, 2], "result.request_latency"),
    ("gap", "input_config.perf_analyzer.stimulus.concurrency", "32",
     "result.input_config.perf_analyzer.stimulus.concurrency"),
    ("trt", "request_info.avg_input_length", "1024", "result.request_info.avg_input_length"),
    ("trt", "streaming_metrics", "yes", "result.streaming_metrics"),
    # negative
    ("vllm", "total_input_tokens", -204800, "result.total_input_tokens"),
    ("vllm", "std_itl_ms", -1.0, "result.std_itl_ms"),
    ("gap", "request_latency.p50", -3.0, "result.request_latency.p50"),
    ("trt", "performance.system_output_throughput_tok_s", -5.0, "result.performance.system_output_throughput_tok_s"),
    # not finite
    ("vllm", "mean_tpot_ms", math.nan, "result.mean_tpot_ms"),
    ("vllm", "output_throughput", math.inf, "result.output_throughput"),
    ("gap", "output_token_throughput.avg", math.inf, "result.output_token_throughput.avg"),
    ("trt", "streaming_metrics.avg_tpot_ms", math.nan, "result.streaming_metrics.avg_tpot_ms"),
    # nothing completed
    ("vllm", "completed", 0, "result.completed"),
    ("gap", "request_count.avg", 0.0, "result.request_count.avg"),
    ("trt", "request_info.num_requests", 0, "result.request_info.num_requests"),
    # a percentile below a smaller percentile of the same metric
    ("vllm", "p99_ttft_ms", 50.0, "result.p99_ttft_ms"),  # below the median (70.8)
    ("vllm", "p90_e2el_ms", 1100.0, "result.p99_e2el_ms"),  # p99 (1051.7) now below p90
    ("gap", "time_to_first_token.p99", 100.0, "result.time_to_first_token.p99"),
    ("gap", "inter_token_latency.max", 9.0, "result.inter_token_latency.max"),
    ("trt", "streaming_metrics.ttft_percentiles.p99", 1.0, "result.streaming_metrics.ttft_percentiles.p99"),
    ("trt", "performance.request_latency_percentiles_ms.p50", 30000.0,
     "result.performance.request_latency_percentiles_ms.p90"),
    # a mean outside [min, max]
    ("gap", "request_latency.avg", 99999.0, "result.request_latency.avg"),
    # other
    ("gap", "time_to_first_token.unit", "s", "result.time_to_first_token.unit"),
    ("vllm", "ramp_up_strategy", "linear", "result.ramp_up_strategy"),
]


@pytest.mark.parametrize(("tool", "key", "value", "field"), BAD, ids=[f"{b[0]}-{b[1]}-{b[3]}" for b in BAD])
def test_bad_result_names_the_field(tool: str, key: str, value: Any, field: str) -> None:
    doc = load(FILES[tool])
    if tool == "vllm" and key == "ramp_up_strategy":
        doc["max_concurrency"] = None
    mutate(doc, key, value)
    with pytest.raises(FormatError) as exc:
        PARSE[tool](doc, DEPS[tool], NO_HINT, SOURCE)
    assert exc.value.field == field, str(exc.value)
    assert isinstance(exc.value, ValueError) and str(exc.value).startswith(field + ": ")


@pytest.mark.parametrize("tool", ["vllm", "gap", "trt"])
@pytest.mark.parametrize(("change", "field"), [
    ({"tp": 2}, "deployment.gpu_count"),  # tp*pp*replicas = 2 on 1 GPU
    ({"gpu_count": 4, "tp": 2, "replicas": 1}, "deployment.gpu_count"),
    ({"gpu_count": 8, "tp": 2, "pp": 2, "replicas": 3}, "deployment.gpu_count"),
    ({"tp": "1"}, "deployment.tp"),
    ({"replicas": 0}, "deployment.replicas"),
    ({"model": ""}, "deployment.model"),
    ({"gpu": None}, "deployment.gpu"),
    ({"engine_version": 11}, "deployment.engine_version"),
])
def test_bad_deployment_names_the_field(tool: str, change: dict[str, Any], field: str) -> None:
    with pytest.raises(FormatError) as exc:
        PARSE[tool](load(FILES[tool]), replace(DEPS[tool], **change), NO_HINT, SOURCE)
    assert exc.value.field == field


@pytest.mark.parametrize("tool", ["vllm", "gap", "trt"])
@pytest.mark.parametrize(("hint", "field"), [
    (WorkloadHint(concurrency=0), "hint.concurrency"),
    (WorkloadHint(concurrency=2.5), "hint.concurrency"),  # type: ignore[arg-type]
    (WorkloadHint(request_rate=-1.0), "hint.request_rate"),
    (WorkloadHint(request_rate=math.inf), "hint.request_rate"),
    (WorkloadHint(input_tokens=0), "hint.input_tokens"),
    (WorkloadHint(output_tokens=math.nan), "hint.output_tokens"),
])
def test_bad_hint_names_the_field(tool: str, hint: WorkloadHint, field: str) -> None:
    with pytest.raises(FormatError) as exc:
        PARSE[tool](load(FILES[tool]), DEPS[tool], hint, SOURCE)
    assert exc.value.field == field


@pytest.mark.parametrize("tool", ["vllm", "gap", "trt"])
@pytest.mark.parametrize(("result", "field"), [([], "result"), ("{}", "result"), (None, "result")])
def test_result_not_an_object(tool: str, result: Any, field: str) -> None:
    with pytest.raises(FormatError) as exc:
        PARSE[tool](result, DEPS[tool], NO_HINT, SOURCE)
    assert exc.value.field == field


def test_source_is_required(vllm: dict[str, Any]) -> None:
    with pytest.raises(FormatError) as exc:
        parse_vllm_bench_serve(vllm, DEP_VLLM, NO_HINT, "  ")
    assert exc.value.field == "source"


# --- determinism ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["vllm", "gap", "trt"])
def test_row_id_is_deterministic(tool: str) -> None:
    parse, dep = PARSE[tool], DEPS[tool]
    first = parse(load(FILES[tool]), dep, NO_HINT, SOURCE)
    again = parse(load(FILES[tool]), dep, NO_HINT, SOURCE)
    assert first == again
    # the source text is provenance, not content: the same measurement keeps its id
    assert parse(load(FILES[tool]), dep, NO_HINT, "another label")[0]["row_id"] == first[0]["row_id"]
    changed = load(FILES[tool])
    key = {"vllm": "mean_ttft_ms", "gap": "time_to_first_token.avg", "trt": "streaming_metrics.avg_ttft_ms"}[tool]
    *parents, last = key.split(".")
    target = changed
    for p in parents:
        target = target[p]
    target[last] = target[last] * 1.01
    assert parse(changed, dep, NO_HINT, SOURCE)[0]["row_id"] != first[0]["row_id"]
    assert parse(load(FILES[tool]), replace(dep, gpu="h200-sxm"), NO_HINT, SOURCE)[0]["row_id"] != first[0]["row_id"]
    hint = WorkloadHint(concurrency=64) if tool == "trt" else WorkloadHint(output_tokens=999)
    assert parse(load(FILES[tool]), dep, hint, SOURCE)[0]["row_id"] != first[0]["row_id"]


def test_parsers_registry() -> None:
    assert set(PARSERS) == {"vllm_bench_serve", "genai_perf", "trtllm_bench"}
    assert PARSERS["vllm_bench_serve"] is parse_vllm_bench_serve
    assert PARSERS["genai_perf"] is parse_genai_perf
    assert PARSERS["trtllm_bench"] is parse_trtllm_bench
