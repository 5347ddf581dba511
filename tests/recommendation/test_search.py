"""The search's functions against each other on the real app's catalog and calibration: the bisection over
replica counts decides each candidate as scoring every one does; the most-replicas view finds a feasible
candidate exactly when the search does."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from service.prediction.advisor import Advisor
from service.recommendation.rank import feasible, violations
from service.recommendation.scenarios import apply_scenario
from service.recommendation.search import ends, every, most, search
from service.recommendation.space import LayoutCache
from service.schemas.recommendations import RecommendationRequest

CHAT_8B: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 50},
    "sla": {"ttft_ms": 500, "tpot_ms": 50, "percentile": "p95"},
    "constraints": {"gpus": ["a10", "l4", "a100-80gb-sxm", "h100-sxm"], "max_gpus": 8},
}
GPUS = CHAT_8B["constraints"]["gpus"]
BODIES = [CHAT_8B,
          {**CHAT_8B, "sla": {"ttft_ms": 300, "percentile": "p99"},
           "constraints": {"max_gpus": 16, "max_usd_per_hour": 20}},
          {**CHAT_8B, "sla": {"e2e_ms": 6000, "min_output_tok_s": 1500, "percentile": "p90"},
           "constraints": {"gpus": GPUS, "max_gpus": 16}},
          {**CHAT_8B, "workload": {"input_tokens": 512, "output_tokens": 128, "request_rate": 20.0},
           "sla": {"ttft_ms": 300, "tpot_ms": 30, "percentile": "p99"}},
          {**CHAT_8B, "workload": {"input_tokens": 1024, "output_tokens": 1024, "offline": True},
           "sla": {"min_output_tok_s": 5000}, "scenario": "batch"}]


@pytest.fixture(scope="module")
def advisor(client: TestClient) -> Advisor:
    adv = client.app.state.app_state.current().advisor  # type: ignore[attr-defined]
    assert isinstance(adv, Advisor)
    return adv


@pytest.mark.parametrize("body", BODIES)
def test_replica_search_agrees_with_scoring_every_candidate(advisor: Advisor, body: dict[str, Any]) -> None:
    # the binary search over replica counts must decide each candidate as exhaustive scoring does
    cache = LayoutCache()
    req = RecommendationRequest.model_validate(body)
    ap = apply_scenario(req)
    quick = search(advisor, cache, req, ap)
    full = every(advisor, cache, req, ap)
    bad = sum((v for v in violations(full, ap).values()), start=full.fits & False)
    assert quick.feasible_total == int((~bad).sum()) > 0
    assert quick.scored < full.scored


@pytest.mark.parametrize("body", [*BODIES, {**CHAT_8B, "sla": {"ttft_ms": 1, "percentile": "p95"}},
                                  {**CHAT_8B, "constraints": {"gpus": ["a10"], "max_gpus": 1,
                                                              "max_usd_per_hour": 0.5}}])
def test_most_replicas_finds_a_feasible_candidate_exactly_when_the_search_does(advisor: Advisor,
                                                                               body: dict[str, Any]) -> None:
    # more replicas only help every bound but the budget: a unit at its most replicas within the budget meets
    # the bounds when any of its replica counts does
    cache = LayoutCache()
    memo: dict[Any, Any] = {}
    req = RecommendationRequest.model_validate(body)
    ap = apply_scenario(req)
    quick = search(advisor, cache, req, ap, memo)
    at_most = most(advisor, cache, req, ap, memo)
    assert (quick.feasible_total > 0) == (len(feasible(at_most, ap)) > 0)


def test_ends_account_for_every_layout_and_setting(advisor: Advisor) -> None:
    # the account of an infeasible search scores each unit at its fewest and most replicas: every layout that
    # fits shows up, those that cannot hold the weights are counted as pruned
    req = RecommendationRequest.model_validate({**CHAT_8B, "sla": {"ttft_ms": 1, "percentile": "p95"}})
    ap = apply_scenario(req)
    s = ends(advisor, LayoutCache(), req, ap)
    assert len(s.fits) and s.fits.any()
    assert s.generated > 0 and len(feasible(s, ap)) == 0
    # every unit appears at one replica (the first option)
    assert np.isin(1.0, s.replicas)
