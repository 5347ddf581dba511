"""`vllm bench serve --save-result`: the JSON vllm/benchmarks/serve.py writes (``main_async`` ->
``result_json``); a file written with ``--append-result`` holds several runs, passed as a list.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from service.ingest.formats.checks import (
    HINT,
    RESULT,
    DeploymentInfo,
    FormatError,
    WorkloadHint,
    check_deployment,
    check_hint,
    check_order,
    check_source,
    is_number,
    join,
    mapping,
    number,
    opt_number,
    require,
    whole_count,
)
from service.ingest.formats.rows import Load, dedupe, finish, latency, notes, reconcile

_VLLM_DEFINED = "vllm-project/vllm vllm/benchmarks/serve.py (main_async: result_json of --save-result)"
_VLLM_LATENCIES = (("ttft", "ttft_ms"), ("tpot", "tpot_ms"), ("itl", "itl_ms"), ("e2el", "e2e_ms"))
_VLLM_STAT = re.compile(r"^(mean|median|std|p(\d+(?:\.\d+)?))_([a-z0-9_]+)_ms$")
_VLLM_RUN_KEYS = ("date", "backend", "label", "model_id", "tokenizer_id", "num_prompts", "burstiness", "duration",
                  "failed", "request_goodput", "max_output_tokens_per_s", "max_concurrent_requests",
                  "ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps")


def _vllm_rate(run: Mapping[str, Any], path: str) -> tuple[bool, float | None]:
    """(stated, finite rate or None for 'inf')."""
    if "request_rate" not in run or run["request_rate"] is None:
        return False, None
    v = run["request_rate"]
    p = join(path, "request_rate")
    if isinstance(v, str):
        if v.strip().lower() in ("inf", "infinity"):
            return True, None
        raise FormatError(p, f"expected a number or 'inf', got {v!r}")
    if is_number(v) and math.isinf(v) and v > 0:
        return True, None
    return True, number(v, p, positive=True)


def _vllm_run(run_raw: Any, path: str, dep: DeploymentInfo, hint: WorkloadHint, source: str) -> dict[str, Any]:
    run = mapping(run_raw, path)
    completed = whole_count(require(run, "completed", path), join(path, "completed"))
    if completed == 0:
        raise FormatError(join(path, "completed"), "no completed requests")
    if run.get("failed") is not None:
        whole_count(run["failed"], join(path, "failed"))
    total_in = number(require(run, "total_input_tokens", path), join(path, "total_input_tokens"), positive=True)
    total_out = number(require(run, "total_output_tokens", path), join(path, "total_output_tokens"),
                        positive=True)
    req_s = number(require(run, "request_throughput", path), join(path, "request_throughput"), positive=True)
    out_s = number(require(run, "output_throughput", path), join(path, "output_throughput"), positive=True)
    tot_s = number(require(run, "total_token_throughput", path), join(path, "total_token_throughput"),
                    positive=True)
    for key in ("duration", "burstiness", "max_output_tokens_per_s", "request_goodput"):
        opt_number(run, key, path)

    used: list[str] = []
    conc_raw = run.get("max_concurrency")
    conc_file = None if conc_raw is None else whole_count(conc_raw, join(path, "max_concurrency"), minimum=1)
    concurrency = reconcile(conc_file, "max_concurrency" in run, join(path, "max_concurrency"),
                             hint.concurrency, "concurrency", used)
    rate_stated, rate_file = _vllm_rate(run, path)
    rate = reconcile(rate_file, rate_stated, join(path, "request_rate"), hint.request_rate, "request_rate", used)
    if "ramp_up_strategy" in run and run["ramp_up_strategy"] is not None:
        if concurrency is None:
            raise FormatError(join(path, "ramp_up_strategy"),
                              "a ramp-up run has no single offered load; only ramp-up runs with max_concurrency "
                              "can be stored")
        rate = None
    if not rate_stated and concurrency is None and rate is None:
        raise FormatError(join(path, "request_rate"),
                          f"required field is missing (or give {HINT}.request_rate or {HINT}.concurrency)")
    load = Load(None if concurrency is None else int(concurrency), rate, used)

    # Latency statistics: the mean goes in the row, every other statistic in notes.
    stats: dict[str, dict[str, float]] = {}
    order: dict[str, list[tuple[float, str, float]]] = {}
    for key, value in run.items():
        m = _VLLM_STAT.match(key)
        if not m or value is None:
            continue
        kind, pct, metric = m.group(1), m.group(2), m.group(3)
        v = number(value, join(path, key))
        stats.setdefault(metric, {})[kind] = v
        if kind == "median":
            order.setdefault(metric, []).append((50.0, join(path, key), v))
        elif pct is not None:
            order.setdefault(metric, []).append((float(pct), join(path, key), v))
    for points in order.values():
        check_order(points)

    zero: list[str] = []
    cells: dict[str, Any] = {}
    for metric, column in _VLLM_LATENCIES:
        value, stat = latency(stats.get(metric, {}).get("mean"), zero, f"mean_{metric}_ms")
        cells[column] = value
        cells[column.replace("_ms", "_stat")] = stat
    cells.update({
        "mode": load.mode,
        "input_tokens": total_in / completed,
        "output_tokens": total_out / completed,
        "concurrency": load.concurrency,
        "request_rate": load.request_rate,
        "output_tok_s": out_s,
        "total_tok_s": tot_s,
        "requests_per_s": req_s,
        "orig_model": run.get("model_id") if isinstance(run.get("model_id"), str) else None,
        "notes": notes(
            "vllm bench serve", "vllm_bench_serve", _VLLM_DEFINED,
            latency_stats_ms={m: {k: v for k, v in s.items() if k != "mean"} for m, s in sorted(stats.items())},
            run={k: run[k] for k in _VLLM_RUN_KEYS if run.get(k) is not None},
            not_measured=zero, from_hint=load.used_hint),
    })
    return finish("vllm_bench_serve", run_raw, path, dep, hint, source, cells)


def parse_vllm_bench_serve(result: dict[str, Any] | list[dict[str, Any]], dep: DeploymentInfo,
                           hint: WorkloadHint, source: str) -> list[dict[str, Any]]:
    """Rows of a ``vllm bench serve`` result: one object, or the list of runs of an ``--append-result`` file."""
    check_deployment(dep)
    check_hint(hint)
    source = check_source(source)
    if isinstance(result, list):
        if not result:
            raise FormatError(RESULT, "the list of runs is empty")
        paths = [join(RESULT, i) for i in range(len(result))]
        rows = [_vllm_run(run, p, dep, hint, source) for run, p in zip(result, paths, strict=True)]
        return dedupe(rows, paths)
    return [_vllm_run(result, RESULT, dep, hint, source)]
