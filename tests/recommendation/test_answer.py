"""POST /v1/recommendations answers with its own search's deployments predicted by the same function as
POST /v1/predictions: every figure, the memory, cost, confidence and launch of a recommendation are what the
prediction endpoint returns for its deployment."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.schemas.recommendations import RECOMMENDATION_SIM_REQUESTS

BODIES: list[dict[str, Any]] = [
    {"model": "meta-llama/Llama-3.1-8B-Instruct",
     "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 50},
     "sla": {"ttft_ms": 500, "tpot_ms": 50, "percentile": "p95"},
     "constraints": {"gpus": ["l4", "a100-80gb-sxm", "h100-sxm"], "max_gpus": 8}, "top_k": 3},
    {"model": "meta-llama/Llama-3.1-8B-Instruct", "scenario": "batch",
     "workload": {"input_tokens": 512, "output_tokens": 512, "offline": True, "num_requests": 20000},
     "constraints": {"gpus": ["l4", "h100-sxm"], "max_gpus": 8}, "top_k": 2},
]


@pytest.mark.parametrize("body", BODIES)
def test_each_recommendation_is_its_deployments_prediction(client: TestClient, body: dict[str, Any]) -> None:
    r = client.post("/v1/recommendations", json=body)
    assert r.status_code == 200, r.text
    recs = r.json()["recommendations"]
    assert recs
    for rec in recs:
        p = client.post("/v1/predictions", json={"model": body["model"], "deployment": rec["deployment"],
                                                 "workload": body["workload"],
                                                 "simulation": {"requests": RECOMMENDATION_SIM_REQUESTS}})
        assert p.status_code == 200, p.text
        pred = p.json()
        for key in ("predicted", "memory_per_gpu_gb", "cost", "confidence", "launch"):
            assert rec[key] == pred[key], key


def test_an_unknown_model_names_the_nearest_known(client: TestClient) -> None:
    r = client.post("/v1/recommendations", json={**BODIES[0], "model": "meta-llama/Llama-3.1-8B-Instruc"})
    assert r.status_code == 422
    err = r.json()
    assert err["field"] == ["model"] and "meta-llama/Llama-3.1-8B-Instruct" in err["valid"]
