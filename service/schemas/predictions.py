"""Request and response bodies of POST /v1/predictions (SPEC.md), shared with recommendations."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.core.simulate import PREDICTION_REQUESTS

# Upper bounds that keep one request from asking for absurd work; generous for any real deployment.
MAX_TOKENS_PER_REQUEST = 10_000_000
MAX_CONCURRENCY = 1_000_000
# a bound on input, not a physical limit: 10^12 tokens of reusable prefixes is far beyond any host memory
MAX_PREFIX_WORKING_SET_TOKENS = 1_000_000_000_000
MAX_REQUEST_RATE_PER_S = 1_000_000.0
MAX_PARALLEL = 1024
# Requests in one batch job, at most: 1e12 (a trillion requests, beyond any overnight job) keeps the job's
# token total (x MAX_TOKENS_PER_REQUEST) far inside a float's exact integers.
MAX_JOB_REQUESTS = 10**12


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
# Default: service.core.simulate.PREDICTION_REQUESTS (a recommendation and a calibration anchor use it too).
DEFAULT_SIM_REQUESTS = PREDICTION_REQUESTS


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
    histogram: list[LengthBin] | None = Field(
        default=None, min_length=1, max_length=MAX_HISTOGRAM_BINS,
        description="bins of lengths with their weights; their weighted mean must be within 5% of the stated mean")

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
    num_requests: int | None = Field(
        default=None, ge=1, le=MAX_JOB_REQUESTS,
        description="requests in the job: offline, the batch job (its wall time and cost, and sla.deadline_hours, "
        "are computed from it); with concurrency, predict a benchmark run of this many requests whose clients all "
        "send their first request at once (the first wave is measured, as benchmark clients report it); left out, "
        "a concurrency workload is predicted in its steady state")
    prefix_cache_hit_rate: float = Field(default=0.0, ge=0.0, le=1.0,
                                         description="share of prompt tokens served from the prefix cache")
    prefix_working_set_tokens: int | None = Field(
        default=None, ge=1, le=MAX_PREFIX_WORKING_SET_TOKENS, exclude_if=lambda v: v is None,
        description="tokens of the reusable prefixes the hits come from: distinct prefixes x their tokens "
        "(conversations kept warm x their history, documents x their length); each replica (and attention DP "
        "rank) is assumed to see the whole set (a load balancer that does not route by prefix). With it, only the "
        "hits that the GPU's free KV blocks (or a deployment.kv_offload_gb host tier) hold are served from the "
        "cache, the rest recomputed (LRU with uniform reuse); left out, every hit is served from GPU blocks")
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
    def benchmark_run(self) -> bool:
        """A closed loop predicted as a benchmark run of ``num_requests`` requests (else its steady state)."""
        return self.concurrency is not None and self.num_requests is not None

    @property
    def first_wave_share(self) -> float:
        """Share of the measured requests sent together at the start: clients / requests of a benchmark run, none
        in a steady state (an offline job's is the batch its deployment admits at once: the cost model's)."""
        if self.benchmark_run:
            return min(float(self.concurrency or 0) / float(self.num_requests or 1), 1.0)
        return 0.0

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
    enable_chunked_prefill: bool | None = Field(
        default=None,
        description="split long prompts into chunks that share a step with decodes (default: the engine's, on for "
                    "vLLM)")
    enable_prefix_caching: bool | None = Field(
        default=None, description="reuse the KV cache of a prompt prefix seen before (default: the engine's)")


SPECULATIVE_METHODS = ("eagle3", "mtp", "ngram", "draft_model")
# Draft tokens per verify step, at most: the longest chain any quoted measurement used is 7; 16 bounds the work.
MAX_SPECULATIVE_TOKENS = 16


class Speculative(_Body):
    """Speculative decoding: a draft proposes ``num_speculative_tokens`` tokens per sequence, the model verifies
    them in one step (docs/levers.md)."""

    method: Literal["eagle3", "mtp", "ngram", "draft_model"] = Field(
        description="eagle3 (EAGLE-3 head), mtp (the model's multi-token-prediction modules), ngram (prompt lookup), "
        "draft_model (a smaller model)")
    num_speculative_tokens: int = Field(ge=1, le=MAX_SPECULATIVE_TOKENS, description="k, draft tokens per step")
    acceptance_rate: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="share of draft tokens accepted, each given the previous one was (default: the catalog's sourced "
        "figure for the method and model; ngram and draft_model have none and must state it)")
    draft_model: str | None = Field(
        default=None, description="method draft_model: catalog id of the draft model (required); method eagle3: the "
        "EAGLE-3 head's repository for the launch (default: the head the catalog's acceptance figure was measured "
        "with, for that model)")

    @model_validator(mode="after")
    def _draft(self) -> Speculative:
        if self.method == "draft_model" and self.draft_model is None:
            raise ValueError("draft_model is required with method draft_model")
        if self.method in ("mtp", "ngram") and self.draft_model is not None:
            raise ValueError(f"method {self.method} takes no draft_model")
        return self


def _unset(v: Any) -> bool:
    return v is None


class Deployment(_Body):
    gpu: str = Field(description="GPU id (GET /v1/gpus)", examples=["h100-sxm"])
    gpu_count: int | None = Field(default=None, ge=1, le=MAX_PARALLEL**2,
                                  description="tp x pp x dp x replicas (computed when left out)")
    tp: int = Field(default=1, ge=1, le=MAX_PARALLEL, description="tensor-parallel size")
    pp: int = Field(default=1, ge=1, le=MAX_PARALLEL, description="pipeline-parallel size")
    replicas: int = Field(default=1, ge=1, le=MAX_PARALLEL, description="independent copies behind a load balancer")
    dp: int = Field(default=1, ge=1, le=MAX_PARALLEL,
                    description="attention data-parallel ranks per replica, each of tp x pp GPUs with its own batch "
                    "and KV cache; a MoE model's experts are shared by the ranks (split over tp x dp GPUs)")
    ep: int | None = Field(default=None, ge=1, le=MAX_PARALLEL,
                           description="MoE expert-parallel size within a replica, dividing tp x dp (default 1: "
                           "experts split in width by tp x dp)")
    weight_dtype: str = Field(default="bf16", description="weight dtype id (GET /v1/quantizations)")
    checkpoint: str | None = Field(
        default=None, max_length=200,
        description="Hugging Face id of a published pre-quantised checkpoint of the model to serve (one listed "
        "in gpu_catalog/data/checkpoints.yaml for the model, holding weight_dtype weights); default: the model's "
        "own release, or the published checkpoint or quantisation step of weight_dtype")
    kv_dtype: str = Field(default="auto", description="KV-cache dtype id")
    engine: Literal["vllm", "trtllm"] = Field(
        default="vllm", description="serving engine: vllm or trtllm (TensorRT-LLM)")
    engine_version: str | None = Field(default=None, description="default: the newest supported release")
    engine_args: EngineArgs = Field(
        default_factory=EngineArgs,
        description="engine settings; each left out takes the engine's default for this GPU and version")
    multi_node: bool = Field(default=False, description="allow a replica to span nodes (pipeline stages across nodes)")
    speculative: Speculative | None = Field(default=None, exclude_if=_unset,
                                            description="speculative decoding (default: none)")
    cpu_offload_gb: float | None = Field(
        default=None, gt=0, le=100_000, exclude_if=_unset,
        description="weights per GPU kept in host memory and streamed over the host link every step, GB (1e9 bytes)")
    kv_offload_gb: float | None = Field(
        default=None, gt=0, le=100_000, exclude_if=_unset,
        description="host-memory KV-cache tier per GPU, GB (1e9 bytes): prefix blocks evicted from the GPU are "
        "kept there and loaded back over the host link on a hit (vLLM 0.34.0 --kv-offloading-size, rendered as "
        "the instance's total over its tp x pp ranks in GiB; TensorRT-LLM kv_cache_config.host_cache_size, per "
        "rank, bytes); gains only with workload.prefix_working_set_tokens beyond the GPU's free KV blocks")

    @model_validator(mode="after")
    def _count(self) -> Deployment:
        layout = self.tp * self.pp * self.dp * self.replicas
        if self.gpu_count is not None and self.gpu_count != layout:
            raise ValueError(f"gpu_count {self.gpu_count} != tp x pp x dp x replicas = {layout}")
        return self

    @property
    def total_gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.replicas

    @property
    def serving_units(self) -> int:
        """Schedulers serving the load side by side: each replica's attention DP ranks."""
        return self.replicas * self.dp


class InlineModel(_Body):
    """An architecture that is not in the catalog, given by its config.json fields."""

    name: str = Field(
        default="inline-model", max_length=200,
        description="a name for the answer and the launch command (an HF repo id if it has one)")
    num_layers: int = Field(ge=1, le=1024, description="transformer layers (config.json num_hidden_layers)")
    hidden_size: int = Field(ge=1, le=1_000_000, description="model width, elements (config.json hidden_size)")
    intermediate_size: int = Field(ge=1, le=10_000_000, description="MLP width, elements (of the dense layers for MoE)")
    num_attention_heads: int = Field(ge=1, le=4096, description="query heads per layer")
    num_kv_heads: int = Field(
        ge=1, le=4096, description="key/value heads per layer (num_key_value_heads; = num_attention_heads without GQA)")
    head_dim: int | None = Field(default=None, ge=1, le=4096, description="default hidden_size / heads")
    vocab_size: int = Field(ge=1, le=10_000_000, description="vocabulary, tokens")
    max_position_embeddings: int = Field(
        default=131072, ge=16, le=MAX_TOKENS_PER_REQUEST, description="context window, tokens")
    tie_word_embeddings: bool = Field(
        default=False, description="the output projection shares the input embedding's weights")
    num_experts: int | None = Field(
        default=None, ge=1, le=4096, description="MoE: routed experts per MoE layer (null for a dense model)")
    experts_per_token: int | None = Field(
        default=None, ge=1, le=4096, description="MoE: routed experts each token uses")
    num_shared_experts: int | None = Field(
        default=None, ge=0, le=64, description="MoE: experts every token uses besides the routed ones")
    moe_intermediate_size: int | None = Field(
        default=None, ge=1, le=10_000_000, description="MoE: MLP width of one expert, elements")
    mla_kv_lora_rank: int | None = Field(
        default=None, ge=1, le=65536, description="MLA (DeepSeek): rank of the compressed KV latent, elements")
    mla_qk_rope_head_dim: int | None = Field(
        default=None, ge=1, le=4096, description="MLA: rotary part of each query/key head, elements")
    mla_qk_nope_head_dim: int | None = Field(
        default=None, ge=1, le=4096, description="MLA: non-rotary part of each query/key head, elements")
    mla_v_head_dim: int | None = Field(default=None, ge=1, le=4096, description="MLA: value head size, elements")
    total_params_b: float | None = Field(default=None, gt=0, le=100_000, description="default: from the shapes")
    active_params_b: float | None = Field(
        default=None, gt=0, le=100_000,
        description="parameters used per token, billions (default: from the shapes; = total for dense)")


class SimulationOptions(_Body):
    """The scheduler simulation behind the percentile fields."""

    enabled: bool = Field(default=True, description="false: analytic percentiles only (an exponential tail on "
                          "the queueing part of the mean TTFT), no simulation")
    requests: int | None = Field(default=None, ge=MIN_SIM_REQUESTS, le=MAX_SIM_REQUESTS,
                                 description=f"requests measured (after a warm-up; the p99 rests on the slowest 1%); "
                                 f"default {DEFAULT_SIM_REQUESTS}, for a prediction and for each candidate a "
                                 "recommendation predicts")
    seed: int = Field(default=0, ge=0, le=2**32 - 1, description="random seed of arrivals and lengths "
                      "(the same seed gives the same answer)")


class ModelChoice(_Body):
    """Which model: a catalog id, or an inline architecture; exactly one."""

    model: str | None = Field(default=None, description="HF repo id (GET /v1/models)",
                              examples=["meta-llama/Llama-3.1-70B-Instruct"])
    model_spec: InlineModel | None = Field(
        default=None, description="an architecture that is not in the catalog, instead of model")

    @model_validator(mode="after")
    def _one_model(self) -> ModelChoice:
        if (self.model is None) == (self.model_spec is None):
            raise ValueError("give exactly one of model (a catalog id) or model_spec (an inline architecture)")
        return self


class PredictionRequest(ModelChoice):
    deployment: Deployment = Field(
        description="the deployment to predict: GPU, layout, dtypes, engine and its settings")
    workload: Workload = Field(description="the traffic it serves")
    simulation: SimulationOptions = Field(
        default_factory=SimulationOptions, description="the scheduler simulation behind the percentile fields")

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "model": "meta-llama/Llama-3.1-70B-Instruct",
        "deployment": {"gpu": "h100-sxm", "gpu_count": 4, "tp": 4, "pp": 1, "replicas": 1,
                       "weight_dtype": "fp8", "kv_dtype": "fp8", "engine": "trtllm"},
        "workload": {"input_tokens": 2048, "output_tokens": 128, "concurrency": 64},
    }]})


class LatencyStats(BaseModel):
    mean: float = Field(description="mean, ms")
    p50: float = Field(description="median, ms")
    p90: float = Field(description="90th percentile, ms")
    p95: float = Field(description="95th percentile, ms")
    p99: float = Field(description="99th percentile, ms")


class Simulated(BaseModel):
    """What the simulation of one replica's scheduler found (the source of the percentile fields)."""

    requests: int = Field(description="requests measured")
    warmup_requests: int = Field(description="requests simulated before measuring (dropped)")
    seed: int = Field(description="random seed of arrivals and lengths")
    load_per_replica: str = Field(description="the load one replica was simulated at")
    ttft_ms: LatencyStats = Field(description="time to first token over the measured requests, ms")
    tpot_ms: LatencyStats | None = Field(description="per request: (E2E - TTFT) / (output tokens - 1); null when "
                                         "every output is one token")
    itl_ms: LatencyStats | None = Field(description="every gap between consecutive tokens (token-weighted); null "
                                        "when every output is one token")
    e2e_ms: LatencyStats = Field(description="request latency, from its arrival to its last token, ms")
    queue_ms: LatencyStats = Field(description="waiting for admission (a free slot, KV cache, token budget)")
    replica_output_tok_s: float = Field(description="generated tokens/s of one replica over the measured window")
    replica_requests_per_s: float = Field(
        description="completed requests per second of one replica over the measured window")
    batch_per_replica: float = Field(description="sequences decoding, time-averaged")
    preemptions: int = Field(description="requests evicted from the KV cache and recomputed")
    saturated: bool = Field(description="completions fell short of the offered rate: the queue grew all run "
                            "(percentiles then grow with the number of requests simulated)")
    clipped_requests: int = Field(description="measured requests whose sampled lengths were cut to max_model_len")
    scheduler: str = Field(description="the admission and batching policy simulated")


class Predicted(BaseModel):
    ttft_ms: float = Field(description="mean time to first token")
    ttft_p50_ms: float = Field(description="median time to first token, ms")
    ttft_p90_ms: float = Field(description="90th percentile time to first token, ms")
    ttft_p95_ms: float = Field(description="95th percentile time to first token, ms")
    ttft_p99_ms: float = Field(description="99th percentile time to first token, ms")
    tpot_ms: float = Field(description="mean time per output token after the first")
    tpot_p50_ms: float = Field(description="median time per output token after the first, ms")
    tpot_p90_ms: float = Field(description="90th percentile time per output token, ms")
    tpot_p95_ms: float = Field(description="95th percentile time per output token, ms")
    tpot_p99_ms: float = Field(description="99th percentile time per output token, ms")
    e2e_ms: float = Field(description="mean request latency")
    e2e_p95_ms: float = Field(description="95th percentile request latency, ms")
    output_tok_s: float = Field(description="generated tokens/s, whole deployment")
    total_tok_s: float = Field(description="prompt + generated tokens/s, whole deployment")
    requests_per_s: float = Field(description="completed requests per second, whole deployment")
    max_concurrency: int = Field(description="sequences of max_context_tokens the deployment holds at once")
    batch_per_replica: float = Field(description="sequences decoding together in steady state, per replica")
    prefill_ms: float = Field(description="one prompt alone on an idle replica")
    compute_bound_share: float = Field(description="share of the decode step spent on compute (vs memory)")
    percentile_method: str = Field(
        description="where the percentile fields come from (simulation or analytic tail) and what they assume")
    simulation: Simulated | None = Field(default=None, description="the scheduler simulation the percentiles "
                                         "come from (null when disabled)")


class MemoryPerGpu(BaseModel):
    weights: float = Field(description="model weights on each GPU, GB (1e9 bytes)")
    kv_cache: float = Field(description="KV-cache pool on each GPU, GB")
    activations: float = Field(description="activation workspace at the token budget, GB")
    overhead: float = Field(description="CUDA context, CUDA graphs, workspaces and NCCL buffers (planning reserve), GB")
    total: float = Field(description="the sum of the above, GB")
    capacity: float = Field(description="the GPU's memory, GB (datasheet)")
    kv_bytes_per_token: float = Field(description="KV bytes one token of context takes on each GPU")
    kv_capacity_tokens: int = Field(description="tokens the KV pool of one replica holds")


class Confidence(BaseModel):
    error_pct: float | None = Field(description="median absolute % error of the segment used (held-out where known)")
    error_kind: str = Field(description="held-out (leave-one-source-out) or in-sample: how error_pct was measured")
    basis: str = Field(description="what the prediction rests on, in words")
    segment: str = Field(
        description="the calibration segment whose parameters were used (engine/gpu/dtype, engine/gpu, engine/arch, "
                    "engine or global)")
    measurements: int = Field(description="benchmark measurements that segment was fitted on")
    calibration_version: int | None = Field(description="the calibration version used (GET /v1/calibration/{version})")
    overheads_segment: str | None = Field(
        default=None, description="the segment whose software overheads (per request, per step, all-reduce latency) "
        "the prediction uses: <engine>/<dense|moe|mla> where latency measurements of several architectures support "
        "one, else the GPU segment (which inherits them from the engine)")
    latency_measurements: int | None = Field(
        default=None, description="TTFT/TPOT measurements behind those overheads (None: a calibration fitted before "
        "they were counted)")
    latency_architectures: int | None = Field(default=None, description="model architectures among them")


class ResolvedSettings(BaseModel):
    engine_version: str = Field(description="the engine release the settings and the command are for")
    max_num_seqs: int = Field(
        description="sequences batched at once (vLLM --max-num-seqs, TensorRT-LLM max_batch_size)")
    max_num_batched_tokens: int = Field(
        description="tokens per scheduler step (vLLM --max-num-batched-tokens, TensorRT-LLM max_num_tokens)")
    memory_fraction: float = Field(
        description="share of GPU memory given to the engine (vLLM) or of free memory given to the KV cache "
                    "(TensorRT-LLM), 0..1")
    memory_fraction_flag: str = Field(
        description="which engine option memory_fraction is: gpu_memory_utilization or "
                    "kv_cache_free_gpu_memory_fraction")
    max_model_len: int = Field(description="longest sequence (prompt + output) accepted, tokens")
    defaults_source: str = Field(
        description="where the engine defaults come from (catalog file of that engine version)")


class Cost(BaseModel):
    usd_per_hour: float | None = Field(
        description="price of every GPU of the deployment, USD per hour (null when the catalog has no price for the "
                    "GPU)")
    usd_per_million_output_tokens: float | None = Field(
        description="usd_per_hour over the output tokens generated in an hour, USD per 1e6 tokens")
    price_source: str | None = Field(description="the price list the hourly GPU price is quoted from")


class Launch(BaseModel):
    """What an operator runs: the command for the engine version, and what must run before it."""

    command: str | None = Field(
        default=None,
        description="the shell command that starts the engine (null when none could be rendered: see error)")
    container: str | None = Field(
        default=None, description="the same as a docker run line with the engine's release image")
    args: list[str] = Field(default_factory=list, description="argv after the executable (for a k8s manifest)")
    files: dict[str, str] = Field(
        default_factory=dict,
        description="files the command reads, by name: their content (e.g. TensorRT-LLM's extra_llm_api_options.yaml)")
    steps: list[dict[str, str]] = Field(default_factory=list, description="what to run first (quantisation)")
    replicas: dict[str, Any] = Field(
        default_factory=dict,
        description="how the replicas are run: count, mode (single, data-parallel, separate servers) and how to "
                    "balance them")
    notes: list[str] = Field(default_factory=list, description="what the operator should know about this command")
    error: str | None = Field(default=None, description="why no command could be rendered")


class PredictionResponse(BaseModel):
    fits: bool = Field(
        description="false when the deployment does not fit in memory (predicted is then null; notes say why)")
    model: str = Field(description="the model as the request named it")
    resolved_model: str | None = Field(
        default=None, description="the catalog model whose architecture answered for `model` (e.g. "
        "meta-llama/Llama-2-7b-chat-hf for meta-llama/Llama-2-7b-hf, which shares it); the inline name for a "
        "model_spec")
    predicted: Predicted | None = Field(description="latency and throughput (null when it does not fit)")
    memory_per_gpu_gb: MemoryPerGpu = Field(description="memory on each GPU, GB (1e9 bytes)")
    cost: Cost = Field(description="what the deployment costs")
    settings: ResolvedSettings = Field(description="the engine settings the prediction assumes, defaults resolved")
    confidence: Confidence = Field(
        description="how far to trust the figures: the calibration segment used and its measured error")
    launch: Launch | None = Field(default=None, description="the command that starts this deployment "
                                  "(null when it does not fit)")
    notes: list[str] = Field(description="assumptions and warnings, in words")
