"""Parsers of benchmark tools' result files into measurement rows (the columns of ``MeasurementRow``).

A tool's file does not record the whole deployment (GPU, layout, dtypes, engine), so the caller sends a
``DeploymentInfo`` with it, and a ``WorkloadHint`` for workload facts the file lacks. A hint only fills what the
file does not state: a concurrency or request rate that contradicts the file is an error, while token counts
measured by the tool always win over the hinted (configured) ones.

Every rejected input raises ``FormatError`` whose ``field`` is a dotted path into the posted body: the tool's file
under ``result`` (``result.mean_ttft_ms``, ``result.2.completed`` for the third run of a multi-run file), the
deployment under ``deployment`` and the hint under ``hint``.

Formats (each verified against the tool's source; see tests/fixtures/bench/README.md):

- ``vllm_bench_serve``: the JSON that ``vllm bench serve --save-result`` writes (vllm/benchmarks/serve.py,
  ``main_async`` -> ``result_json``); a file written with ``--append-result`` holds several runs, pass them as a list.
- ``genai_perf``: ``profile_export_genai_perf.json`` of ``genai-perf profile`` (genai_perf/export_data/
  json_exporter.py: the statistics of genai_perf/metrics/statistics.py plus ``input_config``), with the nested
  ``input_config`` of genai-perf >= 0.0.13 or the flat argument dump of earlier releases.
- ``trtllm_bench``: the ``--report_json`` file of ``trtllm-bench ... throughput`` (tensorrt_llm/bench/dataclasses/
  reporting.py, ``ReportUtility.get_statistics_dict``).

Rows are ``quality`` "good", ``source_id`` "user", and ``row_id`` "user-" + the first 16 hex digits of the SHA-256
of the canonical JSON of (format, the run, the deployment, the hint): the same measurement posted twice gets the same
id whatever ``source`` text comes with it. Statistics the row cannot hold (medians, percentiles, std) are kept in
``notes``, a JSON object that also names the tool and format.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import ValidationError

from gpu_catalog.schema import MEASUREMENT_COLUMNS, MeasurementRow

RESULT = "result"
DEPLOYMENT = "deployment"
HINT = "hint"
SOURCE = "source"

SOURCE_ID = "user"
_REL_TOL = 1e-9


class FormatError(ValueError):
    """A posted result file, deployment or hint is not usable; ``field`` is the dotted path of the bad value."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True)
class DeploymentInfo:
    """What the caller says about the measured system; ``replicas`` becomes the ``dp`` column."""

    model: str
    gpu: str
    gpu_count: int
    tp: int
    pp: int
    replicas: int
    weight_dtype: str
    kv_dtype: str
    engine: str
    engine_version: str | None = None


@dataclass(frozen=True)
class WorkloadHint:
    """Workload facts the caller gives for what the file does not record."""

    input_tokens: float | None = None
    output_tokens: float | None = None
    concurrency: int | None = None
    request_rate: float | None = None


# --------------------------------------------------------------------------------------------------------------
# Value checks


def _join(path: str, key: str | int) -> str:
    return f"{path}.{key}"


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _mapping(v: object, path: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise FormatError(path, f"expected a JSON object, got {type(v).__name__}")
    return v


def _require(obj: Mapping[str, Any], key: str, path: str) -> Any:
    if key not in obj or obj[key] is None:
        raise FormatError(_join(path, key), "required field is missing")
    return obj[key]


def _number(v: object, path: str, *, positive: bool = False) -> float:
    """A finite, non-negative number (strictly positive when ``positive``)."""
    if not _is_number(v):
        raise FormatError(path, f"expected a number, got {type(v).__name__}")
    f = float(v)  # type: ignore[arg-type]
    if not math.isfinite(f):
        raise FormatError(path, f"must be finite, got {v}")
    if f < 0:
        raise FormatError(path, f"must not be negative, got {v}")
    if positive and f == 0:
        raise FormatError(path, "must be positive, got 0")
    return f


def _count(v: object, path: str, *, minimum: int = 0) -> int:
    """A whole number (an int, or a float with no fraction as numpy statistics write counts) >= minimum."""
    f = _number(v, path)
    if f != int(f):
        raise FormatError(path, f"expected a whole number, got {v}")
    if f < minimum:
        raise FormatError(path, f"must be at least {minimum}, got {v}")
    return int(f)


def _opt_number(obj: Mapping[str, Any], key: str, path: str, *, positive: bool = False) -> float | None:
    v = obj.get(key)
    return None if v is None else _number(v, _join(path, key), positive=positive)


def _text(v: object, path: str, *, min_length: int = 1) -> str:
    if not isinstance(v, str):
        raise FormatError(path, f"expected a string, got {type(v).__name__}")
    if len(v.strip()) < min_length:
        raise FormatError(path, f"must have at least {min_length} non-blank characters")
    return v


def _check_order(points: list[tuple[float, str, float]]) -> None:
    """``points`` = (rank, field path, value) of one metric's statistics; a higher rank (a larger percentile, or
    the maximum) must not hold a smaller value than any lower rank."""
    best: tuple[str, float] | None = None
    for _, path, value in sorted(points, key=lambda p: p[0]):
        if best is not None and value < best[1] - _REL_TOL * max(1.0, abs(best[1])):
            raise FormatError(path, f"{value} is below {best[0]} = {best[1]}; percentiles must not decrease")
        if best is None or value > best[1]:
            best = (path, value)


def _check_mean(mean: float | None, mean_path: str, lo: float | None, hi: float | None) -> None:
    tol = _REL_TOL * max(1.0, abs(mean or 0.0))
    if mean is not None and ((lo is not None and mean < lo - tol) or (hi is not None and mean > hi + tol)):
        raise FormatError(mean_path, f"mean {mean} lies outside [min {lo}, max {hi}]")


def _check_deployment(dep: DeploymentInfo) -> None:
    if not isinstance(dep, DeploymentInfo):
        raise FormatError(DEPLOYMENT, "expected a DeploymentInfo")
    for name in ("model", "gpu", "weight_dtype", "kv_dtype", "engine"):
        _text(getattr(dep, name), _join(DEPLOYMENT, name))
    if dep.engine_version is not None:
        _text(dep.engine_version, _join(DEPLOYMENT, "engine_version"))
    for name in ("gpu_count", "tp", "pp", "replicas"):
        v = getattr(dep, name)
        if not isinstance(v, int) or isinstance(v, bool):
            raise FormatError(_join(DEPLOYMENT, name), f"expected an integer, got {type(v).__name__}")
        if v < 1:
            raise FormatError(_join(DEPLOYMENT, name), f"must be at least 1, got {v}")
    if dep.tp * dep.pp * dep.replicas != dep.gpu_count:
        raise FormatError(_join(DEPLOYMENT, "gpu_count"),
                          f"tp*pp*replicas = {dep.tp}*{dep.pp}*{dep.replicas} = {dep.tp * dep.pp * dep.replicas} "
                          f"does not equal gpu_count {dep.gpu_count}")


def _check_hint(hint: WorkloadHint) -> None:
    if not isinstance(hint, WorkloadHint):
        raise FormatError(HINT, "expected a WorkloadHint")
    for name in ("input_tokens", "output_tokens", "request_rate"):
        v = getattr(hint, name)
        if v is not None:
            _number(v, _join(HINT, name), positive=True)
    if hint.concurrency is not None:
        if not isinstance(hint.concurrency, int) or isinstance(hint.concurrency, bool):
            raise FormatError(_join(HINT, "concurrency"), f"expected an integer, got {type(hint.concurrency).__name__}")
        if hint.concurrency < 1:
            raise FormatError(_join(HINT, "concurrency"), f"must be at least 1, got {hint.concurrency}")


def _check_source(source: str) -> str:
    return _text(source, SOURCE, min_length=3)


# --------------------------------------------------------------------------------------------------------------
# Shared row assembly


@dataclass
class _Load:
    """The offered load of a run: closed-loop cap and/or open-loop rate (None = not set / infinite)."""

    concurrency: int | None
    request_rate: float | None
    used_hint: list[str]

    @property
    def mode(self) -> str:
        if self.concurrency is not None:
            return "concurrency"
        if self.request_rate is not None:
            return "request_rate"
        return "offline"


def _reconcile(file_value: float | None, file_states: bool, file_path: str, hint_value: float | None,
               hint_name: str, used: list[str]) -> float | None:
    """The file's value when the file states it (a contradicting hint is an error), else the hint's."""
    if file_states:
        if hint_value is not None and (file_value is None or not math.isclose(file_value, hint_value,
                                                                              rel_tol=_REL_TOL)):
            shown = "not set" if file_value is None else file_value
            raise FormatError(_join(HINT, hint_name), f"{hint_value} contradicts {file_path} ({shown})")
        return file_value
    if hint_value is not None:
        used.append(hint_name)
    return hint_value


def _tokens(measured: float | None, hint_value: float | None, hint_name: str, path: str, used: list[str]) -> float:
    if measured is not None:
        return measured
    if hint_value is None:
        raise FormatError(path, f"required field is missing (or give {HINT}.{hint_name})")
    used.append(hint_name)
    return hint_value


def _row_id(fmt: str, run: Any, dep: DeploymentInfo, hint: WorkloadHint) -> str:
    canonical = json.dumps({"format": fmt, "result": run, "deployment": asdict(dep), "hint": asdict(hint)},
                           sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True, default=repr)
    return "user-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def _clean(v: Any) -> Any:
    """JSON-safe copy for notes: drops None, empty containers and non-finite numbers."""
    if isinstance(v, Mapping):
        out = {str(k): _clean(x) for k, x in v.items()}
        return {k: x for k, x in out.items() if x is not None and x != {} and x != []}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v if v is None or isinstance(v, str | int | float | bool) else repr(v)


def _notes(tool: str, fmt: str, defined_in: str, **extra: Any) -> str:
    body = _clean({"tool": tool, "format": fmt, "format_defined_in": defined_in, **extra})
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _latency(value: float | None, zero: list[str], name: str) -> tuple[float | None, str | None]:
    """(value, stat) for a mean latency cell; a zero mean means the tool did not measure it (e.g. no streaming)."""
    if value is None:
        return None, None
    if value == 0:
        zero.append(name)
        return None, None
    return value, "mean"


def _finish(fmt: str, run: Any, path: str, dep: DeploymentInfo, hint: WorkloadHint, source: str,
            cells: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(MEASUREMENT_COLUMNS)
    row.update({
        "row_id": _row_id(fmt, run, dep, hint),
        "quality": "good",
        "source_id": SOURCE_ID,
        "source": source,
        "engine": dep.engine,
        "engine_version": dep.engine_version,
        "gpu": dep.gpu,
        "gpu_count": dep.gpu_count,
        "model": dep.model,
        "weight_dtype": dep.weight_dtype,
        "kv_dtype": dep.kv_dtype,
        "tp": dep.tp,
        "pp": dep.pp,
        "dp": dep.replicas,
    })
    unknown = set(cells) - set(row)
    if unknown:  # a programming error, not bad input
        raise KeyError(f"not MeasurementRow columns: {sorted(unknown)}")
    row.update(cells)
    try:
        MeasurementRow.model_validate(row)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise FormatError(path, f"does not make a valid measurement row ({loc}: {err['msg']})") from exc
    return row


def _dedupe(rows: list[dict[str, Any]], paths: list[str]) -> list[dict[str, Any]]:
    seen: dict[str, str] = {}
    for row, path in zip(rows, paths, strict=True):
        if row["row_id"] in seen:
            raise FormatError(path, f"is the same run as {seen[row['row_id']]}")
        seen[row["row_id"]] = path
    return rows


# --------------------------------------------------------------------------------------------------------------
# vllm bench serve

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
    p = _join(path, "request_rate")
    if isinstance(v, str):
        if v.strip().lower() in ("inf", "infinity"):
            return True, None
        raise FormatError(p, f"expected a number or 'inf', got {v!r}")
    if _is_number(v) and math.isinf(v) and v > 0:
        return True, None
    return True, _number(v, p, positive=True)


def _vllm_run(run_raw: Any, path: str, dep: DeploymentInfo, hint: WorkloadHint, source: str) -> dict[str, Any]:
    run = _mapping(run_raw, path)
    completed = _count(_require(run, "completed", path), _join(path, "completed"))
    if completed == 0:
        raise FormatError(_join(path, "completed"), "no completed requests")
    if run.get("failed") is not None:
        _count(run["failed"], _join(path, "failed"))
    total_in = _number(_require(run, "total_input_tokens", path), _join(path, "total_input_tokens"), positive=True)
    total_out = _number(_require(run, "total_output_tokens", path), _join(path, "total_output_tokens"),
                        positive=True)
    req_s = _number(_require(run, "request_throughput", path), _join(path, "request_throughput"), positive=True)
    out_s = _number(_require(run, "output_throughput", path), _join(path, "output_throughput"), positive=True)
    tot_s = _number(_require(run, "total_token_throughput", path), _join(path, "total_token_throughput"),
                    positive=True)
    for key in ("duration", "burstiness", "max_output_tokens_per_s", "request_goodput"):
        _opt_number(run, key, path)

    used: list[str] = []
    conc_raw = run.get("max_concurrency")
    conc_file = None if conc_raw is None else _count(conc_raw, _join(path, "max_concurrency"), minimum=1)
    concurrency = _reconcile(conc_file, "max_concurrency" in run, _join(path, "max_concurrency"),
                             hint.concurrency, "concurrency", used)
    rate_stated, rate_file = _vllm_rate(run, path)
    rate = _reconcile(rate_file, rate_stated, _join(path, "request_rate"), hint.request_rate, "request_rate", used)
    if "ramp_up_strategy" in run and run["ramp_up_strategy"] is not None:
        if concurrency is None:
            raise FormatError(_join(path, "ramp_up_strategy"),
                              "a ramp-up run has no single offered load; only ramp-up runs with max_concurrency "
                              "can be stored")
        rate = None
    if not rate_stated and concurrency is None and rate is None:
        raise FormatError(_join(path, "request_rate"),
                          f"required field is missing (or give {HINT}.request_rate or {HINT}.concurrency)")
    load = _Load(None if concurrency is None else int(concurrency), rate, used)

    # Latency statistics: the mean goes in the row, every other statistic in notes.
    stats: dict[str, dict[str, float]] = {}
    order: dict[str, list[tuple[float, str, float]]] = {}
    for key, value in run.items():
        m = _VLLM_STAT.match(key)
        if not m or value is None:
            continue
        kind, pct, metric = m.group(1), m.group(2), m.group(3)
        v = _number(value, _join(path, key))
        stats.setdefault(metric, {})[kind] = v
        if kind == "median":
            order.setdefault(metric, []).append((50.0, _join(path, key), v))
        elif pct is not None:
            order.setdefault(metric, []).append((float(pct), _join(path, key), v))
    for points in order.values():
        _check_order(points)

    zero: list[str] = []
    cells: dict[str, Any] = {}
    for metric, column in _VLLM_LATENCIES:
        value, stat = _latency(stats.get(metric, {}).get("mean"), zero, f"mean_{metric}_ms")
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
        "notes": _notes(
            "vllm bench serve", "vllm_bench_serve", _VLLM_DEFINED,
            latency_stats_ms={m: {k: v for k, v in s.items() if k != "mean"} for m, s in sorted(stats.items())},
            run={k: run[k] for k in _VLLM_RUN_KEYS if run.get(k) is not None},
            not_measured=zero, from_hint=load.used_hint),
    })
    return _finish("vllm_bench_serve", run_raw, path, dep, hint, source, cells)


def parse_vllm_bench_serve(result: dict[str, Any] | list[dict[str, Any]], dep: DeploymentInfo,
                           hint: WorkloadHint, source: str) -> list[dict[str, Any]]:
    """Rows of a ``vllm bench serve`` result: one object, or the list of runs of an ``--append-result`` file."""
    _check_deployment(dep)
    _check_hint(hint)
    source = _check_source(source)
    if isinstance(result, list):
        if not result:
            raise FormatError(RESULT, "the list of runs is empty")
        paths = [_join(RESULT, i) for i in range(len(result))]
        rows = [_vllm_run(run, p, dep, hint, source) for run, p in zip(result, paths, strict=True)]
        return _dedupe(rows, paths)
    return [_vllm_run(result, RESULT, dep, hint, source)]


# --------------------------------------------------------------------------------------------------------------
# genai-perf

_GAP_DEFINED = ("triton-inference-server/perf_analyzer genai-perf/genai_perf/export_data/json_exporter.py "
                "(statistics of genai_perf/metrics/statistics.py; checked against genai-perf 0.0.16)")
_GAP_PCT = re.compile(r"^p(\d+(?:\.\d+)?)$")
_GAP_TIME_UNIT = "ms"


def _gap_metric(result: Mapping[str, Any], name: str, *, required: bool, time: bool = False,
                positive_avg: bool = False) -> dict[str, float] | None:
    """One genai-perf metric object ({"unit", "avg", "p25", ..., "min", "max", "std"}), validated."""
    path = _join(RESULT, name)
    if result.get(name) is None:
        if required:
            raise FormatError(path, "required field is missing")
        return None
    obj = _mapping(result[name], path)
    if time and "unit" in obj and obj["unit"] != _GAP_TIME_UNIT:
        raise FormatError(_join(path, "unit"), f"expected {_GAP_TIME_UNIT!r}, got {obj['unit']!r}")
    avg = _number(_require(obj, "avg", path), _join(path, "avg"), positive=positive_avg)
    out: dict[str, float] = {"avg": avg}
    points: list[tuple[float, str, float]] = []
    for key, value in obj.items():
        if key in ("unit", "avg") or value is None:
            continue
        m = _GAP_PCT.match(key)
        if not (m or key in ("min", "max", "std")):
            continue
        v = _number(value, _join(path, key))
        out[key] = v
        if m:
            points.append((float(m.group(1)), _join(path, key), v))
        elif key == "min":
            points.append((-math.inf, _join(path, key), v))
        elif key == "max":
            points.append((math.inf, _join(path, key), v))
    _check_order(points)
    _check_mean(avg, _join(path, "avg"), out.get("min"), out.get("max"))
    return out


def _gap_load(cfg: Mapping[str, Any] | None, hint: WorkloadHint) -> _Load:
    """Concurrency / request rate from input_config (nested perf_analyzer.stimulus, or the flat args of older
    releases), else from the hint."""
    used: list[str] = []
    base = _join(RESULT, "input_config")
    conc: float | None = None
    rate: float | None = None
    stated = False
    conc_path = rate_path = base
    if cfg is not None:
        # the current layout nests the load under perf_analyzer.stimulus; the flat-argument era kept it at the top
        pa = cfg.get("perf_analyzer")
        src: Mapping[str, Any] | None = None
        if isinstance(pa, Mapping) and pa.get("stimulus") is not None:
            src_path = _join(_join(base, "perf_analyzer"), "stimulus")
            src = _mapping(pa["stimulus"], src_path)
        elif "concurrency" in cfg or "request_rate" in cfg:
            src, src_path = cfg, base
        if src is not None:
            conc_path, rate_path = _join(src_path, "concurrency"), _join(src_path, "request_rate")
            if src.get("concurrency") is not None:
                conc = _count(src["concurrency"], conc_path, minimum=1)
            if src.get("request_rate") is not None:
                rate = _number(src["request_rate"], rate_path, positive=True)
            stated = conc is not None or rate is not None
    concurrency = _reconcile(conc, stated, conc_path, hint.concurrency, "concurrency", used)
    request_rate = _reconcile(rate, stated, rate_path, hint.request_rate, "request_rate", used)
    if concurrency is None and request_rate is None:
        raise FormatError(_join(_join(base, "perf_analyzer"), "stimulus"),
                          f"no concurrency or request rate found (give {HINT}.concurrency or {HINT}.request_rate)")
    return _Load(None if concurrency is None else int(concurrency), request_rate, used)


def _gap_model(cfg: Mapping[str, Any] | None) -> str | None:
    if cfg is None:
        return None
    names = cfg.get("model_names", cfg.get("model"))
    if isinstance(names, list) and names and isinstance(names[0], str):
        return names[0]
    return names if isinstance(names, str) else None


def parse_genai_perf(result: dict[str, Any], dep: DeploymentInfo, hint: WorkloadHint,
                     source: str) -> list[dict[str, Any]]:
    """Rows of a genai-perf ``profile_export_genai_perf.json`` (one run per file)."""
    _check_deployment(dep)
    _check_hint(hint)
    source = _check_source(source)
    res = _mapping(result, RESULT)
    cfg = None if res.get("input_config") is None else _mapping(res["input_config"], _join(RESULT, "input_config"))

    count = _gap_metric(res, "request_count", required=False)
    if count is not None and _count(count["avg"], _join(_join(RESULT, "request_count"), "avg")) == 0:
        raise FormatError(_join(_join(RESULT, "request_count"), "avg"), "no completed requests")
    req_tp = _gap_metric(res, "request_throughput", required=True, positive_avg=True)
    out_tp = _gap_metric(res, "output_token_throughput", required=True, positive_avg=True)
    ttft = _gap_metric(res, "time_to_first_token", required=False, time=True)
    itl = _gap_metric(res, "inter_token_latency", required=False, time=True)
    e2e = _gap_metric(res, "request_latency", required=False, time=True)
    extra = {name: _gap_metric(res, name, required=False, time=name.startswith("time_"))
             for name in ("time_to_second_token", "output_token_throughput_per_user",
                          "output_token_throughput_per_request", "request_goodput")}
    isl = _gap_metric(res, "input_sequence_length", required=False, positive_avg=True)
    osl = _gap_metric(res, "output_sequence_length", required=False, positive_avg=True)
    assert req_tp is not None and out_tp is not None  # required=True

    used: list[str] = []
    in_tok = _tokens(None if isl is None else isl["avg"], hint.input_tokens, "input_tokens",
                     _join(RESULT, "input_sequence_length"), used)
    out_tok = _tokens(None if osl is None else osl["avg"], hint.output_tokens, "output_tokens",
                      _join(RESULT, "output_sequence_length"), used)
    load = _gap_load(cfg, hint)

    zero: list[str] = []
    ttft_v, ttft_s = _latency(None if ttft is None else ttft["avg"], zero, "time_to_first_token.avg")
    tpot_v, tpot_s = _latency(None if itl is None else itl["avg"], zero, "inter_token_latency.avg")
    e2e_v, e2e_s = _latency(None if e2e is None else e2e["avg"], zero, "request_latency.avg")

    def rest(m: dict[str, float] | None) -> dict[str, float] | None:
        return None if m is None else {k: v for k, v in m.items() if k != "avg"}

    stats = {"time_to_first_token_ms": rest(ttft), "inter_token_latency_ms": rest(itl),
             "request_latency_ms": rest(e2e), "input_sequence_length": rest(isl),
             "output_sequence_length": rest(osl)}
    stats.update({name: m for name, m in extra.items() if m is not None})
    cells: dict[str, Any] = {
        "mode": load.mode,
        "input_tokens": in_tok,
        "output_tokens": out_tok,
        "concurrency": load.concurrency,
        "request_rate": load.request_rate,
        "output_tok_s": out_tp["avg"],
        "requests_per_s": req_tp["avg"],
        "ttft_ms": ttft_v, "ttft_stat": ttft_s,
        # genai-perf's inter_token_latency is per request (request_latency - ttft) / (osl - 1), averaged over
        # requests: the TPOT definition (vLLM's mean_tpot_ms), not a mean over token gaps.
        "tpot_ms": tpot_v, "tpot_stat": tpot_s,
        "e2e_ms": e2e_v, "e2e_stat": e2e_s,
        "orig_model": _gap_model(cfg),
        "notes": _notes(
            "genai-perf profile", "genai_perf", _GAP_DEFINED,
            stats={k: v for k, v in stats.items() if v},
            request_count=None if count is None else count["avg"],
            mapping="inter_token_latency -> tpot_ms (genai-perf computes it per request as "
                    "(request_latency - time_to_first_token) / (output_sequence_length - 1))",
            not_measured=zero, from_hint=used + load.used_hint),
    }
    return [_finish("genai_perf", result, RESULT, dep, hint, source, cells)]


# --------------------------------------------------------------------------------------------------------------
# trtllm-bench

_TRT_DEFINED = ("NVIDIA/TensorRT-LLM tensorrt_llm/bench/dataclasses/reporting.py "
                "(ReportUtility.get_statistics_dict, written by --report_json)")
_TRT_PCT_RANK = {"minimum": -math.inf, "p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "maximum": math.inf}
_TRT_ENGINES = ("trtllm", "nim-trtllm")


def _trt_percentiles(obj_raw: Any, path: str) -> dict[str, float]:
    obj = _mapping(obj_raw, path)
    out: dict[str, float] = {}
    points: list[tuple[float, str, float]] = []
    for key, value in obj.items():
        if value is None or (key not in _TRT_PCT_RANK and key != "average"):
            continue
        v = _number(value, _join(path, key))
        out[key] = v
        if key in _TRT_PCT_RANK:
            points.append((_TRT_PCT_RANK[key], _join(path, key), v))
    _check_order(points)
    if "average" in out:
        _check_mean(out["average"], _join(path, "average"), out.get("minimum"), out.get("maximum"))
    return out


def _trt_world(world: Mapping[str, Any], dep: DeploymentInfo) -> dict[str, Any]:
    path = _join(RESULT, "world_info")
    got: dict[str, int] = {}
    for key in ("tp_size", "pp_size", "ep_size", "world_size", "max_batch_size", "max_num_tokens"):
        if world.get(key) is not None:
            got[key] = _count(world[key], _join(path, key), minimum=1)
    checks = [("world_size", dep.gpu_count, "gpu_count"), ("pp_size", dep.pp, "pp")]
    if dep.replicas == 1:  # with replicas (attention DP) the report's tp_size is the whole group
        checks.append(("tp_size", dep.tp, "tp"))
    for key, expected, dep_name in checks:
        if key in got and got[key] != expected:
            raise FormatError(_join(DEPLOYMENT, dep_name),
                              f"{expected} contradicts {_join(path, key)} = {got[key]} in the report")
    return got


def parse_trtllm_bench(result: dict[str, Any], dep: DeploymentInfo, hint: WorkloadHint,
                       source: str) -> list[dict[str, Any]]:
    """Rows of a ``trtllm-bench ... throughput --report_json`` report (one run per file). The report does not record
    ``--concurrency``: without ``hint.concurrency`` (or ``hint.request_rate``) the run is taken as offline."""
    _check_deployment(dep)
    _check_hint(hint)
    source = _check_source(source)
    if dep.engine not in _TRT_ENGINES:
        raise FormatError(_join(DEPLOYMENT, "engine"),
                          f"trtllm-bench measures TensorRT-LLM; expected one of {list(_TRT_ENGINES)}, "
                          f"got {dep.engine!r}")
    res = _mapping(result, RESULT)

    req_path = _join(RESULT, "request_info")
    req = _mapping(_require(res, "request_info", RESULT), req_path)
    n = _count(_require(req, "num_requests", req_path), _join(req_path, "num_requests"))
    if n == 0:
        raise FormatError(_join(req_path, "num_requests"), "no completed requests")
    in_tok = _number(_require(req, "avg_input_length", req_path), _join(req_path, "avg_input_length"), positive=True)
    out_tok = _number(_require(req, "avg_output_length", req_path), _join(req_path, "avg_output_length"),
                      positive=True)
    avg_conc = _opt_number(req, "avg_num_concurrent_requests", req_path)

    perf_path = _join(RESULT, "performance")
    perf = _mapping(_require(res, "performance", RESULT), perf_path)
    req_s = _number(_require(perf, "request_throughput_req_s", perf_path), _join(perf_path, "request_throughput_req_s"),
                    positive=True)
    out_s = _number(_require(perf, "system_output_throughput_tok_s", perf_path),
                    _join(perf_path, "system_output_throughput_tok_s"), positive=True)
    tot_s = _opt_number(perf, "system_total_throughput_tok_s", perf_path, positive=True)
    per_gpu = _opt_number(perf, "output_throughput_per_gpu_tok_s", perf_path, positive=True)
    per_user = _opt_number(perf, "output_throughput_per_user_tok_s", perf_path)
    total_ms = _opt_number(perf, "total_latency_ms", perf_path)
    e2e_mean = _opt_number(perf, "avg_request_latency_ms", perf_path)
    lat_pct = None
    if perf.get("request_latency_percentiles_ms") is not None:
        lat_pct = _trt_percentiles(perf["request_latency_percentiles_ms"],
                                   _join(perf_path, "request_latency_percentiles_ms"))
        if e2e_mean is not None:
            _check_mean(e2e_mean, _join(perf_path, "avg_request_latency_ms"), lat_pct.get("minimum"),
                        lat_pct.get("maximum"))

    stream: dict[str, Any] = {}
    ttft_mean = tpot_mean = None
    if res.get("streaming_metrics") is not None:
        s_path = _join(RESULT, "streaming_metrics")
        sm = _mapping(res["streaming_metrics"], s_path)
        ttft_mean = _opt_number(sm, "avg_ttft_ms", s_path)
        tpot_mean = _opt_number(sm, "avg_tpot_ms", s_path)
        speed = _opt_number(sm, "token_output_speed_tok_s", s_path)
        if speed is not None:
            stream["token_output_speed_tok_s"] = speed
        for key, mean_key in (("ttft_percentiles", "avg_ttft_ms"), ("tpot_percentiles", "avg_tpot_ms"),
                              ("gen_tps_percentiles", None)):
            if sm.get(key) is not None:
                pct = _trt_percentiles(sm[key], _join(s_path, key))
                stream[key] = pct
                mean = ttft_mean if mean_key == "avg_ttft_ms" else tpot_mean if mean_key else None
                if mean_key is not None and mean is not None:
                    _check_mean(mean, _join(s_path, mean_key), pct.get("minimum"), pct.get("maximum"))

    world = {} if res.get("world_info") is None else _trt_world(
        _mapping(res["world_info"], _join(RESULT, "world_info")), dep)
    engine = {} if res.get("engine") is None else dict(_mapping(res["engine"], _join(RESULT, "engine")))
    machine = None if res.get("machine") is None else _mapping(res["machine"], _join(RESULT, "machine"))
    file_version = engine.get("version") if isinstance(engine.get("version"), str) else None

    used: list[str] = []
    load = _Load(hint.concurrency, hint.request_rate, used)
    if hint.concurrency is not None:
        used.append("concurrency")
    if hint.request_rate is not None:
        used.append("request_rate")

    zero: list[str] = []
    ttft_v, ttft_s = _latency(ttft_mean, zero, "streaming_metrics.avg_ttft_ms")
    tpot_v, tpot_s = _latency(tpot_mean, zero, "streaming_metrics.avg_tpot_ms")
    e2e_v, e2e_s = _latency(e2e_mean, zero, "performance.avg_request_latency_ms")
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
        "notes": _notes(
            "trtllm-bench throughput", "trtllm_bench", _TRT_DEFINED,
            engine={k: v for k, v in engine.items() if isinstance(v, str | int | float) and not isinstance(v, bool)},
            world_info=world,
            machine=None if machine is None else dict(machine),
            request_info={"num_requests": n, "avg_num_concurrent_requests": avg_conc},
            performance={"total_latency_ms": total_ms, "output_throughput_per_user_tok_s": per_user,
                         "request_latency_percentiles_ms": lat_pct},
            streaming_metrics=stream,
            mode_basis=("hint" if used else "the report records no --concurrency; taken as an offline "
                        "(all requests at once) throughput run"),
            not_measured=zero, from_hint=used),
    }
    return [_finish("trtllm_bench", result, RESULT, dep, hint, source, cells)]


Parser = Callable[..., list[dict[str, Any]]]

PARSERS: dict[str, Parser] = {
    "vllm_bench_serve": parse_vllm_bench_serve,
    "genai_perf": parse_genai_perf,
    "trtllm_bench": parse_trtllm_bench,
}
