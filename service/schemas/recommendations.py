"""Request and response bodies of POST /v1/recommendations (SPEC.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.schemas.predictions import (
    DEFAULT_SIM_REQUESTS,
    Confidence,
    Cost,
    Deployment,
    Launch,
    MemoryPerGpu,
    ModelChoice,
    Predicted,
    SimulationOptions,
    Workload,
)

MAX_TOP_K = 50
# Requests simulated per verified candidate by default: a prediction's (so that each recommendation's figures
# are what POST /v1/predictions gives for it)
RECOMMENDATION_SIM_REQUESTS = DEFAULT_SIM_REQUESTS
MAX_LIST = 64
# Default and largest number of GPUs a search may use (8 nodes of 8): a bound on the work of one request.
DEFAULT_MAX_GPUS = 64
MAX_GPUS = 512

# Longest job deadline accepted, hours (a year): a bound on input, not a model figure.
MAX_DEADLINE_HOURS = 8760.0

Percentile = Literal["mean", "p50", "p90", "p95", "p99"]
Objective = Literal["min_cost", "max_throughput", "min_latency", "balanced"]
Scenario = Literal["chat", "batch", "api"]
QualityLoss = Literal["lossless", "near-lossless", "noticeable"]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Sla(_Body):
    """Latency and throughput bounds; each left out is not constrained (a scenario may fill it)."""

    ttft_ms: float | None = Field(default=None, gt=0, le=3_600_000, description="time to first token, ms")
    tpot_ms: float | None = Field(default=None, gt=0, le=600_000, description="time per output token, ms")
    e2e_ms: float | None = Field(default=None, gt=0, le=86_400_000, description="request latency, ms")
    min_output_tok_s: float | None = Field(default=None, gt=0, le=1e9,
                                           description="generated tokens/s of the whole deployment, at least")
    percentile: Percentile | None = Field(default=None, description="which statistic the latency bounds apply "
                                          "to (default p95 with a scenario, else mean)")
    deadline_hours: float | None = Field(
        default=None, gt=0, le=MAX_DEADLINE_HOURS,
        description="a batch job (workload.num_requests) must finish within this many hours: the deployment's "
        "output tok/s must reach num_requests x output_tokens / (deadline_hours x 3600)")


# the levers a search uses when the request does not say (docs/API.md)
DEFAULT_LEVERS: tuple[str, ...] = ("prefix_cache",)


class Constraints(_Body):
    gpus: list[str] | None = Field(default=None, max_length=MAX_LIST, description="GPU ids allowed (default all)")
    max_gpus: int | None = Field(default=None, ge=1, le=MAX_GPUS,
                                 description=f"GPUs in the whole deployment, at most (default {DEFAULT_MAX_GPUS})")
    engines: list[Literal["vllm", "trtllm"]] | None = Field(
        default=None, max_length=2, description="engines allowed (default both)")
    weight_dtypes: list[str] | None = Field(
        default=None, max_length=MAX_LIST,
        description="weight dtype ids allowed (default all the GPU and engine run; GET /v1/quantizations)")
    kv_dtypes: list[str] | None = Field(
        default=None, max_length=MAX_LIST, description="KV-cache dtype ids allowed (default all)")
    max_usd_per_hour: float | None = Field(
        default=None, gt=0, le=1e7, description="price of the whole deployment, USD per hour, at most")
    max_quality_loss: QualityLoss | None = Field(
        default=None, description="the most quality a quantisation may give up: lossless (16-bit only), "
        "near-lossless (FP8, INT8, NVFP4...), noticeable (INT4 too); default noticeable, chat: near-lossless")
    multi_node: bool = Field(default=False, description="allow pipeline stages across nodes")
    engine_versions: dict[str, str] | None = Field(default=None, description="engine -> version (default newest)")
    levers: list[Literal["speculative", "cpu_offload", "prefix_cache", "kv_offload"]] | None = Field(
        default=None, max_length=4, exclude_if=lambda v: v is None,
        description=f"levers the search may use (default {list(DEFAULT_LEVERS)}: prefix caching is on by default in "
        "both engines and acts only on workload.prefix_cache_hit_rate; kv_offload, a host-memory KV tier, acts "
        "only with workload.prefix_working_set_tokens beyond the GPU's free KV blocks); a relaxation may name one "
        "not allowed, with its effect")

    @property
    def allowed_levers(self) -> tuple[str, ...]:
        return tuple(self.levers) if self.levers is not None else DEFAULT_LEVERS


class RecommendationRequest(ModelChoice):
    """A model, its traffic and its SLA: which deployments meet it, ranked.

    Scenarios fill what the request leaves out:

    - ``chat`` (interactive chat or copilot): TTFT <= 200 ms and TPOT <= 50 ms at p95, at most
      near-lossless quantisation, ranked by latency within constraints.max_usd_per_hour (min_latency), or
      without a budget by hourly cost within the SLA (min_cost);
    - ``batch`` (overnight jobs): no latency SLA, any quantisation, ranked by USD per million output tokens
      (throughput per dollar) whatever the workload's mode;
    - ``api`` (high-concurrency API): TTFT <= 1000 ms and TPOT <= 100 ms at p95, any quantisation,
      objective min_cost.
    """

    workload: Workload = Field(description="the traffic to serve")
    sla: Sla = Field(default_factory=Sla, description="latency and throughput bounds (each optional)")
    constraints: Constraints = Field(
        default_factory=Constraints, description="which GPUs, engines, dtypes and budget the search may use")
    objective: Objective | None = Field(default=None, description="default min_cost, or the scenario's "
                                         "(ranked_by in the answer says which ranked it)")
    scenario: Scenario | None = Field(
        default=None,
        description="chat, batch or api: fills the SLA, quantisation limit and objective the request leaves out")
    top_k: int = Field(default=5, ge=1, le=MAX_TOP_K, description="recommendations listed, at most (one per layout)")
    simulation: SimulationOptions = Field(
        default_factory=SimulationOptions,
        description="the scheduler simulation that predicts (and so verifies) each candidate before it is "
        f"recommended (default {RECOMMENDATION_SIM_REQUESTS} requests each, as POST /v1/predictions): a "
        "recommendation's figures are what POST /v1/predictions returns for its deployment and workload")

    @property
    def simulation_options(self) -> SimulationOptions:
        """The simulation each verified candidate gets (the request's, with this endpoint's default count)."""
        return self.simulation.model_copy(update={"requests": self.simulation.requests or RECOMMENDATION_SIM_REQUESTS})

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 50, "max_context_tokens": 32768},
        "sla": {"ttft_ms": 200, "tpot_ms": 50, "percentile": "p95"},
        "constraints": {"gpus": ["a10", "l4", "a100-80gb-sxm", "h100-sxm"], "max_gpus": 8,
                        "engines": ["vllm", "trtllm"]},
        "objective": "min_cost", "top_k": 5,
    }]})


class JobEstimate(BaseModel):
    """A batch job (workload.num_requests) run on one deployment at its predicted throughput."""

    hours: float | None = Field(description="wall time, hours: num_requests x output_tokens / output_tok_s / 3600 "
                                "(null: beyond any float, at a vanishing throughput)")
    usd: float | None = Field(description="cost, USD: hours x usd_per_hour (null without a public price)")
    meets_deadline: bool | None = Field(description="hours <= sla.deadline_hours (null without a deadline)")


class Recommendation(BaseModel):
    rank: int = Field(description="1 = best by the objective")
    deployment: Deployment = Field(description="what to deploy: GPU, count, layout, dtypes, engine and its settings")
    predicted: Predicted = Field(
        description="latency and throughput, as POST /v1/predictions gives for this deployment")
    memory_per_gpu_gb: MemoryPerGpu = Field(description="memory on each GPU, GB (1e9 bytes)")
    cost: Cost = Field(description="what the deployment costs")
    binding_constraint: str | None = Field(description="the SLA bound with the least headroom")
    headroom: dict[str, float] = Field(description="per bound, the share to spare: 1 - predicted / limit for "
                                       "latencies, 1 - limit / predicted for throughput (0.3 = 30% to spare)")
    quality: str = Field(description="what the weight and KV dtypes give up")
    confidence: Confidence = Field(
        description="how far to trust the figures: the calibration segment used and its measured error")
    launch: Launch = Field(description="the command and files that start it")
    why: str = Field(description="why it ranks here, in words")
    job: JobEstimate | None = Field(default=None, description="the batch job on this deployment (with "
                                    "workload.num_requests)")


class ParetoPoint(BaseModel):
    usd_per_hour: float | None = Field(description="price of the deployment, USD per hour (null: no catalog price)")
    ttft_ms: float = Field(description="time to first token at the SLA's percentile, ms: what POST "
                           "/v1/predictions predicts for `deployment_spec`")
    tpot_ms: float = Field(description="time per output token at the SLA's percentile, ms: what POST "
                           "/v1/predictions predicts for `deployment_spec`")
    output_tok_s: float = Field(description="generated tokens/s, whole deployment: what POST /v1/predictions "
                                "predicts for `deployment_spec`")
    deployment: str = Field(description="the deployment, in short (replicas x layout, GPU, dtypes, engine)")
    deployment_spec: Deployment | None = Field(
        default=None, description="the deployment itself, with its engine arguments (null in answers stored "
        "before it was given)")
    rank: int | None = Field(description="rank among the recommendations, if listed there")


class SearchStats(BaseModel):
    candidates: int = Field(description="deployments generated (every allowed combination)")
    scored: int = Field(description="scored by the cost model: memory and latency floors (the rest cannot hold "
                        "the weights at any engine setting, an exact bound)")
    solved: int = Field(description="of those, the ones whose serving steady state was solved: the others' "
                        "latency floors (one request alone) already break the SLA")
    feasible: int = Field(description="candidates meeting every constraint (each decided exactly: replica "
                          "counts by a binary search over a monotone verdict, the rest scored)")
    unverified: int = Field(default=0, description="candidates meeting every bound in the analytic model that "
                            "were not predicted (verification predicts the analytic ranking's best in turn, at most "
                            "top_k + 10) and whose bounds do not rule out a place among the recommendations: the "
                            "hourly cost is exact and no latency is below its one-request floors; cost per token, "
                            "throughput and the balanced score have no bound, so for them every one not predicted "
                            "counts")
    elapsed_ms: float = Field(description="time the search took, ms")


class Violation(BaseModel):
    constraint: str = Field(
        description="the SLA bound or constraint broken (ttft_ms, tpot_ms, memory, max_usd_per_hour, ...)")
    limit: float | None = Field(description="its limit, in the constraint's unit")
    predicted: float | None = Field(description="the candidate's predicted value, same unit")
    over_by_pct: float | None = Field(description="how far over the limit, % of the limit")


class Closest(BaseModel):
    deployment: Deployment = Field(description="a candidate that nearly meets the requirement")
    violations: list[Violation] = Field(description="each bound it breaks, and by how much")
    predicted: dict[str, float | None] = Field(
        description="its predicted figures, by field name (ms, tokens/s, USD per hour)")


class Relaxation(BaseModel):
    kind: str = Field(description="ttft_ms | tpot_ms | e2e_ms | min_output_tok_s | concurrency | request_rate | "
                      "max_usd_per_hour | max_gpus | weight_dtypes | gpus | deadline_hours | cpu_offload | "
                      "speculative | kv_offload (the last three: a lever constraints.levers did not allow)")
    value: Any = Field(
        description="the relaxed value that makes a candidate feasible (a number in the kind's unit, or ids)")
    detail: str = Field(description="the relaxation in words")
    deployment: Deployment | None = Field(
        default=None, description="the deployment the value was found with; its figures are what POST "
        "/v1/predictions returns for it (with the relaxed workload for a concurrency or request_rate relaxation)")


class Explanation(BaseModel):
    summary: str = Field(description="why nothing fits, in one sentence")
    ruled_out_by: dict[str, int] = Field(description="candidates failing each constraint (one may fail several), "
                                         "over each layout and engine setting at its fewest and its most replicas; "
                                         "memory also counts the layouts whose weights alone overflow")
    main_obstacle: str = Field(description="the constraint that rules out the most candidates")
    closest: list[Closest] = Field(description="the candidates nearest to feasible, with what each violates")
    relaxations: list[Relaxation] = Field(description="changes to the request that would make something feasible")


class Links(BaseModel):
    self: str = Field(description="this answer again: GET it")
    pareto_svg: str = Field(description="this answer's Pareto front as an SVG picture: GET it "
                            "(?cost=usd_per_million_output_tokens for cost per token)")

    @classmethod
    def of(cls, rec_id: str) -> Links:
        return cls(self=f"/v1/recommendations/{rec_id}", pareto_svg=f"/v1/recommendations/{rec_id}/pareto.svg")


class SmallestDeployment(BaseModel):
    rank: int | None = Field(description="its rank among the recommendations, if listed there")
    gpu_count: int = Field(description="GPUs of the whole deployment")
    deployment: Deployment = Field(description="what to deploy, as in a recommendation")
    output_tok_s: float = Field(description="predicted generated tokens/s, whole deployment")
    usd_per_hour: float | None = Field(description="its price, USD per hour (null without a public price)")
    job: JobEstimate = Field(description="the job's wall time and cost on it")


class BatchJob(BaseModel):
    """The job the workload states (workload.num_requests) and what its deadline asks."""

    num_requests: int = Field(description="requests in the job (workload.num_requests)")
    output_tokens_total: int = Field(description="num_requests x output_tokens")
    deadline_hours: float | None = Field(description="sla.deadline_hours, hours (null without a deadline)")
    min_output_tok_s: float | None = Field(description="the throughput the deadline needs, generated tokens/s: "
                                           "output_tokens_total / (deadline_hours x 3600); the search's "
                                           "min_output_tok_s bound is at least this")
    smallest: SmallestDeployment | None = Field(
        description="of the deployments the search found to meet every bound (the deadline among them), one "
        "with the fewest GPUs (the objective breaks ties); null without a deadline or when none meets it")


class RecommendationResponse(BaseModel):
    id: str = Field(description="GET /v1/recommendations/{id} returns this answer again")
    feasible: bool = Field(description="false when no candidate meets the requirement (then see explanation)")
    model: str = Field(description="the model as the request named it")
    resolved_model: str | None = Field(
        default=None, description="the catalog model whose architecture answered for `model` (e.g. "
        "meta-llama/Llama-2-7b-chat-hf for meta-llama/Llama-2-7b-hf, which shares it); the inline name for a "
        "model_spec")
    recommendations: list[Recommendation] = Field(description="the best deployments, best first")
    pareto: list[ParetoPoint] = Field(
        description="deployments no other beats on cost, TTFT, TPOT and throughput at once")
    search: SearchStats = Field(description="how many candidates were generated, scored and feasible")
    applied: dict[str, Any] = Field(description="the SLA, constraints and objective after scenario defaults")
    percentile_method: str = Field(
        description="how the figures were computed (the search's analytic floors and front, the simulated "
        "prediction of each recommendation)")
    ranked_by: str | None = Field(default=None, description="the objective that ordered the recommendations, and "
                                  "the figure it ranks on (a scenario's own when the request names none)")
    explanation: Explanation | None = Field(
        default=None, description="when nothing fits: what rules the candidates out and what to relax")
    calibration_version: int | None = Field(description="the calibration version used (GET /v1/calibration/{version})")
    notes: list[str] = Field(default_factory=list, description="assumptions and warnings, in words")
    batch_job: BatchJob | None = Field(default=None, description="with workload.num_requests: the job, its "
                                       "deadline's throughput and the smallest deployment that meets it")
    links: Links | None = Field(default=None, description="related resources, paths relative to the service")
