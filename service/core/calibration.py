"""Calibration: fit the cost model's efficiencies on stored measurements, by segment, with fall-backs.

Segments form a hierarchy, each level shrunk toward its parent:

    global -> engine -> engine/architecture -> engine/gpu -> engine/gpu/weight-dtype

A level is fitted in one robust least-squares problem (scipy.optimize.least_squares, soft-L1 loss on
log-ratios of predicted to measured throughput, TTFT and TPOT) whose unknowns are the log-parameters of
every segment of that level, plus a prior term that pulls each segment toward its parent's values with
the weight of ``PRIOR_ROWS`` measurements. A segment with few rows therefore stays near its parent; one
with none is not stored and prediction falls back to the nearest ancestor. The Jacobian is block-sparse
(a row depends only on its segment), which keeps a level to a few dozen model evaluations.

Engine releases differ in speed: rows of releases older than the generation the service targets
(``current_from_version`` in costmodel.yaml) get one fitted speed factor per engine (the global level's
``generation`` entry), so the segment parameters describe the current release.

Pure numpy/scipy; deterministic (no random start, fixed iteration limits).
"""

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
from scipy.optimize import least_squares
from scipy.sparse import coo_matrix

from gpu_catalog.loader import Catalog
from gpu_catalog.schema import CostConstants
from service.core.candidates import MODE_CONCURRENCY, MODE_RATE, MODES, PARAM_NAMES, Candidates, Params
from service.core.engine_defaults import is_current, resolve
from service.core.memory import ASSUMED_REQUESTS_PER_CLIENT, Static, static_terms
from service.core.residuals import USER_SOURCE_PREFIX, Residuals, anchors_of
from service.core.serve import ModeSplit, evaluate, serve, split_modes
from service.core.simulate import PREDICTION_REQUESTS, Lengths, Load, replica, simulate
from service.core.tables import Tables
from service.core.types import F

MODELLED_ENGINES = ("vllm", "trtllm")
LEVELS = ("global", "engine", "engine/arch", "engine/gpu", "engine/gpu/dtype")
# What physically varies: the hardware efficiencies with the engine, GPU and dtype (the LEVELS below the engine);
# the software overheads with the engine and the model class (CLASS_LEVEL segments, beside the GPU ones).
CLASS_LEVEL = "engine/class"
HARDWARE_PARAMS = ("eff_flops", "eff_bw", "comm_eff")
SOFTWARE_PARAMS = tuple(n for n in PARAM_NAMES if n not in HARDWARE_PARAMS)
MODEL_CLASSES = ("dense", "moe", "mla")
# A class segment owns its overheads only when latency measurements of this many architectures support it.
MIN_ARCHITECTURES = 2
# A benchmark harness's own TTFT (HTTP client, tokenising, its queue) per source: fitted beside the engine's,
# starting from and shrunk toward HARNESS_PRIOR_S with a wide log-space spread (sources differ by 10x).
HARNESS_PRIOR_S = 0.001
HARNESS_SIGMA_LOG = 3.0
HARNESS_BOUNDS_S = (1e-5, 2.0)
PRIOR_ROWS = 6.0            # a segment's parent counts as this many measurements
PRIOR_SIGMA_LOG = 0.5       # spread of a segment's log-parameter around its parent's
LOSS_SCALE_LOG = 0.15       # soft-L1 knee: residuals beyond ~15% count linearly (robust to outliers)
MAX_NFEV_PER_LEVEL = 60
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
        "mem_fraction", "input_tok", "output_tok", "mode", "load", "context_tok", "first_wave_share")}
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
        pp = 1.0 if math.isnan(pp) else pp
        dp = _f(r.get("dp"))
        if math.isnan(dp):
            dp = max(round(n_gpu / (tp * pp)), 1) if not math.isnan(n_gpu) else 1.0
        load = _f(r.get("concurrency")) if mode in ("concurrency", "static_batch") else _f(r.get("request_rate"))
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
        layout = unmodelled_layout(r, dp, model.num_experts is not None)
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
        ep = _f(r.get("ep"))
        cols["ep"].append(1.0 if math.isnan(ep) else ep)
        cols["replicas"].append(dp)
        cols["max_num_seqs"].append(d.max_num_seqs if math.isnan(max_batch) else max_batch)
        cols["max_batched_tok"].append(d.max_num_batched_tokens)
        cols["mem_fraction"].append(d.mem_fraction)
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
UNQUEUED_OVERLOAD = ("closed loop above the predicted KV-cache or max-batch capacity whose measured TTFT shows "
                     "no admission queueing (the run held more sequences than the settings assumed allow)")
# A run queues when clients exceed the sequences in flight: each extra round of clients waits about a whole
# request (output length x TPOT). A measured TTFT below this share of that wait shows no such queue.
QUEUE_EVIDENCE_SHARE = 0.25
_LAYOUT_FIELDS = ("engine", "gpu", "gpu_count", "weight_dtype", "kv_dtype", "tp", "pp",
                  "dp", "ep", "mode", "input_tokens", "output_tokens", "concurrency", "request_rate", "max_batch")
_NAMING_FIELDS = {"id", "family", "name", "aliases", "source", "notes"}   # ModelSpec fields that are not shapes
_ATTENTION_DP = re.compile(r"attention_dp=(\d+)")
# NVIDIA's ModelOpt checkpoints (nvidia/<model>-FP8, -FP4, -NVFP4) state kv_cache_quant_algo FP8 in their
# hf_quant_config.json, and both engines then store the KV cache in FP8 when the run leaves kv_cache_dtype
# at auto (vLLM: ModelOptFp8Config / ModelOptNvFp4Config kv_cache_quant_algo; TensorRT-LLM: QuantConfig
# kv_cache_quant_algo read from hf_quant_config.json).
_MODELOPT_CHECKPOINT = re.compile(r"^nvidia/.+-(fp8|fp4|nvfp4)$", re.IGNORECASE)


def run_kv_dtype(r: Mapping[str, Any]) -> str:
    """The KV-cache dtype the run used: the row's, with ``auto`` resolved where the checkpoint decides it."""
    kv = str(r.get("kv_dtype") or "") or "auto"
    if kv == "auto" and _MODELOPT_CHECKPOINT.match(str(r.get("orig_model") or r.get("model") or "")):
        return "fp8"
    return kv


def unmodelled_layout(r: Mapping[str, Any], dp: float, moe: bool) -> str:
    """Why the row's latency cannot be fitted as the cost model represents it ('' = it can): attention data
    parallelism (dp ranks sharing the experts, not independent replicas) and expert parallelism."""
    m = _ATTENTION_DP.search(str(r.get("notes") or ""))
    if (m and int(m.group(1)) > 1) or (moe and dp > 1):
        return "attention data parallelism (dp > 1 sharing one model) is not modelled"
    ep = _f(r.get("ep"))
    if not math.isnan(ep) and ep > 1:
        return "expert parallelism (ep > 1) is not modelled"
    return ""


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
    per_replica = ms.cand.load / np.maximum(ms.cand.replicas, 1.0)
    rounds = per_replica / np.maximum(s.cap_mean, 1.0) - 1.0
    wait_s = rounds * ms.cand.output_tok * ms.y[:, 2]
    closed = ms.cand.mode == MODES["concurrency"]
    with np.errstate(invalid="ignore"):
        return closed & (rounds > 0) & np.isfinite(ms.y[:, 1]) & (ms.y[:, 1] < QUEUE_EVIDENCE_SHARE * wait_s)


def predict_metrics(tables: Tables, ms: MeasurementSet, params: Params, static: Static | None = None,
                    split: ModeSplit | None = None) -> F:
    """(n, 3) predicted throughput (output or total, as the row publishes), TTFT s, TPOT s."""
    res = serve(static, params, split) if static is not None else evaluate(tables, ms.cand, params)
    thr = np.where(ms.thr_is_total, res.total_tok_s, res.output_tok_s)
    return np.stack([thr, res.ttft_s, res.tpot_s], axis=1)


def calibration_engine(engine: str, vendor: str) -> str:
    """The engine part of a segment key: an engine on another vendor's GPUs is calibrated apart (vLLM on
    ROCm is a different code path whose efficiencies say nothing about vLLM on CUDA), so that NVIDIA GPUs
    without vLLM measurements fall back to vLLM-on-NVIDIA values and not to a mix dominated by AMD rows."""
    return engine if vendor == "nvidia" else f"{engine}-{vendor}"


def model_class(spec: Any) -> str:
    """dense, moe or mla (MLA attention, whatever its MLP) of a catalog ModelSpec."""
    if getattr(spec, "mla_kv_lora_rank", None):
        return "mla"
    return "moe" if getattr(spec, "num_experts", None) else "dense"


def class_key(engine: str, cls: str) -> str:
    return f"{engine}/{cls}"


def segment_key(level: str, key: tuple[str, str, str, str]) -> str:
    engine, arch, gpu, dtype = key
    return {"global": "global", "engine": engine, "engine/arch": f"{engine}/{arch}",
            "engine/gpu": f"{engine}/{gpu}", "engine/gpu/dtype": f"{engine}/{gpu}/{dtype}"}[level]


def parent_key(level: str, key: tuple[str, str, str, str]) -> str:
    return segment_key(LEVELS[LEVELS.index(level) - 1], key)


@dataclass
class Calibration:
    """Fitted parameters by segment (log-space vectors in PARAM_NAMES order), and how each was fitted.

    GPU segments (``LEVELS``) give every parameter; below the engine level they fit only the hardware ones and
    carry the engine's software overheads. Class segments (``engine/<class>``, level ``CLASS_LEVEL``) give the
    software overheads of one engine and model class, and override the GPU segment's for that class."""

    segments: dict[str, dict[str, Any]]          # key -> {"level", "params": {name: value}, "n": rows}
    generation: dict[str, float]                 # engine -> speed factor of releases before the current one
    data_sha256: str = ""
    n_measurements: int = 0
    harness: dict[str, float] = field(default_factory=dict)   # source -> its harness's TTFT, s (not predicted)
    anchors: list[dict[str, Any]] = field(default_factory=list)  # users' measurements (service/core/residuals.py)
    _residuals: Residuals | None = field(default=None, repr=False, compare=False)

    def residuals(self) -> Residuals:
        """The residual correction of the users' measurements (built once per calibration)."""
        if self._residuals is None:
            self._residuals = Residuals(self.anchors)
        return self._residuals

    def vector(self, key: str) -> F:
        return np.log([self.segments[key]["params"][n] for n in PARAM_NAMES])

    def lookup(self, key: tuple[str, str, str, str]) -> tuple[str, dict[str, Any]]:
        """The most specific fitted GPU segment for (engine, arch, gpu, dtype)."""
        for level in reversed(LEVELS):
            k = segment_key(level, key)
            if k in self.segments:
                return k, self.segments[k]
        return "global", self.segments["global"]

    def overheads(self, key: tuple[str, str, str, str], cls: str) -> tuple[str, dict[str, Any]]:
        """The segment that owns the software overheads of a prediction for model class ``cls``: the engine's
        class segment where one is fitted, else the engine's (else the global one)."""
        for k in (class_key(key[0], cls) if cls else None, key[0]):
            if k is not None and k in self.segments:
                return k, self.segments[k]
        return "global", self.segments["global"]

    def log_matrix(self, keys: Sequence[tuple[str, str, str, str]], classes: Sequence[str] | None = None) -> F:
        """(n, len(PARAM_NAMES)) log-parameters of each key (and model class): the hardware efficiencies of its
        most specific GPU segment, the software overheads of ``overheads``."""
        if not keys:
            return np.zeros((0, len(PARAM_NAMES)))
        memo: dict[tuple[tuple[str, str, str, str], str], F] = {}
        sw = [PARAM_NAMES.index(n) for n in SOFTWARE_PARAMS]
        rows = []
        for k, c in zip(keys, classes if classes is not None else [""] * len(keys), strict=True):
            v = memo.get((k, c))
            if v is None:
                v = self.vector(self.lookup(k)[0])
                v[sw] = self.vector(self.overheads(k, c)[0])[sw]
                memo[(k, c)] = v
            rows.append(v)
        return np.stack(rows)

    def params_for(self, keys: Sequence[tuple[str, str, str, str]], current: NDArray[np.bool_] | None = None,
                   classes: Sequence[str] | None = None) -> Params:
        mat = np.exp(self.log_matrix(keys, classes)) if keys else np.zeros((0, len(PARAM_NAMES)))
        if current is not None:
            factor = np.asarray([1.0 if cur else self.generation.get(k[0], 1.0)
                                 for k, cur in zip(keys, current, strict=True)])
            mat = _apply_generation(mat, factor)
        return Params.from_matrix(mat)

    def harness_s(self, sources: Sequence[str]) -> F:
        """Each measurement's harness TTFT (0 for a source the fit never saw)."""
        return np.asarray([self.harness.get(src, 0.0) for src in sources], dtype=np.float64)

    def to_json(self) -> dict[str, Any]:
        return {"levels": list(LEVELS), "param_names": list(PARAM_NAMES), "segments": self.segments,
                "generation": self.generation, "harness": self.harness, "anchors": self.anchors}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], data_sha256: str = "", n: int = 0) -> Calibration:
        return cls(segments=dict(data["segments"]), generation=dict(data["generation"]), data_sha256=data_sha256,
                   n_measurements=n, harness=dict(data.get("harness") or {}), anchors=list(data.get("anchors") or []))


def with_anchors(tables: Tables, ms: MeasurementSet, cal: Calibration) -> Calibration:
    """``cal`` with the anchors of the users' measurements among ``ms``: their residuals against what the
    service predicts for them under ``cal``, the scheduler simulation's means where a prediction is simulated
    (a closed loop or a request rate), so that the correction moves the figures a prediction reports. Only the
    users' rows are predicted (the shipped ones never anchor)."""
    users = np.asarray([i for i, src in enumerate(ms.sources) if src.startswith(USER_SOURCE_PREFIX)], dtype=np.int64)
    anchors: list[dict[str, Any]] = []
    if len(users):
        mine = ms.take(users)
        params = cal.params_for(mine.keys, mine.current, mine.classes)
        pred = predict_metrics(tables, mine, params)
        static = static_terms(tables, mine.cand)
        for j in range(len(mine)):
            sim = _simulated_means(static, params, j, mine.keys[j][0], bool(mine.thr_is_total[j]))
            if sim is not None:
                pred[j] = sim
        anchors = anchors_of(tables, mine.cand, mine.y, pred, mine.keys, mine.sources, mine.row_ids)
    return Calibration(segments=cal.segments, generation=cal.generation, data_sha256=cal.data_sha256,
                       n_measurements=cal.n_measurements, harness=cal.harness, anchors=anchors)


def _simulated_means(static: Static, params: Params, i: int, engine: str, thr_is_total: bool) -> F | None:
    """Row ``i``'s throughput, mean TTFT and mean TPOT (s) as POST /v1/predictions simulates its steady state
    by default (service/simulation.py: one replica at its share of the load, 1,000 requests, seed 0, fixed
    lengths; vLLM reserves KV as tokens are computed, TensorRT-LLM for the whole sequence); None for a mode
    predictions do not simulate that way (offline, static batch)."""
    mode, reps = int(static.mode[i]), max(float(static.replicas[i]), 1.0)
    if mode == MODE_CONCURRENCY:
        value = float(math.ceil(float(static.load[i]) / reps))
        scale = float(static.load[i]) / value
    elif mode == MODE_RATE:
        value, scale = float(static.load[i]) / reps, reps
    else:
        return None
    vllm = engine.startswith("vllm")
    load = Load(mode, value, Lengths(float(static.isl[i])), Lengths(float(static.osl[i])),
                requests=PREDICTION_REQUESTS, seed=0)
    r = simulate(replica(static, params, i, chunked_prefill=True, reserve_full=not vllm), load)
    out_tok_s = r.output_tok_s * scale
    thr = out_tok_s * (static.isl[i] + static.osl[i]) / static.osl[i] if thr_is_total else out_tok_s
    return np.asarray([thr, r.ttft_s.mean, r.tpot_s.mean])


def predict_measured(tables: Tables, ms: MeasurementSet, cal: Calibration) -> F:
    """What each measurement should read under ``cal``: the deployment's prediction plus its source's harness
    TTFT (a harness the fit did not see adds nothing)."""
    pred = predict_metrics(tables, ms, cal.params_for(ms.keys, ms.current, ms.classes))
    pred[:, 1] += cal.harness_s(ms.sources)
    return pred


def _apply_generation(mat: F, factor: F) -> F:
    """Older releases: efficiencies scaled by ``factor`` and per-step overhead divided by it."""
    out = mat.copy()
    f = factor[:, None] if mat.ndim == 2 else factor
    names = list(PARAM_NAMES)
    for n in ("eff_flops", "eff_bw"):
        out[:, names.index(n)] = np.minimum(out[:, names.index(n)] * f[:, 0], 1.0)
    out[:, names.index("step_overhead_s")] = out[:, names.index("step_overhead_s")] / f[:, 0]
    return out


def _bounds(constants: CostConstants) -> tuple[F, F, F]:
    ip = constants.initial_params
    x0 = np.log([ip[n].initial for n in PARAM_NAMES])
    lo = np.log([ip[n].min for n in PARAM_NAMES])
    hi = np.log([ip[n].max for n in PARAM_NAMES])
    return x0, lo, hi


def _residuals(pred: F, ms: MeasurementSet) -> F:
    r = np.log(np.maximum(pred, 1e-12) / ms.y)
    return np.where(np.isfinite(r), r, 0.0).ravel()


@dataclass
class LevelFit:
    """What one level's least-squares problem fits beside its segments' parameters."""

    free: NDArray[np.bool_] | None = None      # the parameters the level fits (None: all)
    base: F | None = None                      # (n_rows, n_p) log-parameters of the rows for the others
    harness_s: F | None = None                 # (n_rows,) fixed harness TTFT added to the prediction
    fit_generation: bool = False
    fit_harness: bool = False                  # fit one harness TTFT per source (then harness_s is ignored)


def _fit_level(tables: Tables, ms: MeasurementSet, seg_of_row: NDArray[np.int64], prior: F,
               generation: F, lo: F, hi: F, fit_generation: bool, how: LevelFit | None = None) -> tuple[F, F]:
    """Fit one level: ``prior`` (n_seg, 7) log-params; returns (fitted (n_seg, 7), generation log-factors).
    With ``how.fit_harness`` the returned generation vector is followed by one log harness TTFT per source of
    ``sorted(set(ms.sources))``."""
    how = how or LevelFit(fit_generation=fit_generation)
    n_seg, n_p = prior.shape
    free = np.ones(n_p, dtype=bool) if how.free is None else how.free
    n_f = int(free.sum())
    n_rows = len(ms)
    engines = sorted({k[0] for k in ms.keys})
    eng_idx = np.asarray([engines.index(k[0]) for k in ms.keys], dtype=np.int64)
    n_gen = len(engines) if fit_generation else 0
    srcs = sorted(set(ms.sources)) if how.fit_harness else []
    src_idx = np.asarray([srcs.index(x) for x in ms.sources], dtype=np.int64) if srcs else np.zeros(0, np.int64)
    n_h = len(srcs)
    base = np.zeros((n_rows, n_p)) if how.base is None else how.base
    fixed_h = np.zeros(n_rows) if how.harness_s is None else how.harness_s
    h_prior = math.log(HARNESS_PRIOR_S)
    valid = np.isfinite(ms.y) & (ms.y > 0)
    static = static_terms(tables, ms.cand)
    split = split_modes(static)

    def unpack(x: F) -> tuple[F, F, F]:
        theta = prior.copy()
        theta[:, free] = x[: n_seg * n_f].reshape(n_seg, n_f)
        gen = x[n_seg * n_f: n_seg * n_f + n_gen] if fit_generation else generation
        return theta, gen, x[n_seg * n_f + n_gen:]

    def fun(x: F) -> F:
        theta, gen, h = unpack(x)
        logm = base.copy()
        logm[:, free] = theta[seg_of_row][:, free]
        mat = np.exp(logm)
        factor = np.where(ms.current, 1.0, np.exp(gen[eng_idx])) if len(gen) else np.ones(n_rows)
        p = Params.from_matrix(_apply_generation(mat, factor))
        pred = predict_metrics(tables, ms, p, static, split)
        pred[:, 1] += np.exp(h[src_idx]) if n_h else fixed_h
        data = np.where(valid, np.log(np.maximum(pred, 1e-12) / np.where(valid, ms.y, 1.0)), 0.0).ravel()
        data = np.where(np.isfinite(data), data, 5.0)
        reg = math.sqrt(PRIOR_ROWS) * (theta[:, free] - prior[:, free]).ravel() / PRIOR_SIGMA_LOG
        reg_h = math.sqrt(PRIOR_ROWS) * (h - h_prior) / HARNESS_SIGMA_LOG
        return np.concatenate([data, reg, reg_h])

    n_x = n_seg * n_f + n_gen + n_h
    # residual rows 3r..3r+2 depend on their segment's parameters (and the engine's generation factor, the
    # source's harness); prior row i depends on parameter i
    r3 = np.repeat(np.arange(n_rows * 3), n_f)
    c3 = (np.repeat(seg_of_row, 3)[:, None] * n_f + np.arange(n_f)[None, :]).ravel()
    n_reg = n_seg * n_f
    rows_i, cols_i = [r3, n_rows * 3 + np.arange(n_reg)], [c3, np.arange(n_reg)]
    if n_gen:
        rows_i.append(np.arange(n_rows * 3))
        cols_i.append(n_reg + np.repeat(eng_idx, 3))
    if n_h:
        rows_i += [3 * np.arange(n_rows) + 1, n_rows * 3 + n_reg + np.arange(n_h)]
        cols_i += [n_reg + n_gen + src_idx, n_reg + n_gen + np.arange(n_h)]
    rr, cc = np.concatenate(rows_i), np.concatenate(cols_i)
    sparsity = coo_matrix((np.ones(len(rr), dtype=np.int8), (rr, cc)), shape=(n_rows * 3 + n_reg + n_h, n_x))
    h_lo, h_hi = (math.log(b) for b in HARNESS_BOUNDS_S)
    x0 = np.concatenate([np.clip(prior[:, free], lo[free], hi[free]).ravel(), np.zeros(n_gen), np.full(n_h, h_prior)])
    lb = np.concatenate([np.tile(lo[free], n_seg), np.full(n_gen, math.log(0.05)), np.full(n_h, h_lo)])
    ub = np.concatenate([np.tile(hi[free], n_seg), np.full(n_gen, math.log(2.0)), np.full(n_h, h_hi)])
    sol = least_squares(fun, x0, bounds=(lb, ub), jac_sparsity=sparsity.tocsr(), loss="soft_l1",
                        f_scale=LOSS_SCALE_LOG, max_nfev=MAX_NFEV_PER_LEVEL, x_scale=1.0, method="trf")
    theta, gen, h = unpack(sol.x)
    return theta, np.concatenate([gen, h]) if n_h else gen


def _latency_support(ms: MeasurementSet, rows: NDArray[np.int64]) -> dict[str, int]:
    """How many latency measurements, architectures and sources rows ``rows`` hold."""
    lat = rows[np.isfinite(ms.y[rows, 1]) | np.isfinite(ms.y[rows, 2])]
    return {"latency_n": len(lat), "architectures": len({int(ms.cand.model[i]) for i in lat}),
            "sources": len({ms.sources[i] for i in lat})}


def _parent_segment(level: str, key: tuple[str, str, str, str]) -> str:
    return segment_key("engine" if level == CLASS_LEVEL else LEVELS[LEVELS.index(level) - 1], key)


def _store(segments: dict[str, dict[str, Any]], seg: str, level: str, theta: F, n: int, support: dict[str, int],
           owns: Sequence[str]) -> None:
    segments[seg] = {"level": level, "n": n, **support, "owns": list(owns),
                     "params": {name: float(v) for name, v in zip(PARAM_NAMES, np.exp(theta), strict=True)}}


def fit(tables: Tables, ms: MeasurementSet, constants: CostConstants) -> Calibration:
    """Fit every level top-down: global and engine (every parameter, and each source's harness TTFT at the
    global level), then the engine x model-class software overheads where latency measurements of several
    architectures support them, then the GPU levels' hardware efficiencies. Deterministic for the same rows in
    the same order."""
    x0, lo, hi = _bounds(constants)
    engines = sorted({k[0] for k in ms.keys})
    cal = Calibration(segments={}, generation={}, n_measurements=len(ms))
    generation = np.zeros(len(engines))
    hw = np.asarray([n in HARDWARE_PARAMS for n in PARAM_NAMES])
    harness = np.zeros(len(ms))
    for level in ("global", "engine", CLASS_LEVEL, *LEVELS[2:]):
        if level == CLASS_LEVEL:
            seg_of = [class_key(k[0], c) for k, c in zip(ms.keys, ms.classes, strict=True)]
        else:
            seg_of = [segment_key(level, k) for k in ms.keys]
        seg_keys = sorted(set(seg_of))
        rows_of = {sk: np.asarray([i for i, x in enumerate(seg_of) if x == sk], dtype=np.int64) for sk in seg_keys}
        support = {sk: _latency_support(ms, rows_of[sk]) for sk in seg_keys}
        if level == CLASS_LEVEL:     # a class segment owns its overheads only with several architectures
            seg_keys = [sk for sk in seg_keys if support[sk]["architectures"] >= MIN_ARCHITECTURES]
        if not seg_keys:
            continue
        first = {sk: ms.keys[int(rows_of[sk][0])] for sk in seg_keys}
        if level == "global":
            prior = x0[None, :]
        else:
            prior = np.stack([cal.vector(_parent_segment(level, first[sk])) for sk in seg_keys])
        free = None if level in ("global", "engine") else (~hw if level == CLASS_LEVEL else hw)
        sel = np.concatenate([rows_of[sk] for sk in seg_keys])
        sub = ms.take(sel)
        pos = {sk: i for i, sk in enumerate(seg_keys)}
        seg_of_row = np.asarray([pos[seg_of[i]] for i in sel], dtype=np.int64)
        base = None if free is None else cal.log_matrix(sub.keys, sub.classes)
        how = LevelFit(free=free, base=base, harness_s=harness[sel], fit_generation=level == "global",
                       fit_harness=level == "global")
        theta, extra = _fit_level(tables, sub, seg_of_row, prior, generation, lo, hi, level == "global", how)
        if level == "global":
            generation = extra[: len(engines)]
            srcs = sorted(set(sub.sources))
            cal.harness = {src: float(np.exp(v)) for src, v in zip(srcs, extra[len(engines):], strict=True)}
            cal.generation = {e: float(np.exp(g)) for e, g in zip(engines, generation, strict=True)}
            harness = cal.harness_s(ms.sources)
        owns = PARAM_NAMES if free is None else [n for n, f in zip(PARAM_NAMES, free, strict=True) if f]
        for i, sk in enumerate(seg_keys):
            _store(cal.segments, sk, level, theta[i], len(rows_of[sk]), support[sk], owns)
    if "global" not in cal.segments:
        _store(cal.segments, "global", "global", x0, 0, {"latency_n": 0, "architectures": 0, "sources": 0},
               PARAM_NAMES)
    return cal


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


def ape(pred: F, meas: F) -> F:
    """Absolute percentage error, % (NaN where either is missing)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.abs(pred / meas - 1.0) * 100.0


def summarise(errors: F) -> dict[str, Any]:
    e = errors[np.isfinite(errors)]
    if not len(e):
        return {"n": 0, "median_ape_pct": None, "p90_ape_pct": None}
    return {"n": len(e), "median_ape_pct": round(float(np.median(e)), 1),
            "p90_ape_pct": round(float(np.percentile(e, 90)), 1)}


BREAKDOWNS = ("gpu", "engine", "dtype", "mode", "segment")


def cross_validate(tables: Tables, ms: MeasurementSet, constants: CostConstants,
                   group: str = "source") -> dict[str, Any]:
    """Leave-one-group-out (group: ``source`` or model ``family``): for each group, fit on the others and
    predict its rows.

    Returns the per-row held-out predictions' errors summarised overall and by GPU, engine, dtype, mode
    and fitted segment (the segment a prediction for that row would use)."""
    pred = np.full_like(ms.y, np.nan)
    labels = np.asarray(ms.sources if group == "source" else ms.families)
    seg_used: list[str] = [""] * len(ms)
    for src in sorted(set(labels.tolist())):
        held = np.flatnonzero(labels == src)
        train = np.flatnonzero(labels != src)
        cal = fit(tables, ms.take(train), constants)
        test = ms.take(held)
        pred[held] = predict_measured(tables, test, cal)
        for i, k in zip(held, test.keys, strict=True):
            seg_used[i] = cal.lookup(k)[0]
    report = error_report(ms, pred, seg_used)
    report["held_out_by"] = group
    report["groups"] = len(set(labels.tolist()))
    return report


def error_report(ms: MeasurementSet, pred: F, seg_used: Sequence[str]) -> dict[str, Any]:
    errors = ape(pred, ms.y)
    labels = {"gpu": [k[2] for k in ms.keys], "engine": [k[0] for k in ms.keys], "dtype": [k[3] for k in ms.keys],
              "mode": list(ms.modes), "segment": list(seg_used)}
    report: dict[str, Any] = {"rows": len(ms), "sources": len(set(ms.sources)),
                              "overall": {m: summarise(errors[:, j]) for j, m in enumerate(METRICS)}}
    for name in BREAKDOWNS:
        lab = np.asarray(labels[name])
        report[f"by_{name}"] = {
            v: {m: summarise(errors[lab == v, j]) for j, m in enumerate(METRICS)} for v in sorted(set(labels[name]))}
    return report
