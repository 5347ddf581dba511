"""Request and response bodies of POST /v1/predictions (SPEC.md), shared with recommendations."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Upper bounds that keep one request from asking for absurd work; generous for any real deployment.
MAX_TOKENS_PER_REQUEST = 10_000_000
MAX_CONCURRENCY = 1_000_000
MAX_REQUEST_RATE_PER_S = 1_000_000.0
MAX_PARALLEL = 1024


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


# Histogram of a length distribution: at most this many bins; its mean must be within this share of the
# workload's stated mean (the analytic model uses the stated mean, the simulation the histogram).
MAX_HISTOGRAM_BINS = 1000
HISTOGRAM_MEAN_TOLERANCE = 0.05
# Simulated requests per prediction: bounds on what one request may ask for (time grows linearly, ~3 us each:
# benchmarks/sim_speed.py measured 310,401 simulated requests/s on 2 cores).
MIN_SIM_REQUESTS = 100
MAX_SIM_REQUESTS = 20_000
DEFAULT_SIM_REQUESTS = 2000


class LengthBin(_Body):
    tokens: int = Field(ge=1, le=MAX_TOKENS_PER_REQUEST, description="a length, tokens")
    weight: float = Field(gt=0, le=1e12, description="its relative frequency (any scale)")


class LengthDistribution(_Body):
    """How a length varies across requests around the workload's mean (``input_tokens`` or
    ``output_tokens``): give ``std_tokens`` (lengths drawn from a lognormal with that mean and standard
    deviation) or ``histogram`` (lengths drawn from its bins; their weighted mean must match the stated
    mean within 5%). Used by the simulation behind the percentiles; the means stay analytic."""

    std_tokens: float | None = Field(default=None, ge=0, le=MAX_TOKENS_PER_REQUEST,
                                     description="standard deviation of the length, tokens")
    histogram: list[LengthBin] | None = Field(default=None, min_length=1, max_length=MAX_HISTOGRAM_BINS)

    @model_validator(mode="after")
    def _one_shape(self) -> LengthDistribution:
        if (self.std_tokens is None) == (self.histogram is None):
            raise ValueError("give exactly one of std_tokens or histogram")
        return self

    def histogram_mean(self) -> float | None:
        if not self.histogram:
            return None
        total = sum(b.weight for b in self.histogram)
        return sum(b.tokens * b.weight for b in self.histogram) / total


class Workload(_Body):
    """What the deployment serves. Exactly one of ``concurrency``, ``request_rate``, ``offline``."""

    input_tokens: int = Field(ge=1, le=MAX_TOKENS_PER_REQUEST, description="prompt length, tokens")
    output_tokens: int = Field(ge=1, le=MAX_TOKENS_PER_REQUEST, description="generated length, tokens")
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY,
                                    description="closed loop: N clients, each sending its next request when "
                                    "the last one ends")
    request_rate: float | None = Field(default=None, gt=0, le=MAX_REQUEST_RATE_PER_S,
                                       description="open loop: Poisson arrivals, requests per second")
    offline: bool | None = Field(default=None, description="as many requests at once as the deployment takes")
    max_context_tokens: int | None = Field(
        default=None, ge=2, le=MAX_TOKENS_PER_REQUEST,
        description="longest prompt + output the deployment must accept (sets max_model_len); "
        "default input_tokens + output_tokens")
    num_requests: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY, description="offline: requests in the job")
    prefix_cache_hit_rate: float = Field(default=0.0, ge=0.0, le=1.0,
                                         description="share of prompt tokens served from the prefix cache")
    input_distribution: LengthDistribution | None = Field(
        default=None, description="how prompt lengths vary around input_tokens (default: all equal)")
    output_distribution: LengthDistribution | None = Field(
        default=None, description="how output lengths vary around output_tokens (default: all equal)")

    @model_validator(mode="after")
    def _one_load(self) -> Workload:
        given = [n for n, v in (("concurrency", self.concurrency), ("request_rate", self.request_rate),
                                ("offline", self.offline or None)) if v is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of concurrency, request_rate or offline: true "
                             f"(got {', '.join(given) or 'none'})")
        if self.max_context_tokens is not None and self.max_context_tokens < self.input_tokens + self.output_tokens:
            raise ValueError("max_context_tokens must be at least input_tokens + output_tokens")
        for name, dist, mean in (("input", self.input_distribution, self.input_tokens),
                                 ("output", self.output_distribution, self.output_tokens)):
            h_mean = dist.histogram_mean() if dist else None
            if h_mean is not None and abs(h_mean / mean - 1.0) > HISTOGRAM_MEAN_TOLERANCE:
                raise ValueError(f"{name}_distribution.histogram has mean {h_mean:.1f} tokens but {name}_tokens is "
                                 f"{mean}: set {name}_tokens to the histogram's mean (within "
                                 f"{HISTOGRAM_MEAN_TOLERANCE:.0%})")
        return self

    @property
    def mode(self) -> Literal["offline", "concurrency", "request_rate"]:
        if self.concurrency is not None:
            return "concurrency"
        if self.request_rate is not None:
            return "request_rate"
        return "offline"

    @property
    def context_tokens(self) -> int:
        return self.max_context_tokens or self.input_tokens + self.output_tokens


class EngineArgs(_Body):
    """Engine settings; each left out takes the engine's own default for that GPU and version."""

    max_num_seqs: int | None = Field(default=None, ge=1, le=65536,
                                     description="vLLM --max-num-seqs / TensorRT-LLM --max_batch_size")
    max_num_batched_tokens: int | None = Field(default=None, ge=16, le=1_048_576,
                                               description="vLLM --max-num-batched-tokens / "
                                               "TensorRT-LLM --max_num_tokens")
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1,
                                                 description="vLLM: share of total GPU memory the instance may use")
    kv_cache_free_gpu_memory_fraction: float | None = Field(
        default=None, gt=0, le=1, description="TensorRT-LLM: share of memory free after weights given to the KV cache")
    max_model_len: int | None = Field(default=None, ge=2, le=MAX_TOKENS_PER_REQUEST,
                                      description="longest sequence (prompt + output) accepted")
    enable_chunked_prefill: bool | None = None
    enable_prefix_caching: bool | None = None


class Deployment(_Body):
    gpu: str = Field(description="GPU id (GET /v1/gpus)", examples=["h100-sxm"])
    gpu_count: int | None = Field(default=None, ge=1, le=MAX_PARALLEL**2,
                                  description="tp x pp x replicas (computed when left out)")
    tp: int = Field(default=1, ge=1, le=MAX_PARALLEL, description="tensor-parallel size")
    pp: int = Field(default=1, ge=1, le=MAX_PARALLEL, description="pipeline-parallel size")
    replicas: int = Field(default=1, ge=1, le=MAX_PARALLEL, description="independent copies behind a load balancer")
    ep: int | None = Field(default=None, ge=1, le=MAX_PARALLEL,
                           description="MoE expert-parallel size within a replica (default: experts split by tp)")
    weight_dtype: str = Field(default="bf16", description="weight dtype id (GET /v1/quantizations)")
    kv_dtype: str = Field(default="auto", description="KV-cache dtype id")
    engine: Literal["vllm", "trtllm"] = "vllm"
    engine_version: str | None = Field(default=None, description="default: the newest supported release")
    engine_args: EngineArgs = Field(default_factory=EngineArgs)
    multi_node: bool = Field(default=False, description="allow a replica to span nodes (pipeline stages across nodes)")

    @model_validator(mode="after")
    def _count(self) -> Deployment:
        layout = self.tp * self.pp * self.replicas
        if self.gpu_count is not None and self.gpu_count != layout:
            raise ValueError(f"gpu_count {self.gpu_count} != tp x pp x replicas = {layout}")
        return self

    @property
    def total_gpus(self) -> int:
        return self.tp * self.pp * self.replicas


class InlineModel(_Body):
    """An architecture that is not in the catalog, given by its config.json fields."""

    name: str = Field(default="inline-model", max_length=200)
    num_layers: int = Field(ge=1, le=1024)
    hidden_size: int = Field(ge=1, le=1_000_000)
    intermediate_size: int = Field(ge=1, le=10_000_000)
    num_attention_heads: int = Field(ge=1, le=4096)
    num_kv_heads: int = Field(ge=1, le=4096)
    head_dim: int | None = Field(default=None, ge=1, le=4096, description="default hidden_size / heads")
    vocab_size: int = Field(ge=1, le=10_000_000)
    max_position_embeddings: int = Field(default=131072, ge=16, le=MAX_TOKENS_PER_REQUEST)
    tie_word_embeddings: bool = False
    num_experts: int | None = Field(default=None, ge=1, le=4096)
    experts_per_token: int | None = Field(default=None, ge=1, le=4096)
    num_shared_experts: int | None = Field(default=None, ge=0, le=64)
    moe_intermediate_size: int | None = Field(default=None, ge=1, le=10_000_000)
    mla_kv_lora_rank: int | None = Field(default=None, ge=1, le=65536)
    mla_qk_rope_head_dim: int | None = Field(default=None, ge=1, le=4096)
    mla_qk_nope_head_dim: int | None = Field(default=None, ge=1, le=4096)
    mla_v_head_dim: int | None = Field(default=None, ge=1, le=4096)
    total_params_b: float | None = Field(default=None, gt=0, le=100_000, description="default: from the shapes")
    active_params_b: float | None = Field(default=None, gt=0, le=100_000)


class SimulationOptions(_Body):
    """The scheduler simulation behind the percentile fields."""

    enabled: bool = Field(default=True, description="false: analytic percentiles only (an exponential tail on "
                          "the queueing part of the mean TTFT), no simulation")
    requests: int | None = Field(default=None, ge=MIN_SIM_REQUESTS, le=MAX_SIM_REQUESTS,
                                 description=f"requests measured (after a warm-up; the p99 rests on the slowest 1%); "
                                 f"default {DEFAULT_SIM_REQUESTS} for a prediction, 1000 per candidate verified by "
                                 "a recommendation")
    seed: int = Field(default=0, ge=0, le=2**32 - 1, description="random seed of arrivals and lengths "
                      "(the same seed gives the same answer)")


class ModelChoice(_Body):
    """Which model: a catalog id, or an inline architecture; exactly one."""

    model: str | None = Field(default=None, description="HF repo id (GET /v1/models)",
                              examples=["meta-llama/Llama-3.1-70B-Instruct"])
    model_spec: InlineModel | None = None

    @model_validator(mode="after")
    def _one_model(self) -> ModelChoice:
        if (self.model is None) == (self.model_spec is None):
            raise ValueError("give exactly one of model (a catalog id) or model_spec (an inline architecture)")
        return self


class PredictionRequest(ModelChoice):
    deployment: Deployment
    workload: Workload
    simulation: SimulationOptions = Field(default_factory=SimulationOptions)

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "model": "meta-llama/Llama-3.1-70B-Instruct",
        "deployment": {"gpu": "h100-sxm", "gpu_count": 4, "tp": 4, "pp": 1, "replicas": 1,
                       "weight_dtype": "fp8", "kv_dtype": "fp8", "engine": "trtllm"},
        "workload": {"input_tokens": 2048, "output_tokens": 128, "concurrency": 64},
    }]})


class LatencyStats(BaseModel):
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float


class Simulated(BaseModel):
    """What the simulation of one replica's scheduler found (the source of the percentile fields)."""

    requests: int = Field(description="requests measured")
    warmup_requests: int = Field(description="requests simulated before measuring (dropped)")
    seed: int
    load_per_replica: str = Field(description="the load one replica was simulated at")
    ttft_ms: LatencyStats
    tpot_ms: LatencyStats | None = Field(description="per request: (E2E - TTFT) / (output tokens - 1); null when "
                                         "every output is one token")
    itl_ms: LatencyStats | None = Field(description="every gap between consecutive tokens (token-weighted); null "
                                        "when every output is one token")
    e2e_ms: LatencyStats
    queue_ms: LatencyStats = Field(description="waiting for admission (a free slot, KV cache, token budget)")
    replica_output_tok_s: float = Field(description="generated tokens/s of one replica over the measured window")
    replica_requests_per_s: float
    batch_per_replica: float = Field(description="sequences decoding, time-averaged")
    preemptions: int = Field(description="requests evicted from the KV cache and recomputed")
    saturated: bool = Field(description="completions fell short of the offered rate: the queue grew all run "
                            "(percentiles then grow with the number of requests simulated)")
    clipped_requests: int = Field(description="measured requests whose sampled lengths were cut to max_model_len")
    scheduler: str = Field(description="the admission and batching policy simulated")


class Predicted(BaseModel):
    ttft_ms: float = Field(description="mean time to first token")
    ttft_p50_ms: float
    ttft_p90_ms: float
    ttft_p95_ms: float
    ttft_p99_ms: float
    tpot_ms: float = Field(description="mean time per output token after the first")
    tpot_p50_ms: float
    tpot_p90_ms: float
    tpot_p95_ms: float
    tpot_p99_ms: float
    e2e_ms: float = Field(description="mean request latency")
    e2e_p95_ms: float
    output_tok_s: float = Field(description="generated tokens/s, whole deployment")
    total_tok_s: float = Field(description="prompt + generated tokens/s, whole deployment")
    requests_per_s: float
    max_concurrency: int = Field(description="sequences of max_context_tokens the deployment holds at once")
    batch_per_replica: float = Field(description="sequences decoding together in steady state, per replica")
    prefill_ms: float = Field(description="one prompt alone on an idle replica")
    compute_bound_share: float = Field(description="share of the decode step spent on compute (vs memory)")
    percentile_method: str
    simulation: Simulated | None = Field(default=None, description="the scheduler simulation the percentiles "
                                         "come from (null when disabled)")


class MemoryPerGpu(BaseModel):
    weights: float
    kv_cache: float
    activations: float
    overhead: float
    total: float
    capacity: float
    kv_bytes_per_token: float = Field(description="KV bytes one token of context takes on each GPU")
    kv_capacity_tokens: int = Field(description="tokens the KV pool of one replica holds")


class Confidence(BaseModel):
    error_pct: float | None = Field(description="median absolute % error of the segment used (held-out where known)")
    error_kind: str
    basis: str
    segment: str
    measurements: int
    calibration_version: int | None
    overheads_segment: str | None = Field(
        default=None, description="the segment whose software overheads (per request, per step, all-reduce latency) "
        "the prediction uses: <engine>/<dense|moe|mla> where latency measurements of several architectures support "
        "one, else the GPU segment (which inherits them from the engine)")
    latency_measurements: int | None = Field(
        default=None, description="TTFT/TPOT measurements behind those overheads (None: a calibration fitted before "
        "they were counted)")
    latency_architectures: int | None = Field(default=None, description="model architectures among them")


class ResolvedSettings(BaseModel):
    engine_version: str
    max_num_seqs: int
    max_num_batched_tokens: int
    memory_fraction: float
    memory_fraction_flag: str
    max_model_len: int
    defaults_source: str


class Cost(BaseModel):
    usd_per_hour: float | None
    usd_per_million_output_tokens: float | None
    price_source: str | None


class Launch(BaseModel):
    """What an operator runs: the command for the engine version, and what must run before it."""

    command: str | None = None
    container: str | None = None
    args: list[str] = Field(default_factory=list, description="argv after the executable (for a k8s manifest)")
    files: dict[str, str] = Field(default_factory=dict)
    steps: list[dict[str, str]] = Field(default_factory=list, description="what to run first (quantisation)")
    replicas: dict[str, Any] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    error: str | None = Field(default=None, description="why no command could be rendered")


class PredictionResponse(BaseModel):
    fits: bool
    model: str
    predicted: Predicted | None
    memory_per_gpu_gb: MemoryPerGpu
    cost: Cost
    settings: ResolvedSettings
    confidence: Confidence
    launch: Launch | None = Field(default=None, description="the command that starts this deployment "
                                  "(null when it does not fit)")
    notes: list[str]
