"""The OpenAPI document says what the service does: the error statuses each operation sends, as the problem bodies
it sends; a key requirement only where a key is needed; examples that are answers of the service."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

from service.api.problems import PROBLEM_JSON
from service.main import create_app
from service.schemas import benchmarks, calibration, catalog, predictions, problems, recommendations
from service.settings import Settings

AUTH = {"Authorization": "Bearer test-write-key"}      # the session client's write key (tests/conftest.py)
PREDICTION = {"model": "meta-llama/Llama-3.1-8B-Instruct", "deployment": {"gpu": "l4"},
              "workload": {"input_tokens": 512, "output_tokens": 128, "concurrency": 4}}
RECOMMENDATION = {**{k: v for k, v in PREDICTION.items() if k != "deployment"}, "constraints": {"gpus": ["l4"]}}
ROW = {"row_id": "openapi-test-0001", "source": "openapi test, simulated figures", "engine": "vllm",
       "engine_version": "0.11.0", "gpu": "l40s", "gpu_count": 1, "model": "meta-llama/Llama-3.1-8B-Instruct",
       "weight_dtype": "fp8", "kv_dtype": "auto", "tp": 1, "pp": 1, "dp": 1, "mode": "concurrency",
       "input_tokens": 1024, "output_tokens": 128, "concurrency": 16, "output_tok_s": 1210.5, "ttft_ms": 180.2,
       "ttft_stat": "mean", "tpot_ms": 12.1, "tpot_stat": "mean"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
JSON = {"Content-Type": "application/json"}
TOO_LARGE = b"{" + b" " * Settings(database_url="sqlite://").max_body_bytes + b"}"

Send = Callable[[TestClient], Any]
# For each operation and error status the document lists, a request that gets it (503, the database being down, is
# tests/api/test_faults.py's). For the operations listed, a documented status with no request here fails the test,
# as does a request that gets another status.
WITNESSES: dict[tuple[str, str], dict[int, Send]] = {
    ("get", "/v1/gpus/{gpu_id}"): {404: lambda c: c.get("/v1/gpus/h100")},
    ("get", "/v1/models/{model_id}"): {404: lambda c: c.get("/v1/models/meta-llama/Llama-9")},
    ("get", "/v1/benchmarks"): {422: lambda c: c.get("/v1/benchmarks", params={"gpu": "h100"})},
    ("get", "/v1/recommendations/{rec_id}"): {404: lambda c: c.get("/v1/recommendations/no-such-id")},
    ("get", "/v1/calibration/{version}"): {404: lambda c: c.get("/v1/calibration/999999"),
                                            422: lambda c: c.get("/v1/calibration/0")},
    ("post", "/v1/predictions"): {
        413: lambda c: c.post("/v1/predictions", content=TOO_LARGE, headers=JSON),
        415: lambda c: c.post("/v1/predictions", content=json.dumps(PREDICTION), headers=FORM),
        422: lambda c: c.post("/v1/predictions", json={**PREDICTION, "deployment": {"gpu": "l4", "tp": 0}})},
    ("post", "/v1/recommendations"): {
        413: lambda c: c.post("/v1/recommendations", content=TOO_LARGE, headers=JSON),
        415: lambda c: c.post("/v1/recommendations", content=json.dumps(RECOMMENDATION), headers=FORM),
        422: lambda c: c.post("/v1/recommendations", json={**RECOMMENDATION, "objective": "cheap"})},
    ("post", "/v1/benchmarks"): {
        401: lambda c: c.post("/v1/benchmarks", json={"format": "rows", "rows": [ROW]}),
        403: lambda c: c.post("/v1/benchmarks", json={"format": "rows", "rows": [ROW]},
                              headers={"Authorization": "Bearer wrong"}),
        409: lambda c: (c.post("/v1/benchmarks", json={"format": "rows", "rows": [ROW]}, headers=AUTH),
                        c.post("/v1/benchmarks", json={"format": "rows", "rows": [{**ROW, "ttft_ms": 190.0}]},
                               headers=AUTH))[1],
        413: lambda c: c.post("/v1/benchmarks", content=TOO_LARGE, headers={**AUTH, **JSON}),
        415: lambda c: c.post("/v1/benchmarks", content=b"<rows/>", headers={**AUTH, "Content-Type": "text/xml"}),
        422: lambda c: c.post("/v1/benchmarks", json={"format": "csv"}, headers=AUTH)},
}


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, op) for path, item in doc["paths"].items() for method, op in item.items()]


def errors_of(op: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {int(s): r for s, r in op["responses"].items() if int(s) >= 400}


def test_every_error_is_documented_as_the_problem_body_the_service_sends(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    schemas = doc["components"]["schemas"]
    assert "HTTPValidationError" not in schemas and "ValidationError" not in schemas
    assert {"type", "title", "status", "detail", "instance", "field", "errors", "valid"} <= set(
        schemas["Problem"]["properties"])
    for method, path, op in operations(doc):
        for status, response in errors_of(op).items():
            assert list(response["content"]) == [PROBLEM_JSON], (method, path, status)
            assert response["content"][PROBLEM_JSON]["schema"] == {"$ref": "#/components/schemas/Problem"}
            assert response["description"], (method, path, status)
        if path.startswith("/v1/"):
            assert 503 in errors_of(op), (method, path)


def test_each_documented_error_status_is_sent_with_a_problem_body(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    documented = {(m, p): set(errors_of(op)) - {503} for m, p, op in operations(doc)}
    for (method, path), witnesses in WITNESSES.items():
        assert documented[(method, path)] == set(witnesses), (method, path)
        for status, send in witnesses.items():
            r = send(client)
            assert r.status_code == status, (method, path, r.status_code, r.text[:300])
            assert r.headers["content-type"] == PROBLEM_JSON
            problems.Problem.model_validate(r.json())
    # the reads that take no input document no error but 503
    for op in [("get", "/healthz"), ("get", "/readyz"), ("get", "/v1/gpus"), ("get", "/v1/models"),
               ("get", "/v1/quantizations"), ("get", "/v1/calibration")]:
        assert not documented[op], (op, documented[op])


def test_the_key_requirement_shows_only_where_a_key_is_needed(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    secured = {(m, p) for m, p, op in operations(doc) if op.get("security")}
    assert secured == {("post", "/v1/benchmarks")}
    assert set(doc["components"]["securitySchemes"]) == {"WriteKey"}
    assert 401 not in errors_of(doc["paths"]["/v1/gpus"]["get"])
    # the padlock is true: a read needs no key, a write does
    assert client.get("/v1/gpus/l4").status_code == 200
    assert client.post("/v1/benchmarks", json={"format": "rows", "rows": [ROW]}).status_code == 401


def test_with_a_read_key_set_reads_show_it_too() -> None:
    # only the document: it is built without starting the app (no lifespan, no database)
    app = create_app(Settings(database_url="sqlite://", auto_migrate=False, advisor_read_key="r-key"))
    doc = TestClient(app).get("/openapi.json").json()
    for method, path, op in operations(doc):
        needs = op.get("security")
        if path.startswith("/v1/"):
            assert needs in ([{"ReadKey": []}], [{"WriteKey": []}]), (method, path)
            assert {401, 403} <= set(errors_of(op)), (method, path)
        else:
            assert not needs, (method, path)


def _models() -> dict[str, type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    for module in (benchmarks, calibration, catalog, predictions, problems, recommendations):
        for name, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseModel):
                found[name] = obj
    return found


def test_examples_are_answers_in_the_documented_shape(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    models = _models()
    checked = 0
    for method, path, op in operations(doc):
        for status, response in op["responses"].items():
            for media in response.get("content", {}).values():
                ref = media.get("schema", {}).get("$ref", "")
                for sample in media.get("examples", {}).values():
                    value = sample["value"]
                    if ref:
                        models[ref.rsplit("/", 1)[1]].model_validate(value)
                    if int(status) >= 400:
                        assert value["status"] == int(status), (method, path, status)
                    checked += 1
    # every operation has an example of its success answer
    for method, path, op in operations(doc):
        ok = [r for s, r in op["responses"].items() if s.startswith("2")]
        assert any("examples" in m for r in ok for m in r.get("content", {}).values()), (method, path)
    assert checked >= 30


@pytest.mark.parametrize("name", ["Predicted", "Cost", "Launch", "Sla", "Constraints", "RecommendationRequest",
                                  "MemoryPerGpu", "GpuPublic", "MeasurementPublic"])
def test_schema_fields_are_described(client: TestClient, name: str) -> None:
    schema = client.get("/openapi.json").json()["components"]["schemas"][name]
    bare = [prop for prop, spec in schema["properties"].items() if not spec.get("description")]
    assert not bare, (name, bare)
