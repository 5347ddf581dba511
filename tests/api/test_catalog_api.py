from __future__ import annotations

from fastapi.testclient import TestClient


def test_health_and_ready(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready" and ready["gpus"] >= 30


def test_gpus_listed_with_sources(client: TestClient) -> None:
    body = client.get("/v1/gpus").json()
    assert body["count"] >= 30
    h100 = client.get("/v1/gpus/h100-sxm").json()
    assert h100["memory_gb"] == 80 and h100["sources"]["memory"]


def test_unknown_gpu_names_nearest(client: TestClient) -> None:
    r = client.get("/v1/gpus/h100")
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "h100-sxm" in r.json()["nearest"]


def test_model_aliases_resolve_case_insensitively(client: TestClient) -> None:
    r = client.get("/v1/models/META-LLAMA/llama-3.1-70b-instruct")
    assert r.status_code == 200
    body = r.json()
    assert body["id"] == "meta-llama/Llama-3.1-70B"
    assert body["kv_bytes_per_token_bf16"] == 327_680
    assert client.get("/v1/models").json()["count"] >= 40


def test_quantizations_carry_support(client: TestClient) -> None:
    body = client.get("/v1/quantizations").json()
    fp8 = next(d for d in body["weight_dtypes"] if d["id"] == "fp8")
    levels = {(s["engine"], s["architecture"]): s["level"] for s in fp8["support"]}
    assert levels[("trtllm", "hopper")] == "native"
    assert ("trtllm", "ampere") not in levels
    assert levels[("vllm", "ampere")] == "fallback"


def test_benchmarks_filter_and_page(client: TestClient) -> None:
    r = client.get("/v1/benchmarks", params={"gpu": "h100-sxm", "engine": "trtllm", "limit": 5})
    body = r.json()
    assert r.status_code == 200 and body["total"] > 100 and len(body["items"]) == 5
    assert all(i["gpu"] == "h100-sxm" and i["engine"] == "trtllm" and i["source"] for i in body["items"])
    second = client.get("/v1/benchmarks", params={"gpu": "h100-sxm", "engine": "trtllm", "limit": 5,
                                                  "offset": 5}).json()
    assert {i["id"] for i in second["items"]}.isdisjoint({i["id"] for i in body["items"]})
    by_alias = client.get("/v1/benchmarks", params={"model": "meta-llama/llama-3.1-8b-instruct"}).json()
    assert by_alias["total"] > 0


def test_bad_query_is_a_422_problem(client: TestClient) -> None:
    r = client.get("/v1/benchmarks", params={"limit": 0})
    assert r.status_code == 422
    assert r.json()["field"] == ["query", "limit"]
    r = client.get("/v1/benchmarks", params={"gpu": "h100"})
    assert r.status_code == 422 and "h100-sxm" in r.json()["detail"]
