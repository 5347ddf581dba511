"""Bad input names the field: every parser rejects a bad result file, deployment, hint or source with a
``FormatError`` whose ``field`` is the dotted path of the bad value."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from service.ingest.formats import (
    FormatError,
    WorkloadHint,
    parse_vllm_bench_serve,
)
from tests.ingest.formats.bench import DEP_VLLM, DEPS, FILES, NO_HINT, PARSE, SOURCE, load


@pytest.fixture
def vllm() -> dict[str, Any]:
    return load("vllm_bench_serve.json")


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
