"""Stored benchmark measurements as arrays the cost model scores (``MeasurementSet``, ``prepare``), and the
rows left out of the fit."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gpu_catalog.loader import Catalog
from gpu_catalog.schema import CostConstants, ModelSpec
from service.core.calibration.segments import MODELLED_ENGINES, calibration_engine, model_class
from service.core.candidates import MODES, Candidates
from service.core.memory import ASSUMED_REQUESTS_PER_CLIENT, static_terms
from service.core.moe_layout import Layout, LayoutError, check_layout
from service.core.tables import Tables
from service.core.types import F
from service.engines.defaults import is_current, resolve

CENTRAL_STATS = ("mean", "median", "p50", "single", "batch_prefill")
METRICS = ("throughput", "ttft", "tpot")


def _central(stat: str | None) -> bool:
    return bool(stat) and str(stat).split(" ")[0].lower() in CENTRAL_STATS


def _f(v: Any) -> float:
    if v is None or v == "":
        return math.nan
    return float(v)


@dataclass
class MeasurementSet:
    """Measurements that the cost model can score, as arrays aligned with ``cand``."""

    cand: Candidates
    y: F                                 # (n, 3) measured throughput tok/s, TTFT s, TPOT s; NaN = not published
    thr_is_total: NDArray[np.bool_]      # throughput is (input + output) tok/s
    current: NDArray[np.bool_]           # engine release of the targeted generation
    keys: list[tuple[str, str, str, str]]  # (engine, arch, gpu, dtype)
    classes: list[str]                   # model class: dense, moe or mla (keys the software overheads)
    sources: list[str]
    families: list[str]                  # model family (base/instruct/chat variants of one architecture)
    row_ids: list[str]
    modes: list[str]
    skipped: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.row_ids)

    def take(self, idx: NDArray[Any]) -> MeasurementSet:
        sel = list(np.asarray(idx))
        return MeasurementSet(
            cand=self.cand.take(idx), y=self.y[idx], thr_is_total=self.thr_is_total[idx],
            current=self.current[idx], keys=[self.keys[i] for i in sel], classes=[self.classes[i] for i in sel],
            sources=[self.sources[i] for i in sel],
            families=[self.families[i] for i in sel], row_ids=[self.row_ids[i] for i in sel],
            modes=[self.modes[i] for i in sel])


def prepare(rows: Iterable[Mapping[str, Any]], catalog: Catalog, tables: Tables,
            constants: CostConstants) -> MeasurementSet:
    """Turn measurement rows (published.csv columns) into candidates the model scores, skipping (and counting)
    rows it cannot: other engines, unknown ids, missing lengths or layout."""
    idx = tables.index()
    gpus = {g.id: g for g in catalog.gpus}
    arch = {g.id: g.architecture for g in catalog.gpus}
    vendor = {g.id: g.vendor for g in catalog.gpus}
    cols: dict[str, list[Any]] = {k: [] for k in (
        "model", "gpu", "wdtype", "kvdtype", "budget", "tp", "pp", "ep", "replicas", "max_num_seqs", "max_batched_tok",
        "mem_fraction", "reserve_full", "input_tok", "output_tok", "mode", "load", "context_tok", "first_wave_share",
        "dp")}
    y: list[tuple[float, float, float]] = []
    total: list[bool] = []
    current: list[bool] = []
    keys: list[tuple[str, str, str, str]] = []
    classes: list[str] = []
    sources: list[str] = []
    families: list[str] = []
    row_ids: list[str] = []
    modes: list[str] = []
    skipped: dict[str, int] = {}

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    ordered = sorted(rows, key=lambda row: str(row.get("row_id") or ""))
    duplicates = duplicate_latency(ordered, catalog)
    for r in ordered:
        engine = str(r.get("engine") or "")
        if engine not in MODELLED_ENGINES:
            skip(f"engine {engine or 'unknown'} not modelled")
            continue
        if str(r.get("row_id") or "") in duplicates:
            skip(duplicates[str(r.get("row_id") or "")])
            continue
        model = catalog.resolve_model(str(r.get("model") or ""))
        gpu_id = str(r.get("gpu") or "")
        wd = str(r.get("weight_dtype") or "")
        kv = run_kv_dtype(r)
        mode = str(r.get("mode") or "")
        if model is None or gpu_id not in idx["gpu"]:
            skip("model or gpu not in catalog")
            continue
        if wd not in idx["wdtype"] or kv not in idx["kvdtype"]:
            skip("dtype not in catalog")
            continue
        if mode not in MODES:
            skip("no workload mode")
            continue
        i_tok, o_tok = _f(r.get("input_tokens")), _f(r.get("output_tokens"))
        tp, pp = _f(r.get("tp")), _f(r.get("pp"))
        n_gpu = _f(r.get("gpu_count"))
        if math.isnan(i_tok) or math.isnan(o_tok) or math.isnan(tp):
            skip("input/output length or tp not published")
            continue
        if constants.engines[engine].ends_sequences_at_context_window and i_tok + o_tok > model.max_position_embeddings:
            skip(PAST_CONTEXT)
            continue
        pp = 1.0 if math.isnan(pp) else pp
        dp = _f(r.get("dp"))
        if math.isnan(dp):
            dp = max(round(n_gpu / (tp * pp)), 1) if not math.isnan(n_gpu) else 1.0
        load = _f(r.get("concurrency")) if mode in ("concurrency", "static_batch") else _f(r.get("request_rate"))
        if mode == "offline":
            load = offline_requests(r)
        if mode in ("concurrency", "static_batch", "request_rate") and math.isnan(load):
            skip("load (concurrency or rate) not published")
            continue
        thr = _f(r.get("output_tok_s"))
        is_total = False
        if math.isnan(thr):
            per_gpu = _f(r.get("output_tok_s_per_gpu"))
            if not math.isnan(per_gpu):
                thr = per_gpu * (n_gpu if not math.isnan(n_gpu) else tp * pp * dp)
            else:
                thr = _f(r.get("total_tok_s"))
                is_total = not math.isnan(thr)
        ttft = _f(r.get("ttft_ms")) / 1e3 if _central(r.get("ttft_stat")) else math.nan
        tpot = _f(r.get("tpot_ms")) / 1e3 if _central(r.get("tpot_stat")) else math.nan
        if math.isnan(tpot) and _central(r.get("itl_stat")):
            tpot = _f(r.get("itl_ms")) / 1e3
        ep = _f(r.get("ep"))
        ep = 1.0 if math.isnan(ep) else ep
        attn_dp = attention_dp_ranks(r, dp, model.num_experts is not None)
        if attn_dp > 1 or ep > 1:
            # attention DP / expert parallelism: fitted as the layout it is (one replica of tp x pp x dp GPUs
            # whose ranks share the experts), unless the cost model cannot represent it
            why = layout_not_modelled(model, tp, pp, attn_dp, ep, gpus[gpu_id].max_gpus_per_node)
            if why:
                skip(why)
                continue
            dp = max(round(n_gpu / (tp * pp * attn_dp)), 1) if not math.isnan(n_gpu) else 1.0
        layout = unmodelled_layout(r, dp, model.num_experts is not None) if attn_dp == 1 else ""
        if layout and not (math.isnan(ttft) and math.isnan(tpot)):
            skip(f"latency not fitted: {layout}")
            ttft = tpot = math.nan
        if all(math.isnan(v) for v in (thr, ttft, tpot)):
            if not layout:
                skip("no throughput or central latency published")
            continue
        version = str(r.get("engine_version") or "")
        d = resolve(engine, version, gpus[gpu_id], constants)
        max_batch = _f(r.get("max_batch"))
        cols["model"].append(idx["model"][model.id])
        cols["gpu"].append(idx["gpu"][gpu_id])
        cols["wdtype"].append(idx["wdtype"][wd])
        cols["kvdtype"].append(idx["kvdtype"][kv])
        cols["budget"].append(d.budget)
        cols["tp"].append(tp)
        cols["pp"].append(pp)
        cols["ep"].append(ep)
        cols["dp"].append(attn_dp)
        cols["replicas"].append(dp)
        cols["max_num_seqs"].append(d.max_num_seqs if math.isnan(max_batch) else max_batch)
        cols["max_batched_tok"].append(d.max_num_batched_tokens)
        cols["mem_fraction"].append(d.mem_fraction)
        cols["reserve_full"].append(1.0 if d.reserve_full else 0.0)
        cols["input_tok"].append(i_tok)
        cols["output_tok"].append(o_tok)
        cols["mode"].append(MODES[mode])
        cols["load"].append(0.0 if math.isnan(load) else load)
        cols["context_tok"].append(i_tok + o_tok)
        # each row as its harness ran it: a closed-loop benchmark includes its first wave (an offline job's is
        # set by its batch: costmodel.static_terms), a Poisson stream has none
        cols["first_wave_share"].append(1.0 / ASSUMED_REQUESTS_PER_CLIENT if mode == "concurrency" else 0.0)
        y.append((thr, ttft, tpot))
        total.append(is_total)
        current.append(is_current(engine, version, constants))
        keys.append((calibration_engine(engine, vendor[gpu_id]), arch[gpu_id], gpu_id, wd))
        classes.append(model_class(model))
        sources.append(str(r.get("source_id") or ""))
        families.append(model.family)
        row_ids.append(str(r.get("row_id") or ""))
        modes.append(mode)
    ints = {"model", "gpu", "wdtype", "kvdtype", "budget", "mode"}
    arrays: dict[str, Any] = {k: np.asarray(v, dtype=np.int64 if k in ints else np.float64) for k, v in cols.items()}
    cand = Candidates(**arrays)
    ms = MeasurementSet(cand=cand, y=np.asarray(y, dtype=np.float64).reshape(-1, 3),
                        thr_is_total=np.asarray(total, dtype=bool), current=np.asarray(current, dtype=bool),
                        keys=keys, classes=classes, sources=sources, families=families, row_ids=row_ids, modes=modes)
    unqueued = unqueued_overload(tables, ms)
    if unqueued.any():
        skipped[UNQUEUED_OVERLOAD] = int(unqueued.sum())
        ms = ms.take(np.flatnonzero(~unqueued))
    ms.skipped = skipped
    return ms


# Reasons rows (or their latencies) are left out of the fit, as GET /v1/calibration's not_scored lists them.
DUPLICATE = "duplicate: repeats an earlier row's TTFT and TPOT with the same layout (fitted once)"
DUPLICATE_CONFLICT = "duplicate: repeats another row's TTFT and TPOT with a different layout (layout unknown)"
# An engine that ends sequences at the model's context window (costmodel.yaml engines.*.
# ends_sequences_at_context_window) did not generate what a longer row states.
PAST_CONTEXT = ("run longer than the model's context window (input + output > max_position_embeddings) on an "
                "engine that ends a sequence there, so the stated output was not generated")
UNQUEUED_OVERLOAD = ("closed loop above the predicted KV-cache or max-batch capacity whose measured TTFT shows "
                     "no admission queueing (the run held more sequences than the settings assumed allow)")
# A run queues when clients exceed the sequences in flight: each extra round of clients waits about a whole
# request (output length x TPOT). A measured TTFT below this share of that wait shows no such queue.
QUEUE_EVIDENCE_SHARE = 0.25
_LAYOUT_FIELDS = ("engine", "gpu", "gpu_count", "weight_dtype", "kv_dtype", "tp", "pp",
                  "dp", "ep", "mode", "input_tokens", "output_tokens", "concurrency", "request_rate", "max_batch")
_NAMING_FIELDS = {"id", "family", "name", "aliases", "source", "notes"}   # ModelSpec fields that are not shapes
_ATTENTION_DP = re.compile(r"attention_dp=(\d+)")
# An offline job's request count in the import's notes ("[norm: ...]"), in the phrasings its sources use.
_NORM_NOTE = re.compile(r"\[norm:([^\]]*)\]")
_JOB_REQUESTS = re.compile(r"all (\d+) requests issued at once|all-at-once \((\d+) prompts|(\d+) prompts all at once"
                           r"|(\d+) requests issued at once|offline \((\d+) (?:prompts|requests)\)")
# NVIDIA's ModelOpt checkpoints (nvidia/<model>-FP8, -FP4, -NVFP4) state kv_cache_quant_algo FP8 in their
# hf_quant_config.json, and both engines then store the KV cache in FP8 when the run leaves kv_cache_dtype
# at auto (vLLM: ModelOptFp8Config / ModelOptNvFp4Config kv_cache_quant_algo; TensorRT-LLM: QuantConfig
# kv_cache_quant_algo read from hf_quant_config.json).
_MODELOPT_CHECKPOINT = re.compile(r"^nvidia/.+-(fp8|fp4|nvfp4)$", re.IGNORECASE)


def offline_requests(r: Mapping[str, Any]) -> float:
    """The requests an offline row's job sent at once, as its source states them (the ``[norm: ...]`` note of
    the import: "all 500 requests issued at once", "all-at-once (1000 prompts, ...)", "offline (N prompts)");
    NaN when it does not say (the job is then taken as a steady state)."""
    for norm in _NORM_NOTE.findall(str(r.get("notes") or "")):
        m = _JOB_REQUESTS.search(norm)
        if m:
            return float(next(g for g in m.groups() if g))
    return math.nan


def run_kv_dtype(r: Mapping[str, Any]) -> str:
    """The KV-cache dtype the run used: the row's, with ``auto`` resolved where the checkpoint decides it."""
    kv = str(r.get("kv_dtype") or "") or "auto"
    if kv == "auto" and _MODELOPT_CHECKPOINT.match(str(r.get("orig_model") or r.get("model") or "")):
        return "fp8"
    return kv


def attention_dp_ranks(r: Mapping[str, Any], dp: float, moe: bool) -> float:
    """Attention data-parallel ranks per replica of a MoE row: its notes' ``attention_dp=N``, else its own
    ``dp`` column (the published layout); 1 for a dense model (its dp ranks are replicas) or a MoE row that
    does not state dp (gpu_count over tp x pp may be replicas or DP ranks: ``unmodelled_layout``)."""
    if not moe:
        return 1.0
    m = _ATTENTION_DP.search(str(r.get("notes") or ""))
    if m and int(m.group(1)) > 1:
        return float(m.group(1))
    stated = _f(r.get("dp"))
    return dp if not math.isnan(stated) and dp > 1 else 1.0


def layout_not_modelled(model: ModelSpec, tp: float, pp: float, dp: float, ep: float, gpus_per_node: int) -> str:
    """Why an attention-DP / expert-parallel row cannot be scored as its layout ('' = it can): a layout
    ``moe_layout.check_layout`` refuses, or one whose all-to-all crosses nodes (the step model sends it over
    the GPUs' own interconnect)."""
    try:
        check_layout(model, Layout(tp=int(tp), pp=int(pp), dp=int(dp), ep=int(ep)))
    except LayoutError as exc:
        return f"layout not runnable as published: {exc.field} {exc.message.split(';')[0]}"
    if tp * dp > gpus_per_node:
        return "attention DP / expert parallelism across nodes (all-to-all over the network) is not modelled"
    return ""


def unmodelled_layout(r: Mapping[str, Any], dp: float, moe: bool) -> str:
    """Why the row's latency cannot be fitted as the cost model represents it ('' = it can): a MoE row whose GPUs
    exceed tp x pp with no dp stated (replicas or attention DP ranks: unknown), and attention DP stated for a
    dense model (no experts to share: not a layout of the cost model)."""
    m = _ATTENTION_DP.search(str(r.get("notes") or ""))
    if not moe and m and int(m.group(1)) > 1:
        return "attention data parallelism of a dense model is not modelled"
    if moe and dp > 1:
        return "attention data parallelism or replicas (a MoE row with gpu_count > tp x pp, dp not stated) unknown"
    return ""


def split_layout(ms: MeasurementSet) -> NDArray[np.bool_]:
    """Mask of the rows run with attention data parallelism or expert parallelism (dp > 1 or ep > 1): MoE
    layouts whose latency holds the all-to-all and the DP ranks' shared expert steps, absent from every other
    layout."""
    dp = ms.cand.dp_ranks
    return np.asarray((dp > 1) | (ms.cand.ep > 1), dtype=bool)


def duplicate_latency(rows: Sequence[Mapping[str, Any]], catalog: Catalog) -> dict[str, str]:
    """Rows whose TTFT and TPOT repeat another row's of the same source exactly, with the reason each is left
    out (independent sources, users' ingests among them, may well agree to the digit): all but the
    first (by row_id) when the rows state one layout (the same architecture, whatever its release name or the
    engine release's label), all of them when they disagree on it."""

    def arch(r: Mapping[str, Any]) -> str:
        spec = catalog.resolve_model(str(r.get("model") or ""))
        if spec is None:
            return str(r.get("model") or "")
        return json.dumps(spec.model_dump(exclude=_NAMING_FIELDS), sort_keys=True)

    groups: dict[tuple[str, float, float], list[Mapping[str, Any]]] = {}
    for r in rows:
        ttft, tpot = _f(r.get("ttft_ms")), _f(r.get("tpot_ms"))
        if not (math.isnan(ttft) or math.isnan(tpot)):
            groups.setdefault((str(r.get("source_id") or ""), ttft, tpot), []).append(r)
    out: dict[str, str] = {}
    for group in groups.values():
        if len(group) < 2:
            continue
        layouts = {(arch(g), *(str(g.get(k) if g.get(k) is not None else "") for k in _LAYOUT_FIELDS)) for g in group}
        for i, g in enumerate(group):
            if len(layouts) > 1:
                out[str(g.get("row_id") or "")] = DUPLICATE_CONFLICT
            elif i:
                out[str(g.get("row_id") or "")] = DUPLICATE
    return out


def unqueued_overload(tables: Tables, ms: MeasurementSet) -> NDArray[np.bool_]:
    """Closed-loop rows whose clients per replica exceed the sequences the model lets the replica hold (KV cache
    at mean occupancy, within max batch), yet whose measured TTFT is far below the wait such a queue makes."""
    if not len(ms):
        return np.zeros(0, dtype=bool)
    s = static_terms(tables, ms.cand)
    per_replica = ms.cand.load / s.replicas         # per serving unit: a replica's attention DP ranks each
    rounds = per_replica / np.maximum(s.cap_mean, 1.0) - 1.0
    wait_s = rounds * ms.cand.output_tok * ms.y[:, 2]
    closed = ms.cand.mode == MODES["concurrency"]
    with np.errstate(invalid="ignore"):
        return closed & (rounds > 0) & np.isfinite(ms.y[:, 1]) & (ms.y[:, 1] < QUEUE_EVIDENCE_SHARE * wait_s)



def data_fingerprint(ms: MeasurementSet) -> str:
    """Content hash of what a calibration is fitted on: the scored rows' inputs and measured values."""
    digest = hashlib.sha256()
    for f in fields(ms.cand):
        digest.update(np.ascontiguousarray(getattr(ms.cand, f.name)).tobytes())
    digest.update(np.nan_to_num(ms.y, nan=-1.0).tobytes())
    digest.update(ms.thr_is_total.tobytes())
    digest.update(ms.current.tobytes())
    digest.update(json.dumps([ms.keys, ms.sources, ms.row_ids]).encode())
    return digest.hexdigest()

