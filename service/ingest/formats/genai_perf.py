"""`genai-perf profile`: ``profile_export_genai_perf.json`` (genai_perf/export_data/json_exporter.py: the
statistics of genai_perf/metrics/statistics.py plus ``input_config``), with the nested ``input_config`` of
genai-perf >= 0.0.13 or the flat argument dump of earlier releases.
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
    check_mean,
    check_order,
    check_source,
    join,
    mapping,
    number,
    require,
    whole_count,
)
from service.ingest.formats.rows import Load, finish, latency, notes, reconcile, tokens

_GAP_DEFINED = ("triton-inference-server/perf_analyzer genai-perf/genai_perf/export_data/json_exporter.py "
                "(statistics of genai_perf/metrics/statistics.py; checked against genai-perf 0.0.16)")
_GAP_PCT = re.compile(r"^p(\d+(?:\.\d+)?)$")
_GAP_TIME_UNIT = "ms"


def _gap_metric(result: Mapping[str, Any], name: str, *, required: bool, time: bool = False,
                positive_avg: bool = False) -> dict[str, float] | None:
    """One genai-perf metric object ({"unit", "avg", "p25", ..., "min", "max", "std"}), validated."""
    path = join(RESULT, name)
    if result.get(name) is None:
        if required:
            raise FormatError(path, "required field is missing")
        return None
    obj = mapping(result[name], path)
    if time and "unit" in obj and obj["unit"] != _GAP_TIME_UNIT:
        raise FormatError(join(path, "unit"), f"expected {_GAP_TIME_UNIT!r}, got {obj['unit']!r}")
    avg = number(require(obj, "avg", path), join(path, "avg"), positive=positive_avg)
    out: dict[str, float] = {"avg": avg}
    points: list[tuple[float, str, float]] = []
    for key, value in obj.items():
        if key in ("unit", "avg") or value is None:
            continue
        m = _GAP_PCT.match(key)
        if not (m or key in ("min", "max", "std")):
            continue
        v = number(value, join(path, key))
        out[key] = v
        if m:
            points.append((float(m.group(1)), join(path, key), v))
        elif key == "min":
            points.append((-math.inf, join(path, key), v))
        elif key == "max":
            points.append((math.inf, join(path, key), v))
    check_order(points)
    check_mean(avg, join(path, "avg"), out.get("min"), out.get("max"))
    return out


def _gap_load(cfg: Mapping[str, Any] | None, hint: WorkloadHint) -> Load:
    """Concurrency / request rate from input_config (nested perf_analyzer.stimulus, or the flat args of older
    releases), else from the hint."""
    used: list[str] = []
    base = join(RESULT, "input_config")
    conc: float | None = None
    rate: float | None = None
    stated = False
    conc_path = rate_path = base
    if cfg is not None:
        # the current layout nests the load under perf_analyzer.stimulus; the flat-argument era kept it at the top
        pa = cfg.get("perf_analyzer")
        src: Mapping[str, Any] | None = None
        if isinstance(pa, Mapping) and pa.get("stimulus") is not None:
            src_path = join(join(base, "perf_analyzer"), "stimulus")
            src = mapping(pa["stimulus"], src_path)
        elif "concurrency" in cfg or "request_rate" in cfg:
            src, src_path = cfg, base
        if src is not None:
            conc_path, rate_path = join(src_path, "concurrency"), join(src_path, "request_rate")
            if src.get("concurrency") is not None:
                conc = whole_count(src["concurrency"], conc_path, minimum=1)
            if src.get("request_rate") is not None:
                rate = number(src["request_rate"], rate_path, positive=True)
            stated = conc is not None or rate is not None
    concurrency = reconcile(conc, stated, conc_path, hint.concurrency, "concurrency", used)
    request_rate = reconcile(rate, stated, rate_path, hint.request_rate, "request_rate", used)
    if concurrency is None and request_rate is None:
        raise FormatError(join(join(base, "perf_analyzer"), "stimulus"),
                          f"no concurrency or request rate found (give {HINT}.concurrency or {HINT}.request_rate)")
    return Load(None if concurrency is None else int(concurrency), request_rate, used)


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
    check_deployment(dep)
    check_hint(hint)
    source = check_source(source)
    res = mapping(result, RESULT)
    cfg = None if res.get("input_config") is None else mapping(res["input_config"], join(RESULT, "input_config"))

    count = _gap_metric(res, "request_count", required=False)
    if count is not None and whole_count(count["avg"], join(join(RESULT, "request_count"), "avg")) == 0:
        raise FormatError(join(join(RESULT, "request_count"), "avg"), "no completed requests")
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
    in_tok = tokens(None if isl is None else isl["avg"], hint.input_tokens, "input_tokens",
                     join(RESULT, "input_sequence_length"), used)
    out_tok = tokens(None if osl is None else osl["avg"], hint.output_tokens, "output_tokens",
                      join(RESULT, "output_sequence_length"), used)
    load = _gap_load(cfg, hint)

    zero: list[str] = []
    ttft_v, ttft_s = latency(None if ttft is None else ttft["avg"], zero, "time_to_first_token.avg")
    tpot_v, tpot_s = latency(None if itl is None else itl["avg"], zero, "inter_token_latency.avg")
    e2e_v, e2e_s = latency(None if e2e is None else e2e["avg"], zero, "request_latency.avg")

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
        "notes": notes(
            "genai-perf profile", "genai_perf", _GAP_DEFINED,
            stats={k: v for k, v in stats.items() if v},
            request_count=None if count is None else count["avg"],
            mapping="inter_token_latency -> tpot_ms (genai-perf computes it per request as "
                    "(request_latency - time_to_first_token) / (output_sequence_length - 1))",
            not_measured=zero, from_hint=used + load.used_hint),
    }
    return [finish("genai_perf", result, RESULT, dep, hint, source, cells)]
