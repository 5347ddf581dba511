"""The neighbouring replica counts the answer tries: within the grid, max_gpus, the budget and the clients."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.prediction.advisor import Advisor
from service.recommendation.offer import FEWER_REPLICAS_TRIED, MORE_REPLICAS_TRIED, fewer_replicas, more_replicas
from service.recommendation.scenarios import apply_scenario
from service.recommendation.space import REPLICA_GRID
from service.schemas.predictions import Deployment
from service.schemas.recommendations import RecommendationRequest

DEP = Deployment(gpu="h100-sxm", tp=2, gpu_count=8, replicas=4, weight_dtype="fp8", kv_dtype="fp8", engine="vllm")


@pytest.fixture(scope="module")
def advisor(client: TestClient) -> Advisor:
    adv = client.app.state.app_state.current().advisor  # type: ignore[attr-defined]
    assert isinstance(adv, Advisor)
    return adv


def request(**body: Any) -> RecommendationRequest:
    return RecommendationRequest.model_validate({"model": "meta-llama/Llama-3.1-8B-Instruct", "workload": {
        "input_tokens": 1024, "output_tokens": 256, "concurrency": 40}, **body})


def test_more_replicas_stay_within_max_gpus_the_clients_and_the_budget(advisor: Advisor) -> None:
    price = advisor.gpus["h100-sxm"].price_usd_per_gpu_hour
    assert price
    for body in ({"constraints": {"max_gpus": 24}}, {"constraints": {"max_usd_per_hour": price * 2 * 10.5}}, {}):
        req = request(**body)
        ap = apply_scenario(req)
        out = more_replicas(advisor, DEP, ap, req.workload, miss=3.0)
        assert 0 < len(out) <= MORE_REPLICAS_TRIED
        for d in out:
            assert d.replicas in REPLICA_GRID and d.replicas > DEP.replicas
            assert d.gpu_count == d.replicas * DEP.tp <= int(ap.constraints.max_gpus or 0)
            assert d.replicas <= 40
            if ap.constraints.max_usd_per_hour is not None:
                assert price * d.gpu_count <= ap.constraints.max_usd_per_hour
        assert out[0].replicas >= 3 * DEP.replicas or out[-1].replicas == out[0].replicas


def test_fewer_replicas_keep_the_share_the_latencies_use() -> None:
    assert fewer_replicas(DEP, None) == []
    out = fewer_replicas(DEP, 0.5)
    assert len(out) == FEWER_REPLICAS_TRIED and out[0].replicas == 2 and out[0].gpu_count == 4
    assert fewer_replicas(DEP, 0.99) == []
