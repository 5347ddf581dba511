"""Batch jobs through HTTP: num_requests up to 1e12, sla.deadline_hours, the job's wall time and cost, and
the smallest deployment that meets the deadline."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.recommendation.batch_jobs import estimate
from service.schemas.predictions import Workload

S_PER_HOUR = 3600


def batch(num_requests: int, deadline_hours: float | None = None, **constraints: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "meta-llama/Llama-3.1-8B-Instruct", "scenario": "batch",
                            "workload": {"input_tokens": 1024, "output_tokens": 256, "offline": True,
                                         "num_requests": num_requests}}
    if deadline_hours is not None:
        body["sla"] = {"deadline_hours": deadline_hours}
    if constraints:
        body["constraints"] = constraints
    return body


def recommend(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    r = client.post("/v1/recommendations", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def test_job_time_and_cost_of_each_recommendation(client: TestClient) -> None:
    ans = recommend(client, batch(10**10))
    job = ans["batch_job"]
    assert job["num_requests"] == 10**10 and job["output_tokens_total"] == 256 * 10**10
    assert job["deadline_hours"] is None and job["min_output_tok_s"] is None and job["smallest"] is None
    for r in ans["recommendations"]:
        hours = 256 * 10**10 / r["predicted"]["output_tok_s"] / S_PER_HOUR
        assert r["job"]["hours"] == pytest.approx(hours, rel=1e-6)
        assert r["job"]["usd"] == pytest.approx(hours * r["cost"]["usd_per_hour"], abs=0.01)
        assert r["job"]["meets_deadline"] is None


def test_no_job_without_num_requests(client: TestClient) -> None:
    body = batch(1)
    del body["workload"]["num_requests"]
    ans = recommend(client, body)
    assert ans["batch_job"] is None and all(r["job"] is None for r in ans["recommendations"])


def test_num_requests_bounds(client: TestClient) -> None:
    r = client.post("/v1/recommendations", json=batch(10**12 + 1))
    assert r.status_code == 422 and r.json()["field"] == ["workload", "num_requests"]
    pred = client.post("/v1/predictions", json={
        "model": "meta-llama/Llama-3.1-8B-Instruct", "deployment": {"gpu": "h100-sxm", "weight_dtype": "fp8"},
        "workload": {"input_tokens": 1024, "output_tokens": 256, "offline": True, "num_requests": 10**10}})
    assert pred.status_code == 200, pred.text


def test_deadline_needs_the_job_size(client: TestClient) -> None:
    body = batch(1, deadline_hours=8)
    del body["workload"]["num_requests"]
    r = client.post("/v1/recommendations", json=body)
    assert r.status_code == 422 and r.json()["field"] == ["sla", "deadline_hours"]
    assert "num_requests" in r.json()["detail"]


def test_deadline_is_a_throughput_floor_every_recommendation_meets(client: TestClient) -> None:
    ans = recommend(client, batch(10**7, deadline_hours=24))
    floor = 256 * 10**7 / (24 * S_PER_HOUR)
    assert ans["batch_job"]["min_output_tok_s"] == pytest.approx(floor, rel=1e-6)
    assert ans["applied"]["sla"]["min_output_tok_s"] == pytest.approx(floor)
    assert ans["recommendations"]
    for r in ans["recommendations"]:
        assert r["predicted"]["output_tok_s"] >= floor
        assert r["job"]["hours"] <= 24 and r["job"]["meets_deadline"] is True
    smallest = ans["batch_job"]["smallest"]
    assert smallest["gpu_count"] <= min(r["deployment"]["gpu_count"] for r in ans["recommendations"])
    assert smallest["job"]["meets_deadline"] is True and smallest["output_tok_s"] >= floor


def test_a_given_floor_above_the_deadlines_is_kept(client: TestClient) -> None:
    body = batch(10**7, deadline_hours=24)
    body["sla"]["min_output_tok_s"] = 50_000
    ans = recommend(client, body)
    assert ans["applied"]["sla"]["min_output_tok_s"] == 50_000
    assert all(r["predicted"]["output_tok_s"] >= 50_000 for r in ans["recommendations"])


def test_smallest_is_the_fewest_gpus_that_meet_the_deadline(client: TestClient) -> None:
    # 1e8 requests x 256 tokens in 24 h: ~296,000 output tok/s, more than one GPU of the catalog gives
    ans = recommend(client, batch(10**8, deadline_hours=24))
    smallest = ans["batch_job"]["smallest"]
    n = smallest["gpu_count"]
    assert n > 1 and smallest["deployment"]["gpu_count"] == n and smallest["job"]["hours"] <= 24
    # one GPU fewer cannot: the search finds nothing, and says which deadline it could meet
    fewer = recommend(client, batch(10**8, deadline_hours=24, max_gpus=n - 1))
    assert fewer["feasible"] is False
    relax = {x["kind"]: x for x in fewer["explanation"]["relaxations"]}
    assert relax["deadline_hours"]["value"] > 24
    assert relax["deadline_hours"]["value"] == pytest.approx(
        256 * 10**8 / relax["min_output_tok_s"]["value"] / S_PER_HOUR, rel=1e-3)
    # a later deadline needs no more GPUs
    later = recommend(client, batch(10**8, deadline_hours=72))["batch_job"]["smallest"]
    assert later["gpu_count"] <= n


def test_estimate_by_hand() -> None:
    wl = Workload(input_tokens=10, output_tokens=360, offline=True, num_requests=1000)
    # 360,000 tokens at 100 tok/s: 3600 s = 1 h; at 2.5 USD/h: 2.5 USD
    job = estimate(wl, output_tok_s=100.0, usd_per_hour=2.5, deadline_hours=0.5)
    assert job.hours == 1.0 and job.usd == 2.5 and job.meets_deadline is False
    assert estimate(wl, 100.0, None, 1.0).usd is None and estimate(wl, 100.0, None, 1.0).meets_deadline is True
    # a vanishing throughput (a request rate of 5e-324/s): no finite time, never within a deadline
    never = estimate(wl, 5e-324, 2.5, 24.0)
    assert never.hours is None and never.usd is None and never.meets_deadline is False
