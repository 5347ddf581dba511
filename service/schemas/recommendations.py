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


class Constraints(_Body):
    gpus: list[str] | None = Field(default=None, max_length=MAX_LIST, description="GPU ids allowed (default all)")
    max_gpus: int | None = Field(default=None, ge=1, le=MAX_GPUS,
                                 description=f"GPUs in the whole deployment, at most (default {DEFAULT_MAX_GPUS})")
    engines: list[Literal["vllm", "trtllm"]] | None = Field(default=None, max_length=2)
    weight_dtypes: list[str] | None = Field(default=None, max_length=MAX_LIST)
    kv_dtypes: list[str] | None = Field(default=None, max_length=MAX_LIST)
    max_usd_per_hour: float | None = Field(default=None, gt=0, le=1e7)
    max_quality_loss: QualityLoss | None = Field(
        default=None, description="the most quality a quantisation may give up: lossless (16-bit only), "
        "near-lossless (FP8, INT8, NVFP4...), noticeable (INT4 too); default noticeable, chat: near-lossless")
    multi_node: bool = Field(default=False, description="allow pipeline stages across nodes")
    engine_versions: dict[str, str] | None = Field(default=None, description="engine -> version (default newest)")


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

    workload: Workload
    sla: Sla = Field(default_factory=Sla)
    constraints: Constraints = Field(default_factory=Constraints)
    objective: Objective | None = Field(default=None, description="default min_cost, or the scenario's "
                                        "(ranked_by in the answer says which ranked it)")
    scenario: Scenario | None = None
    top_k: int = Field(default=5, ge=1, le=MAX_TOP_K)
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


class Recommendation(BaseModel):
    rank: int
    deployment: Deployment
    predicted: Predicted
    memory_per_gpu_gb: MemoryPerGpu
    cost: Cost
    binding_constraint: str | None = Field(description="the SLA bound with the least headroom")
    headroom: dict[str, float] = Field(description="per bound, the share to spare: 1 - predicted / limit for "
                                       "latencies, 1 - limit / predicted for throughput (0.3 = 30% to spare)")
    quality: str = Field(description="what the weight and KV dtypes give up")
    confidence: Confidence
    launch: Launch
    why: str


class ParetoPoint(BaseModel):
    usd_per_hour: float | None
    ttft_ms: float
    tpot_ms: float
    output_tok_s: float
    deployment: str
    rank: int | None = Field(description="rank among the recommendations, if listed there")


class SearchStats(BaseModel):
    candidates: int = Field(description="deployments generated (every allowed combination)")
    scored: int = Field(description="scored by the cost model: memory and latency floors (the rest cannot hold "
                        "the weights at any engine setting, an exact bound)")
    solved: int = Field(description="of those, the ones whose serving steady state was solved: the others' "
                        "latency floors (one request alone) already break the SLA")
    feasible: int = Field(description="candidates meeting every constraint (each decided exactly: replica "
                          "counts by a binary search over a monotone verdict, the rest scored)")
    elapsed_ms: float


class Violation(BaseModel):
    constraint: str
    limit: float | None
    predicted: float | None
    over_by_pct: float | None


class Closest(BaseModel):
    deployment: Deployment
    violations: list[Violation]
    predicted: dict[str, float | None]


class Relaxation(BaseModel):
    kind: str = Field(description="ttft_ms | tpot_ms | e2e_ms | min_output_tok_s | concurrency | request_rate | "
                      "max_usd_per_hour | max_gpus | weight_dtypes | gpus")
    value: Any
    detail: str
    deployment: Deployment | None = Field(
        default=None, description="the deployment the value was found with; its figures are what POST "
        "/v1/predictions returns for it (with the relaxed workload for a concurrency or request_rate relaxation)")


class Explanation(BaseModel):
    summary: str
    ruled_out_by: dict[str, int] = Field(description="candidates failing each constraint (one may fail several), "
                                         "over each layout and engine setting at its fewest and its most replicas; "
                                         "memory also counts the layouts whose weights alone overflow")
    main_obstacle: str
    closest: list[Closest]
    relaxations: list[Relaxation]


class RecommendationResponse(BaseModel):
    id: str
    feasible: bool
    model: str
    recommendations: list[Recommendation]
    pareto: list[ParetoPoint]
    search: SearchStats
    applied: dict[str, Any] = Field(description="the SLA, constraints and objective after scenario defaults")
    percentile_method: str
    ranked_by: str | None = Field(default=None, description="the objective that ordered the recommendations, and "
                                  "the figure it ranks on (a scenario's own when the request names none)")
    explanation: Explanation | None = None
    calibration_version: int | None
    notes: list[str] = Field(default_factory=list)
