"""`trtllm-bench ... throughput --report_json`: the report of tensorrt_llm/bench/dataclasses/reporting.py
(``ReportUtility.get_statistics_dict``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from service.ingest.formats.checks import (
    DEPLOYMENT,
    RESULT,
    DeploymentInfo,
    FormatError,
    WorkloadHint,
    check_deployment,
    check_hint,
    check_mean,
    check_order,
    check_source,
    join,
    mapping,
    number,
    opt_number,
    require,
    whole_count,
)
from service.ingest.formats.rows import Load, finish, latency, notes

_TRT_DEFINED = ("NVIDIA/TensorRT-LLM tensorrt_llm/bench/dataclasses/reporting.py "
                "(ReportUtility.get_statistics_dict, written by --report_json)")
_TRT_PCT_RANK = {"minimum": -math.inf, "p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "maximum": math.inf}
_TRT_ENGINES = ("trtllm", "nim-trtllm")


def _trt_percentiles(obj_raw: Any, path: str) -> dict[str, float]:
    obj = mapping(obj_raw, path)
    out: dict[str, float] = {}
    points: list[tuple[float, str, float]] = []
    for key, value in obj.items():
        if value is None or (key not in _TRT_PCT_RANK and key != "average"):
            continue
        v = number(value, join(path, key))
        out[key] = v
        if key in _TRT_PCT_RANK:
            points.append((_TRT_PCT_RANK[key], join(path, key), v))
    check_order(points)
    if "average" in out:
        check_mean(out["average"], join(path, "average"), out.get("minimum"), out.get("maximum"))
    return out


def _trt_world(world: Mapping[str, Any], dep: DeploymentInfo) -> dict[str, Any]:
    path = join(RESULT, "world_info")
    got: dict[str, int] = {}
    for key in ("tp_size", "pp_size", "ep_size", "world_size", "max_batch_size", "max_num_tokens"):
        if world.get(key) is not None:
            got[key] = whole_count(world[key], join(path, key), minimum=1)
    checks = [("world_size", dep.gpu_count, "gpu_count"), ("pp_size", dep.pp, "pp")]
    if dep.replicas == 1:  # with replicas (attention DP) the report's tp_size is the whole group
        checks.append(("tp_size", dep.tp, "tp"))
    for key, expected, dep_name in checks:
        if key in got and got[key] != expected:
            raise FormatError(join(DEPLOYMENT, dep_name),
                              f"{expected} contradicts {join(path, key)} = {got[key]} in the report")
    return got


def _trt_performance(res: Mapping[str, Any]) -> dict[str, Any]:
    """The checked ``performance`` section: throughputs, mean request latency and its percentiles."""
    perf_path = join(RESULT, "performance")
    perf = mapping(require(res, "performance", RESULT), perf_path)
    req_s = number(require(perf, "request_throughput_req_s", perf_path), join(perf_path, "request_throughput_req_s"),
                    positive=True)
    out_s = number(require(perf, "system_output_throughput_tok_s", perf_path),
                    join(perf_path, "system_output_throughput_tok_s"), positive=True)
    tot_s = opt_number(perf, "system_total_throughput_tok_s", perf_path, positive=True)
    per_gpu = opt_number(perf, "output_throughput_per_gpu_tok_s", perf_path, positive=True)
    per_user = opt_number(perf, "output_throughput_per_user_tok_s", perf_path)
    total_ms = opt_number(perf, "total_latency_ms", perf_path)
    e2e_mean = opt_number(perf, "avg_request_latency_ms", perf_path)
    lat_pct = None
    if perf.get("request_latency_percentiles_ms") is not None:
        lat_pct = _trt_percentiles(perf["request_latency_percentiles_ms"],
                                   join(perf_path, "request_latency_percentiles_ms"))
        if e2e_mean is not None:
            check_mean(e2e_mean, join(perf_path, "avg_request_latency_ms"), lat_pct.get("minimum"),
                        lat_pct.get("maximum"))
    return {"req_s": req_s, "out_s": out_s, "tot_s": tot_s, "per_gpu": per_gpu, "per_user": per_user,
            "total_ms": total_ms, "e2e_mean": e2e_mean, "lat_pct": lat_pct}


def _trt_streaming(res: Mapping[str, Any]) -> tuple[dict[str, Any], float | None, float | None]:
    """The checked ``streaming_metrics`` section (what goes in notes), with the TTFT and TPOT means."""
    stream: dict[str, Any] = {}
    ttft_mean = tpot_mean = None
    if res.get("streaming_metrics") is not None:
        s_path = join(RESULT, "streaming_metrics")
        sm = mapping(res["streaming_metrics"], s_path)
        ttft_mean = opt_number(sm, "avg_ttft_ms", s_path)
        tpot_mean = opt_number(sm, "avg_tpot_ms", s_path)
        speed = opt_number(sm, "token_output_speed_tok_s", s_path)
        if speed is not None:
            stream["token_output_speed_tok_s"] = speed
        for key, mean_key in (("ttft_percentiles", "avg_ttft_ms"), ("tpot_percentiles", "avg_tpot_ms"),
                              ("gen_tps_percentiles", None)):
            if sm.get(key) is not None:
                pct = _trt_percentiles(sm[key], join(s_path, key))
                stream[key] = pct
                mean = ttft_mean if mean_key == "avg_ttft_ms" else tpot_mean if mean_key else None
                if mean_key is not None and mean is not None:
                    check_mean(mean, join(s_path, mean_key), pct.get("minimum"), pct.get("maximum"))
    return stream, ttft_mean, tpot_mean


def parse_trtllm_bench(result: dict[str, Any], dep: DeploymentInfo, hint: WorkloadHint,
                       source: str) -> list[dict[str, Any]]:
    """Rows of a ``trtllm-bench ... throughput --report_json`` report (one run per file). The report does not record
    ``--concurrency``: without ``hint.concurrency`` (or ``hint.request_rate``) the run is taken as offline."""
    check_deployment(dep)
    check_hint(hint)
    source = check_source(source)
    if dep.engine not in _TRT_ENGINES:
        raise FormatError(join(DEPLOYMENT, "engine"),
                          f"trtllm-bench measures TensorRT-LLM; expected one of {list(_TRT_ENGINES)}, "
                          f"got {dep.engine!r}")
    res = mapping(result, RESULT)

    req_path = join(RESULT, "request_info")
    req = mapping(require(res, "request_info", RESULT), req_path)
    n = whole_count(require(req, "num_requests", req_path), join(req_path, "num_requests"))
    if n == 0:
        raise FormatError(join(req_path, "num_requests"), "no completed requests")
    in_tok = number(require(req, "avg_input_length", req_path), join(req_path, "avg_input_length"), positive=True)
    out_tok = number(require(req, "avg_output_length", req_path), join(req_path, "avg_output_length"),
                      positive=True)
    avg_conc = opt_number(req, "avg_num_concurrent_requests", req_path)

    perf = _trt_performance(res)
    req_s, out_s, tot_s, per_gpu = perf["req_s"], perf["out_s"], perf["tot_s"], perf["per_gpu"]
    e2e_mean = perf["e2e_mean"]

    stream, ttft_mean, tpot_mean = _trt_streaming(res)

    world = {} if res.get("world_info") is None else _trt_world(
        mapping(res["world_info"], join(RESULT, "world_info")), dep)
    engine = {} if res.get("engine") is None else dict(mapping(res["engine"], join(RESULT, "engine")))
    machine = None if res.get("machine") is None else mapping(res["machine"], join(RESULT, "machine"))
    file_version = engine.get("version") if isinstance(engine.get("version"), str) else None

    used: list[str] = []
    load = Load(hint.concurrency, hint.request_rate, used)
    if hint.concurrency is not None:
        used.append("concurrency")
    if hint.request_rate is not None:
        used.append("request_rate")

    zero: list[str] = []
    ttft_v, ttft_s = latency(ttft_mean, zero, "streaming_metrics.avg_ttft_ms")
    tpot_v, tpot_s = latency(tpot_mean, zero, "streaming_metrics.avg_tpot_ms")
    e2e_v, e2e_s = latency(e2e_mean, zero, "performance.avg_request_latency_ms")
    ep = world.get("ep_size")
    cells: dict[str, Any] = {
        "engine_version": dep.engine_version or file_version,
        "ep": ep if ep is not None and ep > 1 else None,
        "mode": load.mode,
        "input_tokens": in_tok,
        "output_tokens": out_tok,
        "concurrency": load.concurrency,
        "request_rate": load.request_rate,
        "max_batch": world.get("max_batch_size"),
        "output_tok_s": out_s,
        "output_tok_s_per_gpu": per_gpu,
        "total_tok_s": tot_s,
        "requests_per_s": req_s,
        "ttft_ms": ttft_v, "ttft_stat": ttft_s,
        "tpot_ms": tpot_v, "tpot_stat": tpot_s,
        "e2e_ms": e2e_v, "e2e_stat": e2e_s,
        "orig_gpu": machine.get("name") if machine is not None and isinstance(machine.get("name"), str) else None,
        "orig_model": engine.get("model") if isinstance(engine.get("model"), str) else None,
        "notes": notes(
            "trtllm-bench throughput", "trtllm_bench", _TRT_DEFINED,
            engine={k: v for k, v in engine.items() if isinstance(v, str | int | float) and not isinstance(v, bool)},
            world_info=world,
            machine=None if machine is None else dict(machine),
            request_info={"num_requests": n, "avg_num_concurrent_requests": avg_conc},
            performance={"total_latency_ms": perf["total_ms"], "output_throughput_per_user_tok_s": perf["per_user"],
                         "request_latency_percentiles_ms": perf["lat_pct"]},
            streaming_metrics=stream,
            mode_basis=("hint" if used else "the report records no --concurrency; taken as an offline "
                        "(all requests at once) throughput run"),
            not_measured=zero, from_hint=used),
    }
    return [finish("trtllm_bench", result, RESULT, dep, hint, source, cells)]
