"""A request's bounds: the scenario's presets under what the request states, and the objective it ranks by."""

from __future__ import annotations

from typing import Any

import pytest

from service.errors import InvalidRequest
from service.recommendation.scenarios import SCENARIOS, apply_scenario, ranked_by
from service.schemas.recommendations import DEFAULT_MAX_GPUS, RecommendationRequest

BASE: dict[str, Any] = {"model": "meta-llama/Llama-3.1-8B-Instruct",
                        "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 50}}


def applied(**body: Any) -> Any:
    return apply_scenario(RecommendationRequest.model_validate({**BASE, **body}))


def test_the_request_overrides_the_preset_bound_by_bound() -> None:
    ap = applied(scenario="chat", sla={"ttft_ms": 300})
    assert ap.sla.ttft_ms == 300 and ap.sla.tpot_ms == SCENARIOS["chat"]["sla"]["tpot_ms"]
    assert ap.percentile == "p95" and ap.max_quality == "near-lossless" and ap.objective == "min_latency"
    assert ap.constraints.max_gpus == DEFAULT_MAX_GPUS


def test_without_a_scenario_bounds_are_means_and_any_quantisation() -> None:
    ap = applied(sla={"ttft_ms": 300})
    assert ap.percentile == "mean" and ap.max_quality == "noticeable" and ap.objective == "min_cost"


def test_chat_ranks_by_latency_and_says_within_what() -> None:
    ap = applied(scenario="chat", constraints={"max_usd_per_hour": 10})
    assert ap.objective == "min_latency"
    assert "within its latency SLA and constraints.max_usd_per_hour)" in ranked_by(ap.objective, False, "chat", 10)
    ap = applied(scenario="chat")
    assert ap.objective == "min_latency"
    assert "constraints.max_gpus" in ranked_by(ap.objective, False, "chat", None)
    # a named objective wins over the scenario's
    assert applied(scenario="chat", objective="min_cost").objective == "min_cost"


def test_a_deadline_becomes_a_throughput_floor_and_needs_a_job_size() -> None:
    ap = applied(workload={"input_tokens": 512, "output_tokens": 500, "offline": True, "num_requests": 3600},
                 sla={"deadline_hours": 1})
    assert ap.sla.min_output_tok_s == pytest.approx(500.0)
    with pytest.raises(InvalidRequest) as err:
        applied(sla={"deadline_hours": 1})
    assert err.value.field == ["sla", "deadline_hours"]
