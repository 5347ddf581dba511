"""Re-ranking on the predicted figures: the order the objective gives, ranks renumbered and the ``why`` of each
recommendation that moved rewritten for its new rank."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from service.recommendation.verify import rerank
from service.recommendation.why import why
from service.schemas.recommendations import RecommendationResponse

BODY: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 50},
    "sla": {"ttft_ms": 500, "tpot_ms": 50, "percentile": "p95"},
    "constraints": {"gpus": ["l4", "a100-80gb-sxm", "h100-sxm"], "max_gpus": 8}, "top_k": 3,
}


def test_a_reversed_answer_is_put_back_in_order_with_its_reasons(client: TestClient) -> None:
    r = client.post("/v1/recommendations", json=BODY)
    assert r.status_code == 200, r.text
    answer = RecommendationResponse.model_validate(r.json())
    recs = answer.recommendations
    assert len(recs) >= 2
    back = list(reversed(recs))
    out, order = rerank(back, "min_cost", False, "p95")
    assert [o.deployment for o in out] == [x.deployment for x in recs]
    assert order == list(reversed(range(len(recs))))
    for rank, o in enumerate(out, start=1):
        assert o.rank == rank
        assert o.why == why("min_cost", o.deployment, o.predicted, o.cost, o.binding_constraint, o.headroom, rank)
