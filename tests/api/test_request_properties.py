"""Any well-formed requirement built from catalog ids gets an answer (200, or a 422 naming a field),
never an exception: hypothesis over the request models, through HTTP."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_catalog.loader import load_catalog

CATALOG = load_catalog()
MODELS = sorted(m.id for m in CATALOG.models)
GPUS = sorted(g.id for g in CATALOG.gpus)
WEIGHTS = sorted(d.id for d in CATALOG.weight_dtypes)
KVS = sorted(d.id for d in CATALOG.kv_dtypes)

loads = st.one_of(st.builds(lambda c: {"concurrency": c}, st.integers(1, 5000)),
                  st.builds(lambda r: {"request_rate": r}, st.floats(0.01, 5000)),
                  st.just({"offline": True}))
workloads = st.builds(lambda i, o, load: {"input_tokens": i, "output_tokens": o, **load},
                      st.integers(1, 32000), st.integers(1, 8000), loads)


def _answered(r: Any) -> None:
    assert r.status_code in (200, 422), r.text
    if r.status_code == 422:
        body = r.json()
        assert body["field"] is not None and body["detail"]


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(GPUS), wd=st.sampled_from(WEIGHTS),
       kv=st.sampled_from(KVS), tp=st.sampled_from([1, 2, 4, 8]), replicas=st.integers(1, 4),
       engine=st.sampled_from(["vllm", "trtllm"]), workload=workloads)
def test_any_prediction_is_answered(client: TestClient, model: str, gpu: str, wd: str, kv: str, tp: int,
                                    replicas: int, engine: str, workload: dict[str, Any]) -> None:
    _answered(client.post("/v1/predictions", json={
        "model": model, "deployment": {"gpu": gpu, "tp": tp, "replicas": replicas, "weight_dtype": wd,
                                       "kv_dtype": kv, "engine": engine}, "workload": workload}))


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(model=st.sampled_from(MODELS), gpus=st.lists(st.sampled_from(GPUS), min_size=1, max_size=3, unique=True),
       workload=workloads, scenario=st.sampled_from([None, "chat", "batch", "api"]),
       objective=st.sampled_from(["min_cost", "max_throughput", "min_latency", "balanced"]),
       ttft=st.one_of(st.none(), st.floats(1, 60000)), max_gpus=st.integers(1, 8))
def test_any_recommendation_is_answered(client: TestClient, model: str, gpus: list[str], workload: dict[str, Any],
                                        scenario: str | None, objective: str, ttft: float | None,
                                        max_gpus: int) -> None:
    r = client.post("/v1/recommendations", json={
        "model": model, "workload": workload, "scenario": scenario, "objective": objective,
        "sla": {"ttft_ms": ttft}, "constraints": {"gpus": gpus, "max_gpus": max_gpus}})
    _answered(r)
    if r.status_code == 200:
        body = r.json()
        assert body["feasible"] == bool(body["recommendations"])
        assert body["feasible"] or body["explanation"]["summary"]
        if not body["feasible"]:
            # a candidate listed as closest to the bounds is one that misses some bound
            assert all(c["violations"] for c in body["explanation"]["closest"])
