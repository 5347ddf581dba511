"""Response bodies of GET /v1/calibration: the fitted cost-model parameters and their error."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

# What each fitted parameter is, with its unit (gpu_catalog/data/costmodel.yaml, initial_params).
PARAMETER_DESCRIPTIONS = {
    "eff_flops": "share of the GPU's dense tensor FLOPS that GEMMs reach (0..1)",
    "eff_bw": "share of the memory bandwidth that decode reaches (0..1)",
    "step_overhead_s": "scheduling + sampling + kernel launch per decode step, seconds",
    "ttft_fixed_s": "serving front end per request (HTTP, tokenise, detokenise), seconds",
    "comm_eff": "share of the GPU-to-GPU link bandwidth an all-reduce reaches (0..1)",
    "allreduce_latency_s": "fixed cost of one all-reduce, seconds",
    "wave": "share of the arrival wave's prefill queue seen in mean TTFT (dimensionless)",
    "moe_layer_prefill_s": "per layer with routed experts, in each prompt's prefill (routing, expert dispatch), "
                           "seconds",
    "layer_overhead_s": "per layer of each forward pass (kernel launches and the gaps between them, whatever the "
                        "bytes moved), seconds",
    "a2a_latency_s": "fixed cost of one expert all-to-all (dispatch or combine under expert parallelism), seconds",
}


class MetricError(BaseModel):
    n: int = Field(description="measurements that publish this metric")
    median_ape_pct: float | None = Field(description="median absolute % error of the prediction")
    p90_ape_pct: float | None = Field(description="90th percentile of the absolute % error")


class MetricErrors(BaseModel):
    throughput: MetricError = Field(description="output tok/s (total tok/s where only that is published)")
    ttft: MetricError = Field(description="mean (or median) time to first token")
    tpot: MetricError = Field(description="mean time per output token (ITL where TPOT is not published)")


class ErrorReport(BaseModel):
    kind: Literal["leave-one-source-out", "in-sample"] = Field(
        description="leave-one-source-out: each source's rows predicted by a calibration fitted without that "
        "source (what benchmarks/accuracy.py prints); in-sample: predicted by the calibration fitted on them "
        "(optimistic)")
    rows: int = Field(description="measurements scored")
    sources: int = Field(description="distinct sources among them")
    overall: MetricErrors = Field(description="error over every scored measurement")
    by_gpu: dict[str, MetricErrors] = Field(description="error by GPU id")
    by_engine: dict[str, MetricErrors] = Field(description="by calibration engine (an engine on AMD GPUs apart)")
    by_dtype: dict[str, MetricErrors] = Field(description="by weight dtype")
    by_mode: dict[str, MetricErrors] = Field(description="offline, static_batch, concurrency, request_rate")
    by_segment: dict[str, MetricErrors] = Field(description="by the segment whose parameters predicted the row")
    elapsed_s: float | None = Field(default=None, description="seconds the cross-validation took")


class Segment(BaseModel):
    key: str = Field(description="global, <engine>, <engine>/<architecture>, <engine>/<gpu>, "
                     "<engine>/<gpu>/<weight dtype>, or <engine>/<dense|moe|mla> (software overheads of a model class)")
    level: Literal["global", "engine", "engine/arch", "engine/gpu", "engine/gpu/dtype", "engine/class"] = Field(
        description="the segment's level, general to specific")
    parent: str | None = Field(description="the segment it is shrunk toward (its prior)")
    measurements: int = Field(description="measurements it was fitted on")
    params: dict[str, float] = Field(description="fitted parameters (see `parameters` for units)")
    owns: list[str] | None = Field(default=None, description="the parameters this segment fitted; the others are "
                                   "its parent's (hardware efficiencies below the engine level, software overheads "
                                   "at engine/class)")
    latency_measurements: int | None = Field(default=None, description="TTFT/TPOT measurements among them")
    architectures: int | None = Field(default=None, description="model architectures among the latency measurements")
    latency_sources: int | None = Field(default=None, description="sources of the latency measurements")


class Fallback(BaseModel):
    gpu: str = Field(description="GPU id")
    engine: str = Field(description="engine id")
    architecture: str = Field(description="the GPU's architecture")
    segment: str = Field(description="the segment predictions for this GPU and engine use")
    level: str = Field(description="level of the segment used (engine/arch, engine or global)")
    measurements: int = Field(description="measurements behind that segment")


class CalibrationPublic(BaseModel):
    version: int = Field(description="calibration version (increases with every fit)")
    current: bool = Field(description="the newest version (what every worker serves within "
                          "calibration_refresh_s)")
    created_at: datetime = Field(description="when it was fitted (UTC)")
    data_sha256: str = Field(description="content hash of the measurements it was fitted on")
    n_measurements: int = Field(description="measurements scored (quality good, an engine and ids the model knows)")
    method: Literal["full", "refit"] = Field(
        description="full: every level fitted on all measurements; refit: after an ingest, only the segments "
        "holding the new rows were refitted on top of base_version")
    base_version: int | None = Field(default=None, description="for a refit: the version it started from")
    refitted_segments: list[str] = Field(default_factory=list, description="for a refit: the segments refitted")
    fit_s: float | None = Field(default=None, description="seconds the fit took")
    levels: list[str] = Field(description="segment levels, general to specific; a prediction uses the most "
                              "specific fitted segment of its (engine, architecture, gpu, weight dtype)")
    parameters: dict[str, str] = Field(description="what each fitted parameter is, with its unit")
    generation: dict[str, float] = Field(
        description="per engine: speed of releases before the generation the service targets, relative to it")
    segments: list[Segment] = Field(description="fitted parameters per segment, general to specific")
    error: ErrorReport = Field(description="the held-out report when computed, else the in-sample one")
    held_out: ErrorReport | None = Field(description="leave-one-source-out error, once computed")
    held_out_status: Literal["computed", "pending", "off"] = Field(
        description="computed: `held_out` is this version's; pending: a low-priority background process is "
        "computing it (until then `error` is the in-sample error); off: not computed by the service "
        "(CALIBRATION_CV=off, or an older version; `python -m service.calibration.jobs` computes the newest one's "
        "on demand)")
    error_current: bool = Field(
        description="whether `error` is the leave-one-source-out error of this version's own measurements "
        "(false: it is the in-sample error, which flatters the fit)")
    shipped: bool = Field(default=False, description="taken from the calibration file shipped with the service "
                          "(fitted on exactly these measurements by exactly this code), not fitted at start-up")
    in_sample: ErrorReport | None = Field(
        description="error of the calibration on the measurements it was fitted on (optimistic)")
    not_scored: dict[str, int] = Field(description="stored measurements the cost model cannot score, by reason")
    no_measurements: list[Fallback] = Field(
        description="catalog GPU x engine combinations without measurements, and the segment they fall back to")
    reproduce: str = Field(description="the command that prints the held-out figures for the same data")
