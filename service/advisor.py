"""The advisor: turns requests into cost-model candidates and answers into response bodies.

No web framework or database here: the routes hand it validated request bodies and the current
calibration; it raises ``InvalidRequest`` (a 422 with the field path) for what cannot run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gpu_catalog.loader import Catalog
from gpu_catalog.schema import CostConstants, GpuSpec, ModelSpec
from service.core.calibration import (
    LEVELS,
    METRICS,
    Calibration,
    calibration_engine,
    model_class,
    segment_key,
)
from service.core.costmodel import (
    GB_BYTES,
    MODES,
    PARAM_NAMES,
    Candidates,
    Params,
    Result,
    Static,
    Tables,
    build_tables,
    serve,
    static_terms,
    take_rows,
)
from service.core.engine_defaults import EngineDefaults, is_current, resolve
from service.core.launch import LaunchError, LaunchSpec, render_launch
from service.core.residuals import corrected, correction
from service.schemas.predictions import (
    Confidence,
    Cost,
    Deployment,
    InlineModel,
    LatencyStats,
    Launch,
    MemoryPerGpu,
    Predicted,
    PredictionRequest,
    PredictionResponse,
    ResolvedSettings,
    Simulated,
    Workload,
)
from service.simulation import (
    SimMemo,
    Simulation,
    percentile_method,
    simulate_deployment,
    simulated,
    skip_reason,
)
from service.units import MS_PER_S, S_PER_HOUR, TOKENS_PER_MILLION

F = NDArray[np.float64]
# Tail of an exponential queueing delay: P(wait > t) = exp(-t / mean) -> quantile q at mean x ln(1/(1-q)).
QUANTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}


def analytic_ttft_quantile_s(ttft_s: Any, fixed_s: Any, prefill_s: Any, q: float) -> Any:
    """Quantile ``q`` of TTFT without a simulation: the waiting part of the mean TTFT (everything but the front
    end and the prompt's own prefill) given an exponential tail. Floats or arrays."""
    wait_s = np.maximum(ttft_s - fixed_s - prefill_s, 0.0)
    return ttft_s - wait_s + wait_s * math.log(1.0 / (1.0 - q))


# One deployment's analytic terms (one-row arrays) and its calibration segment key: ``Analyses.row``.
Analysed = tuple[Static, Params, Result, tuple[str, str, str, str]]


@dataclass
class Analyses:
    """``Advisor.analyse``'s answer: the analytic terms of several deployments, a row each."""

    static: Static
    params: Params
    res: Result
    keys: list[tuple[str, str, str, str]]

    def row(self, k: int) -> Analysed:
        """Deployment ``k``'s terms as one-row arrays (taken when asked for: a batch is seldom all used)."""
        if len(self.keys) == 1:
            return self.static, self.params, self.res, self.keys[0]
        one = np.asarray([k])
        return take_rows(self.static, one), take_rows(self.params, one), take_rows(self.res, one), self.keys[k]


class InvalidRequest(ValueError):
    """A request the catalog or the engines cannot serve: answered with 422 naming the field."""

    def __init__(self, field: list[str | int], message: str, title: str = "Deployment cannot run",
                 valid: list[str] | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.title = title
        self.valid = valid


@dataclass
class CalibrationState:
    """The calibration in use and the error of each of its segments."""

    calibration: Calibration
    version: int | None = None
    segment_errors: dict[str, dict[str, Any]] = field(default_factory=dict)
    overall_errors: dict[str, Any] = field(default_factory=dict)
    error_kind: str = "in-sample"          # or "leave-one-source-out"


def inline_model_spec(m: InlineModel) -> ModelSpec:
    """A catalog-shaped architecture from inline config.json fields; parameter counts from the shapes."""
    head_dim = m.head_dim or m.hidden_size // m.num_attention_heads
    if m.num_attention_heads % m.num_kv_heads:
        raise InvalidRequest(["model_spec", "num_kv_heads"], "num_attention_heads must be a multiple of num_kv_heads")
    attn = m.hidden_size * head_dim * (2 * m.num_attention_heads + 2 * m.num_kv_heads)
    if m.num_experts and m.experts_per_token:
        width = m.moe_intermediate_size or m.intermediate_size
        mlp_total = 3 * m.hidden_size * width * (m.num_experts + (m.num_shared_experts or 0))
        mlp_active = 3 * m.hidden_size * width * (m.experts_per_token + (m.num_shared_experts or 0))
    elif m.num_experts or m.experts_per_token:
        raise InvalidRequest(["model_spec", "experts_per_token"], "num_experts and experts_per_token go together")
    else:
        mlp_total = mlp_active = 3 * m.hidden_size * m.intermediate_size
    embed = m.vocab_size * m.hidden_size * (1 if m.tie_word_embeddings else 2)
    total_b = m.total_params_b or (m.num_layers * (attn + mlp_total) + embed) / 1e9
    active_b = m.active_params_b or min((m.num_layers * (attn + mlp_active) + embed) / 1e9, total_b)
    try:
        return ModelSpec(
            id=m.name, family=m.name.lower(), name=m.name, model_type="inline", num_layers=m.num_layers,
            hidden_size=m.hidden_size, intermediate_size=m.intermediate_size,
            num_attention_heads=m.num_attention_heads, num_kv_heads=m.num_kv_heads, head_dim=head_dim,
            vocab_size=m.vocab_size, max_position_embeddings=m.max_position_embeddings,
            tie_word_embeddings=m.tie_word_embeddings, num_experts=m.num_experts,
            num_shared_experts=m.num_shared_experts, experts_per_token=m.experts_per_token,
            moe_intermediate_size=m.moe_intermediate_size, mla_kv_lora_rank=m.mla_kv_lora_rank,
            mla_qk_rope_head_dim=m.mla_qk_rope_head_dim, mla_qk_nope_head_dim=m.mla_qk_nope_head_dim,
            mla_v_head_dim=m.mla_v_head_dim, total_params_b=total_b, active_params_b=min(active_b, total_b),
            source="inline model_spec of the request")
    except ValueError as exc:
        raise InvalidRequest(["model_spec"], str(exc)) from exc


class Advisor:
    """Everything a prediction needs that does not change between requests."""

    def __init__(self, catalog: Catalog, constants: CostConstants, calibration: CalibrationState) -> None:
        self.catalog = catalog
        self.constants = constants
        self.cal = calibration
        self.tables = build_tables(catalog, constants)
        self.gpus: dict[str, GpuSpec] = {g.id: g for g in catalog.gpus}
        self.weight_dtypes = {d.id: d for d in catalog.weight_dtypes}
        self.kv_dtypes = {d.id: d for d in catalog.kv_dtypes}
        self.engines = {e.id: e for e in catalog.engines}
        self.support = {(r.engine, r.kind, r.dtype, r.architecture): r.level for r in catalog.support}
        self.index = self.tables.index()
        # engine defaults by (engine, version, GPU): read from the engines' vocabularies once
        self._defaults: dict[tuple[str, str, str], EngineDefaults] = {}
        # fitted parameters (rows in PARAM_NAMES order) and each (segment key, current generation)'s row, for the
        # calibration they were read from; replaced whole, never changed in place (requests run in threads)
        self._params_held: tuple[Calibration | None, dict[tuple[tuple[str, str, str, str], bool, str], int], F] = (
            None, {}, np.zeros((0, len(PARAM_NAMES))))

    # --- resolution and validation -------------------------------------------------------------------

    def model_for(self, model: str | None, spec: InlineModel | None, field_name: str = "model") -> ModelSpec:
        if spec is not None:
            return inline_model_spec(spec)
        found = self.catalog.resolve_model(model or "")
        if found is None:
            from service.api.problems import unknown_id
            err = unknown_id("model", model or "", self.catalog.model_names(), [field_name])
            raise InvalidRequest([field_name], err.detail, title="Unknown model",
                                 valid=err.extra.get("nearest") or None)
        return found

    def check_ids(self, dep: Deployment, prefix: list[str | int]) -> GpuSpec:
        def unknown(kind: str, value: str, known: list[str], name: str) -> InvalidRequest:
            return InvalidRequest([*prefix, name], f"unknown {kind} '{value}'; valid: {', '.join(sorted(known))}",
                                  title=f"Unknown {kind}", valid=sorted(known))

        if dep.gpu not in self.gpus:
            raise unknown("GPU", dep.gpu, list(self.gpus), "gpu")
        if dep.weight_dtype not in self.weight_dtypes:
            raise unknown("weight dtype", dep.weight_dtype, list(self.weight_dtypes), "weight_dtype")
        if dep.kv_dtype not in self.kv_dtypes:
            raise unknown("KV dtype", dep.kv_dtype, list(self.kv_dtypes), "kv_dtype")
        engine = self.engines[dep.engine]
        if dep.engine_version is not None and dep.engine_version not in engine.versions:
            raise unknown(f"{dep.engine} version", dep.engine_version, engine.versions, "engine_version")
        return self.gpus[dep.gpu]

    def check_runnable(self, model: ModelSpec, dep: Deployment, wl: Workload, prefix: list[str | int]) -> None:
        """Raise InvalidRequest for a deployment the engine cannot start (not for one that merely does not fit)."""
        gpu = self.check_ids(dep, prefix)
        engine = self.engines[dep.engine]
        if gpu.vendor not in engine.vendors:
            raise InvalidRequest([*prefix, "engine"], f"{engine.name} does not run on {gpu.vendor.upper()} GPUs "
                                 f"({gpu.id}); engines for {gpu.id}: "
                                 f"{', '.join(e.id for e in self.engines.values() if gpu.vendor in e.vendors)}")
        for kind, dtype, name in (("weight", dep.weight_dtype, "weight_dtype"), ("kv", dep.kv_dtype, "kv_dtype")):
            if (dep.engine, kind, dtype, gpu.architecture) not in self.support:
                ok = sorted({d for (e, k, d, a) in self.support if e == dep.engine and k == kind
                             and a == gpu.architecture})
                raise InvalidRequest([*prefix, name], f"{engine.name} does not run {kind} dtype '{dtype}' on "
                                     f"{gpu.architecture} GPUs ({gpu.id}); it runs: {', '.join(ok) or 'none'}",
                                     valid=ok)
        if model.num_attention_heads % dep.tp:
            divisors = [d for d in range(1, model.num_attention_heads + 1) if model.num_attention_heads % d == 0]
            raise InvalidRequest([*prefix, "tp"], f"tp={dep.tp} does not divide the {model.num_attention_heads} "
                                 f"attention heads of {model.id}; valid tp: {divisors[:12]}")
        if dep.tp > model.num_kv_heads and dep.tp % model.num_kv_heads:
            raise InvalidRequest([*prefix, "tp"], f"tp={dep.tp} above the {model.num_kv_heads} KV heads must be a "
                                 "multiple of them (each KV head is replicated on tp / kv_heads GPUs)")
        if dep.pp > model.num_layers:
            raise InvalidRequest([*prefix, "pp"], f"pp={dep.pp} exceeds the {model.num_layers} layers of {model.id}")
        per_node = gpu.max_gpus_per_node
        if dep.tp > per_node:
            raise InvalidRequest([*prefix, "tp"], f"tp={dep.tp} exceeds the {per_node} {gpu.id} GPUs one node holds; "
                                 "tensor parallelism stays within a node (use pp across nodes)")
        if dep.tp * dep.pp > per_node and not dep.multi_node:
            raise InvalidRequest([*prefix, "pp"], f"tp x pp = {dep.tp * dep.pp} exceeds the {per_node} {gpu.id} GPUs "
                                 "of one node; set multi_node: true to span nodes with pipeline stages")
        if dep.ep is not None and not model.num_experts:
            raise InvalidRequest([*prefix, "ep"], f"{model.id} has no experts; ep applies to MoE models only")
        if wl.context_tokens > model.max_position_embeddings:
            raise InvalidRequest(["workload", "max_context_tokens"],
                                 f"{wl.context_tokens} tokens exceed the {model.max_position_embeddings}-token "
                                 f"context window of {model.id}")
        max_len = dep.engine_args.max_model_len
        if max_len is not None and max_len < wl.input_tokens + wl.output_tokens:
            raise InvalidRequest([*prefix, "engine_args", "max_model_len"],
                                 f"max_model_len {max_len} is shorter than input + output = "
                                 f"{wl.input_tokens + wl.output_tokens} tokens")
        args = dep.engine_args
        if dep.engine == "vllm" and args.kv_cache_free_gpu_memory_fraction is not None:
            raise InvalidRequest([*prefix, "engine_args", "kv_cache_free_gpu_memory_fraction"],
                                 "is a TensorRT-LLM setting; vLLM takes gpu_memory_utilization")
        if dep.engine == "trtllm" and args.gpu_memory_utilization is not None:
            raise InvalidRequest([*prefix, "engine_args", "gpu_memory_utilization"],
                                 "is a vLLM setting; TensorRT-LLM takes kv_cache_free_gpu_memory_fraction")

    def defaults(self, engine: str, version: str, gpu: GpuSpec) -> EngineDefaults:
        """The engine version's defaults on ``gpu``, read from its vocabulary once."""
        key = (engine, version, gpu.id)
        d = self._defaults.get(key)
        if d is None:
            d = self._defaults[key] = resolve(engine, version, gpu, self.constants)
        return d

    def settings_for(self, dep: Deployment, gpu: GpuSpec, wl: Workload) -> tuple[ResolvedSettings, EngineDefaults]:
        version = dep.engine_version or self.engines[dep.engine].default_version
        d = self.defaults(dep.engine, version, gpu)
        a = dep.engine_args
        fraction = a.gpu_memory_utilization if dep.engine == "vllm" else a.kv_cache_free_gpu_memory_fraction
        return ResolvedSettings(
            engine_version=version, max_num_seqs=a.max_num_seqs or d.max_num_seqs,
            max_num_batched_tokens=a.max_num_batched_tokens or d.max_num_batched_tokens,
            memory_fraction=fraction if fraction is not None else d.mem_fraction,
            memory_fraction_flag="gpu_memory_utilization" if dep.engine == "vllm" else
            "kv_cache_free_gpu_memory_fraction",
            max_model_len=a.max_model_len or wl.context_tokens, defaults_source=d.source), d

    # --- prediction ----------------------------------------------------------------------------------

    def tables_for(self, model: ModelSpec) -> tuple[Tables, int]:
        idx = self.index["model"].get(model.id)
        if idx is not None and model.model_type != "inline":
            return self.tables, idx
        tables = build_tables(self.catalog, self.constants, extra_models=[model])
        return tables, len(tables.model_ids) - 1

    def params_for(self, keys: list[tuple[str, str, str, str]], current: list[bool], cls: str = "") -> Params:
        """Fitted parameters of each (engine, arch, GPU, dtype) key, of the current engine generation or not, for
        a model of class ``cls`` (dense, moe, mla: the software overheads' key): looked up once per key for the
        calibration in use (a new calibration starts afresh)."""
        return Params.from_matrix(self.param_rows(keys, current, cls))

    def param_rows(self, keys: list[tuple[str, str, str, str]], current: list[bool],
                   cls: str = "") -> NDArray[np.float64]:
        """``params_for`` as a matrix: a row per key, a column per parameter (``PARAM_NAMES``)."""
        cal = self.cal.calibration
        held = self._params_held
        if held[0] is not cal:
            held = (cal, {}, np.zeros((0, len(PARAM_NAMES))))
        wanted = [(k, c, cls) for k, c in zip(keys, current, strict=True)]
        row_of = held[1]
        missing = list(dict.fromkeys(w for w in wanted if w not in row_of))
        if missing:
            got = cal.params_for([k for k, _, _ in missing], np.asarray([c for _, c, _ in missing], dtype=bool),
                                 [cl for _, _, cl in missing])
            new = np.stack([np.asarray(getattr(got, n), dtype=np.float64) for n in PARAM_NAMES], axis=1)
            row_of = {**row_of, **{w: len(row_of) + i for i, w in enumerate(missing)}}
            held = self._params_held = (cal, row_of, np.concatenate([held[2], new]))
        return held[2][np.fromiter((row_of[w] for w in wanted), dtype=np.int64, count=len(wanted))]

    def predict(self, req: PredictionRequest, launch: Launch | None = None, analysed: Analysed | None = None,
                sims: SimMemo | None = None) -> PredictionResponse:
        """``launch``: the deployment's launch when the caller has already rendered it (``self.launch`` of the
        same deployment and settings: the recommender checks it before predicting), so it is not rendered
        twice. ``analysed``: the deployment's analytic terms when the caller has them (``self.analyse`` of the
        same model, workload and deployment, in a batch). ``sims``: the simulations the caller has run for
        other deployments of the same request (one with the same inputs is not run again)."""
        model = self.model_for(req.model, req.model_spec)
        dep, wl = req.deployment, req.workload
        self.check_runnable(model, dep, wl, ["deployment"])
        gpu = self.gpus[dep.gpu]
        settings, _ = self.settings_for(dep, gpu, wl)
        static, params, res, key = analysed if analysed is not None else self.analyse(model, wl, [dep]).row(0)
        skip = skip_reason(dep, wl)
        sim = (simulate_deployment(static, params, dep, wl, req.simulation, sims)
               if bool(res.fits[0]) and req.simulation.enabled and skip is None else None)
        model_name = req.model or (req.model_spec.name if req.model_spec else model.id)
        out = self._response(model, model_name, dep, wl, gpu, settings, res, params, key, sim, launch)
        if skip and out.fits and req.simulation.enabled:
            out.notes.append(skip)
        return out

    def analyse(self, model: ModelSpec, wl: Workload, deps: list[Deployment]) -> Analyses:
        """Static terms, fitted parameters and analytic serving figures of each deployment of ``model`` under
        ``wl``, computed for all of them at once."""
        tables, m_idx = self.tables_for(model)
        load = {"concurrency": float(wl.concurrency or 0), "request_rate": float(wl.request_rate or 0.0),
                "offline": float(wl.num_requests or 0)}[wl.mode]
        rows: list[tuple[float, ...]] = []
        idx: list[tuple[int, int, int, int]] = []
        keys: list[tuple[str, str, str, str]] = []
        current: list[bool] = []
        for dep in deps:
            gpu = self.gpus[dep.gpu]
            settings, defaults = self.settings_for(dep, gpu, wl)
            idx.append((self.index["gpu"][gpu.id], self.index["wdtype"][dep.weight_dtype],
                        self.index["kvdtype"][dep.kv_dtype], defaults.budget))
            rows.append((float(dep.tp), float(dep.pp), float(dep.ep or 1), float(dep.replicas),
                         float(settings.max_num_seqs), float(settings.max_num_batched_tokens),
                         settings.memory_fraction, float(settings.max_model_len)))
            keys.append((calibration_engine(dep.engine, gpu.vendor), gpu.architecture, gpu.id, dep.weight_dtype))
            current.append(is_current(dep.engine, settings.engine_version, self.constants))
        n = len(deps)
        ix = np.asarray(idx, dtype=np.int64).reshape(n, 4).T
        f = np.asarray(rows, dtype=np.float64).reshape(n, 8).T
        cand = Candidates(
            model=np.full(n, m_idx), gpu=ix[0], wdtype=ix[1], kvdtype=ix[2], budget=ix[3], tp=f[0], pp=f[1], ep=f[2],
            replicas=f[3], max_num_seqs=f[4], max_batched_tok=f[5], mem_fraction=f[6],
            input_tok=np.full(n, float(wl.input_tokens)), output_tok=np.full(n, float(wl.output_tokens)),
            mode=np.full(n, MODES[wl.mode]), load=np.full(n, load), context_tok=f[7],
            first_wave_share=np.full(n, wl.first_wave_share))
        params = self.params_for(keys, current, model_class(model))
        static = static_terms(tables, cand)
        res = serve(static, params)
        # users' measurements near these deployments (the same function corrects the search's candidates)
        corr = correction(self.cal.calibration.residuals(), keys, cand.tp * cand.pp, MODES[wl.mode],
                          wl.input_tokens, wl.output_tokens, float(tables.active_linear_params[m_idx]))
        if corr is not None:
            res = corrected(res, corr.factors(np.arange(n), load / np.maximum(cand.replicas, 1.0)), cand.output_tok)
        return Analyses(static, params, res, keys)

    def launch(self, model_id: str, dep: Deployment, settings: ResolvedSettings) -> Launch:
        """The command that starts ``dep`` with exactly the settings the prediction assumed."""
        try:
            return self.render_launch(model_id, dep, settings)
        except LaunchError as exc:
            return Launch(error=str(exc))

    def render_launch(self, model_id: str, dep: Deployment, settings: ResolvedSettings) -> Launch:
        """``launch``, raising its ``LaunchError`` (a ``CheckpointError`` when no checkpoint plan exists)."""
        a = dep.engine_args
        vllm = dep.engine == "vllm"
        spec = LaunchSpec(
            model_id=model_id, gpu_id=dep.gpu, tp=dep.tp, pp=dep.pp, replicas=dep.replicas,
            weight_dtype=dep.weight_dtype, kv_dtype=dep.kv_dtype, engine=dep.engine,
            engine_version=settings.engine_version, max_num_seqs=settings.max_num_seqs,
            max_num_batched_tokens=settings.max_num_batched_tokens, max_model_len=settings.max_model_len,
            gpu_memory_utilization=settings.memory_fraction if vllm else None,
            kv_cache_free_gpu_memory_fraction=None if vllm else settings.memory_fraction,
            enable_chunked_prefill=a.enable_chunked_prefill, enable_prefix_caching=a.enable_prefix_caching)
        out = render_launch(spec, self.catalog)
        return Launch(command=out["command"], container=out["container"], args=out["args"], files=out["files"],
                      steps=out["steps"], replicas=out["replicas"], notes=out["notes"])

    def _response(self, model: ModelSpec, model_name: str, dep: Deployment, wl: Workload, gpu: GpuSpec,
                  settings: ResolvedSettings, res: Result, params: Params,
                  key: tuple[str, str, str, str], sim: Simulation | None = None,
                  launch: Launch | None = None) -> PredictionResponse:
        i = 0
        fits = bool(res.fits[i])
        notes: list[str] = []
        cap_gb = gpu.memory_gb
        mem = MemoryPerGpu(
            weights=round(float(res.weights_bytes[i]) / GB_BYTES, 3),
            kv_cache=round(float(res.kv_cache_bytes[i]) / GB_BYTES, 3),
            activations=round(float(res.activations_bytes[i]) / GB_BYTES, 3),
            overhead=round(float(res.overhead_bytes[i]) / GB_BYTES, 3),
            total=round(float(res.weights_bytes[i] + res.kv_cache_bytes[i] + res.activations_bytes[i]
                              + res.overhead_bytes[i]) / GB_BYTES, 3),
            capacity=cap_gb,
            kv_bytes_per_token=round(float(res.kv_bytes_per_seq[i]) / settings.max_model_len, 1),
            kv_capacity_tokens=int(res.kv_cache_bytes[i] / max(float(res.kv_bytes_per_seq[i]), 1.0)
                                   * settings.max_model_len))
        confidence = self.confidence(key, wl.mode, model_class(model))
        price = gpu.price_usd_per_gpu_hour
        usd_h = price * dep.total_gpus if price else None
        if not fits:
            need = float(res.weights_bytes[i] + res.activations_bytes[i] + res.overhead_bytes[i]) / GB_BYTES
            if need >= cap_gb:
                notes.append(f"does not fit: weights {mem.weights:.1f} GB + activations {mem.activations:.1f} GB + "
                             f"overhead {mem.overhead:.1f} GB per GPU exceed the {cap_gb:.0f} GB of one {gpu.id}")
            else:
                notes.append(f"does not fit: {mem.kv_cache:.2f} GB left for the KV cache per GPU cannot hold one "
                             f"{settings.max_model_len}-token sequence "
                             f"({float(res.kv_bytes_per_seq[i]) / GB_BYTES:.2f} "
                             "GB per GPU)")
            return PredictionResponse(fits=False, model=model.id, predicted=None, memory_per_gpu_gb=mem,
                                      cost=Cost(usd_per_hour=usd_h, usd_per_million_output_tokens=None,
                                                price_source=gpu.sources.price),
                                      settings=settings, confidence=confidence, notes=notes)
        predicted = self.predicted(res, params, i, wl, sim, dep.replicas)
        if wl.concurrency is not None and wl.concurrency > predicted.max_concurrency:
            notes.append(f"{wl.concurrency} concurrent requests exceed the {predicted.max_concurrency} sequences "
                         f"of {settings.max_model_len} tokens the deployment holds at once: the rest queue "
                         "(TTFT includes the wait)")
        if bool(res.overloaded[i]):
            notes.append(f"request rate {wl.request_rate} req/s exceeds the capacity of about "
                         f"{predicted.requests_per_s:.2f} req/s: the queue grows without bound; TTFT is the "
                         "value at the edge of saturation")
        if sim is not None and sim.result.saturated:
            notes.append(f"in the simulation one replica completed {sim.result.requests_s:.3g} req/s of the "
                         f"{sim.load_per_replica} offered: its queue grew for the whole run, so the simulated "
                         "percentiles grow with the number of requests simulated")
        if sim is not None and sim.result.preemptions:
            notes.append(f"the KV cache ran out in the simulation: {sim.result.preemptions} preemptions "
                         f"(requests evicted and recomputed) over {sim.result.requests + sim.result.warmup} "
                         "requests")
        if sim is not None and sim.result.clipped:
            notes.append(f"{sim.result.clipped} of the {sim.result.requests} simulated requests had sampled lengths "
                         f"cut to max_model_len {settings.max_model_len} (raise workload.max_context_tokens to keep "
                         "the distribution's tail)")
        level = self.support.get((dep.engine, "weight", dep.weight_dtype, gpu.architecture))
        if level == "fallback":
            notes.append(f"{dep.weight_dtype} has no native tensor-core path on {gpu.architecture}: weights are "
                         "stored in it but the GEMMs run in 16 bits (saves memory, not compute)")
        if wl.prefix_cache_hit_rate:
            notes.append("prefix_cache_hit_rate is not modelled yet: prompts are prefilled in full (conservative)")
        usd_m = (usd_h / (predicted.output_tok_s * S_PER_HOUR) * TOKENS_PER_MILLION
                 if usd_h and predicted.output_tok_s > 0 else None)
        return PredictionResponse(
            fits=True, model=model.id, predicted=predicted, memory_per_gpu_gb=mem,
            cost=Cost(usd_per_hour=round(usd_h, 4) if usd_h else None,
                      usd_per_million_output_tokens=round(usd_m, 4) if usd_m else None,
                      price_source=gpu.sources.price),
            settings=settings, confidence=confidence,
            launch=launch if launch is not None else self.launch(model_name, dep, settings), notes=notes)

    @staticmethod
    def predicted(res: Result, params: Params, i: int, wl: Workload, sim: Simulation | None = None,
                  replicas: int = 1) -> Predicted:
        """The response's figures, from one mechanism: every latency mean and percentile and the throughput
        from the simulation when there is one (so that p50 <= p90 <= p95 <= p99 and each mean lies within its
        distribution), else all from the analytic model (its means, an analytic tail). Memory, capacity,
        the prompt alone and the compute share are the analytic model's either way (no load involved)."""
        analytic = Advisor._analytic_predicted(res, params, i, wl)
        if sim is None:
            return analytic
        s = simulated(sim)
        r = sim.result
        thr = 1.0
        if res.correction is not None:     # users' measurements nearby: the factors the analytic figures got
            s, thr = Advisor._corrected_simulated(s, res.correction[i])
        tpot = s.tpot_ms if s.tpot_ms is not None else LatencyStats(
            **{k: round(s.itl_ms.mean if s.itl_ms else 0.0, 3) for k in ("mean", "p50", "p90", "p95", "p99")})
        # the deployment's throughput: the simulated replica's times the replicas, a closed loop's scaled by the
        # clients each replica has on average over those the busiest one (the one simulated) has
        scale = float(replicas)
        if wl.concurrency is not None:
            scale = float(wl.concurrency) / math.ceil(wl.concurrency / replicas)
        return analytic.model_copy(update={
            "ttft_ms": s.ttft_ms.mean, "ttft_p50_ms": s.ttft_ms.p50, "ttft_p90_ms": s.ttft_ms.p90,
            "ttft_p95_ms": s.ttft_ms.p95, "ttft_p99_ms": s.ttft_ms.p99,
            "tpot_ms": tpot.mean, "tpot_p50_ms": tpot.p50, "tpot_p90_ms": tpot.p90, "tpot_p95_ms": tpot.p95,
            "tpot_p99_ms": tpot.p99, "e2e_ms": s.e2e_ms.mean, "e2e_p95_ms": s.e2e_ms.p95,
            # tokens generated over the simulated window (in-flight requests' included), and the requests they
            # make at the workload's mean lengths: output = requests/s x output tokens holds
            "output_tok_s": round(r.output_tok_s * thr * scale, 2),
            "total_tok_s": round(r.output_tok_s * thr * scale * (wl.input_tokens + wl.output_tokens)
                                 / wl.output_tokens, 2),
            "requests_per_s": round(r.output_tok_s * thr * scale / wl.output_tokens, 4),
            "batch_per_replica": round(r.batch_mean, 2),
            "percentile_method": percentile_method(sim), "simulation": s})

    @staticmethod
    def _corrected_simulated(s: Simulated, factors: NDArray[np.float64]) -> tuple[Simulated, float]:
        """The simulation's figures scaled by the correction of users' measurements (TTFT, TPOT and throughput
        factors), as the analytic figures are: each statistic of one distribution by one factor, so their
        order holds; E2E by the factor of its mean TTFT and decode parts. Also the throughput factor."""
        f_ttft, f_tpot, f_thr = (float(v) for v in factors)

        def scaled(st: LatencyStats | None, k: float, digits: int) -> LatencyStats | None:
            return None if st is None else LatencyStats(**{q: round(v * k, digits)
                                                            for q, v in st.model_dump().items()})

        e2e, ttft = s.e2e_ms.mean, s.ttft_ms.mean
        f_e2e = (f_ttft * ttft + f_tpot * (e2e - ttft)) / e2e if e2e > 0 else 1.0
        return s.model_copy(update={
            "ttft_ms": scaled(s.ttft_ms, f_ttft, 2), "tpot_ms": scaled(s.tpot_ms, f_tpot, 3),
            "itl_ms": scaled(s.itl_ms, f_tpot, 3), "e2e_ms": scaled(s.e2e_ms, f_e2e, 2),
            "replica_output_tok_s": round(s.replica_output_tok_s * f_thr, 2)}), f_thr

    @staticmethod
    def _analytic_predicted(res: Result, params: Params, i: int, wl: Workload) -> Predicted:
        ttft = float(res.ttft_s[i])
        tpot = float(res.tpot_s[i])
        base = float(params.ttft_fixed_s[i] if np.ndim(params.ttft_fixed_s) else params.ttft_fixed_s)
        prefill = float(res.prefill_s[i])

        def ttft_q(q: float) -> float:
            return float(analytic_ttft_quantile_s(ttft, base, prefill, q)) * MS_PER_S

        return Predicted(
            ttft_ms=round(ttft * MS_PER_S, 2), ttft_p50_ms=round(ttft_q(QUANTILES["p50"]), 2),
            ttft_p90_ms=round(ttft_q(QUANTILES["p90"]), 2), ttft_p95_ms=round(ttft_q(QUANTILES["p95"]), 2),
            ttft_p99_ms=round(ttft_q(QUANTILES["p99"]), 2),
            tpot_ms=round(tpot * MS_PER_S, 3), tpot_p50_ms=round(tpot * MS_PER_S, 3),
            tpot_p90_ms=round(tpot * MS_PER_S, 3), tpot_p95_ms=round(tpot * MS_PER_S, 3),
            tpot_p99_ms=round(tpot * MS_PER_S, 3),
            e2e_ms=round(float(res.e2e_s[i]) * MS_PER_S, 1),
            e2e_p95_ms=round((ttft_q(QUANTILES["p95"]) / MS_PER_S + (wl.output_tokens - 1) * tpot) * MS_PER_S, 1),
            output_tok_s=round(float(res.output_tok_s[i]), 2), total_tok_s=round(float(res.total_tok_s[i]), 2),
            requests_per_s=round(float(res.requests_s[i]), 4), max_concurrency=int(res.max_concurrency[i]),
            batch_per_replica=round(float(res.batch[i]), 2), prefill_ms=round(float(res.prefill_s[i]) * MS_PER_S, 2),
            compute_bound_share=round(float(res.compute_bound_share[i]), 3),
            percentile_method="analytic steady state: TTFT percentiles put an exponential tail on the queueing "
            "part of the mean TTFT; TPOT percentiles equal the mean (each request's TPOT averages many steps)")

    def confidence(self, key: tuple[str, str, str, str], mode: str, cls: str = "") -> Confidence:
        cal = self.cal.calibration
        seg, info = cal.lookup(key)
        sw_seg, sw = cal.overheads(key, cls)
        engine, arch, gpu, dtype = key
        metrics = ("throughput",) if mode == "offline" else METRICS
        err = None
        err_seg = seg
        # the error of the segment used, else of its nearest ancestor that has held-out rows
        for level in reversed(LEVELS[: LEVELS.index(info["level"]) + 1]):
            k = segment_key(level, key)
            stats = self.cal.segment_errors.get(k)
            vals = [stats[mn]["median_ape_pct"] for mn in metrics if stats and stats[mn]["median_ape_pct"] is not None]
            if vals:
                err, err_seg = max(vals), k
                break
        if err is None and self.cal.overall_errors:
            vals = [self.cal.overall_errors[mn]["median_ape_pct"] for mn in metrics
                    if self.cal.overall_errors[mn]["median_ape_pct"] is not None]
            err, err_seg = (max(vals) if vals else None), "overall"
        n = int(info["n"])
        if info["level"] == "engine/gpu/dtype":
            basis = f"calibrated on {n} measurements of {gpu}/{engine}/{dtype}"
        elif info["level"] == "engine/gpu":
            basis = f"no {dtype} measurements on {gpu}/{engine}: calibrated on {n} measurements of {gpu}/{engine}"
        elif info["level"] == "engine/arch":
            basis = (f"no measurements for {gpu} with {engine}: roofline with {arch}-architecture efficiencies "
                     f"({n} measurements)")
        elif info["level"] == "engine":
            basis = (f"no measurements for {arch} GPUs with {engine}: roofline with {engine} efficiencies "
                     f"({n} measurements)")
        else:
            basis = f"no measurements for {engine}: roofline with global efficiencies ({n} measurements)"
        if err_seg != seg:
            basis += f"; error band from {err_seg}"
        lat_n, archs = sw.get("latency_n"), sw.get("architectures")
        if lat_n is not None:
            basis += f"; overheads from {sw_seg}: {lat_n} latency measurements of {archs} architectures"
        return Confidence(error_pct=err, error_kind=self.cal.error_kind, basis=basis, segment=seg, measurements=n,
                          calibration_version=self.cal.version, overheads_segment=sw_seg,
                          latency_measurements=lat_n, latency_architectures=archs)
