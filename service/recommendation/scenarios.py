"""A recommendation request's bounds: the scenario presets (chat, api, batch) merged with what the request
states, the objective it ranks by, and that objective in words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.recommendation import batch_jobs
from service.schemas.recommendations import DEFAULT_MAX_GPUS, Constraints, RecommendationRequest, Sla

# Scenario presets: the three cases the service is for, with their bounds (chat: TTFT <= 200 ms
# p95, TPOT <= 50 ms, no aggressive quantisation, the fastest first; api: TTFT within about a second, TPOT
# <= 100 ms; batch: no latency SLA, cost per token first). Latency bounds in ms at the stated percentile.
SCENARIOS: dict[str, dict[str, Any]] = {
    "chat": {"sla": {"ttft_ms": 200.0, "tpot_ms": 50.0, "percentile": "p95"},
             "max_quality_loss": "near-lossless", "objective": "min_latency"},
    "batch": {"sla": {"percentile": "mean"}, "max_quality_loss": "noticeable", "objective": "min_cost_per_token"},
    "api": {"sla": {"ttft_ms": 1000.0, "tpot_ms": 100.0, "percentile": "p95"},
            "max_quality_loss": "noticeable", "objective": "min_cost"},
}
QUALITY_RANK = {"lossless": 0, "near-lossless": 1, "noticeable": 2}
SLA_METRICS = ("ttft_ms", "tpot_ms", "e2e_ms")


@dataclass
class Applied:
    """The bounds a request is searched with: its SLA and constraints over the scenario's presets."""

    sla: Sla
    constraints: Constraints
    objective: str
    percentile: str
    max_quality: str



def apply_scenario(req: RecommendationRequest) -> Applied:
    preset = SCENARIOS.get(req.scenario or "", {})
    sla_given = req.sla.model_dump(exclude_none=True)
    sla = Sla(**{**preset.get("sla", {}), **sla_given})
    percentile = sla.percentile or ("p95" if req.scenario else "mean")
    sla = batch_jobs.with_deadline(sla.model_copy(update={"percentile": percentile}), req.workload)
    cons = req.constraints
    max_quality = cons.max_quality_loss or preset.get("max_quality_loss") or "noticeable"
    cons = cons.model_copy(update={"max_quality_loss": max_quality,
                                   "max_gpus": cons.max_gpus or DEFAULT_MAX_GPUS})
    return Applied(sla=sla, constraints=cons, objective=req.objective or scenario_objective(req.scenario),
                   percentile=percentile, max_quality=max_quality)


def scenario_objective(scenario: str | None) -> str:
    """What a scenario ranks by when the request names no objective: batch the cost per output token; api the
    hourly cost at its SLA; chat the latency, within constraints.max_usd_per_hour when given (without it, within
    constraints.max_gpus: the fastest may be the largest)."""
    return str(SCENARIOS.get(scenario or "", {}).get("objective") or "min_cost")


RANKED_BY = {
    "min_cost": "min_cost: USD per hour, then USD per million output tokens",
    "min_cost_offline": "min_cost: USD per million output tokens (an offline job pays for its tokens), then USD per "
                        "hour",
    "min_cost_per_token": "min_cost_per_token: USD per million output tokens (throughput per dollar), then USD per "
                          "hour",
    "max_throughput": "max_throughput: output tokens per second, then USD per hour",
    "min_latency": "min_latency: predicted end-to-end latency at the SLA's percentile, then TTFT, then USD per hour",
    "balanced": "balanced: USD per million output tokens and predicted end-to-end latency at the SLA's percentile, "
                "each relative to the best",
}


def ranked_by(objective: str, offline: bool, scenario: str | None, budget: float | None = None) -> str:
    """What ordered the recommendations (``rank_keys``), in words, within the SLA and constraints (``budget``:
    constraints.max_usd_per_hour)."""
    text = RANKED_BY["min_cost_offline" if objective == "min_cost" and offline else objective]
    if scenario == "chat" and objective == "min_latency":
        text += (" (the chat scenario's objective: the fastest within its latency SLA and "
                 + ("constraints.max_usd_per_hour)" if budget is not None else
                    "constraints.max_gpus; give constraints.max_usd_per_hour to bound what it costs)"))
    elif scenario and SCENARIOS[scenario]["objective"] == objective:
        text += f" (the {scenario} scenario's objective)"
    return text + "; every candidate ranked meets the SLA and constraints by its prediction"
