"""Operations through HTTP: request ids, the body limit, Prometheus metrics, CORS off unless configured."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.api.operations import JsonFormatter
from service.main import create_app
from service.settings import Settings


def test_request_id_is_returned_and_a_sane_given_one_is_kept(client: TestClient) -> None:
    fresh = client.get("/healthz").headers["x-request-id"]
    assert len(fresh) == 32
    assert client.get("/healthz", headers={"X-Request-ID": "abc-123"}).headers["x-request-id"] == "abc-123"
    odd = client.get("/healthz", headers={"X-Request-ID": "no spaces\tor tabs"}).headers["x-request-id"]
    assert odd != "no spaces\tor tabs"


def test_oversized_body_gets_413_before_the_app_reads_it(client: TestClient) -> None:
    limit = Settings().max_body_bytes
    r = client.post("/v1/predictions", content=b"{" + b" " * limit + b"}",
                    headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert r.headers["content-type"] == "application/problem+json"
    assert "MAX_BODY_BYTES" in r.json()["detail"]


def test_metrics_count_requests_by_route_template(client: TestClient) -> None:
    client.get("/v1/gpus/h100-sxm")
    client.get("/v1/gpus/not-a-gpu")
    text = client.get("/metrics").text
    assert 'advisor_http_requests_total{method="GET",route="/v1/gpus/{gpu_id}",status="200"}' in text
    assert 'advisor_http_requests_total{method="GET",route="/v1/gpus/{gpu_id}",status="404"}' in text
    assert "advisor_calibration_version" in text and "advisor_http_request_duration_seconds_bucket" in text


def test_metrics_series_stay_bounded_whatever_methods_clients_send(client: TestClient) -> None:
    # each label value is a series kept for the worker's life: request content must not add them
    for i in range(30):
        client.request(f"X{i}METHOD", f"/v1/gpus/h100-sxm?n={i}")
    lines = [ln for ln in client.get("/metrics").text.splitlines() if ln.startswith("advisor_http_requests_total{")]
    assert not any("X1METHOD" in ln for ln in lines)
    assert any('method="other",route="/v1/gpus/{gpu_id}",status="405"' in ln for ln in lines)
    methods = {ln.split('method="', 1)[1].split('"', 1)[0] for ln in lines}
    assert methods <= {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "other"}


def test_search_candidates_are_counted(client: TestClient) -> None:
    def count() -> float:
        for line in client.get("/metrics").text.splitlines():
            if line.startswith("advisor_search_candidates_total "):
                return float(line.split()[1])
        return 0.0

    before = count()
    r = client.post("/v1/recommendations", json={
        "model": "meta-llama/Llama-3.1-8B", "workload": {"input_tokens": 512, "output_tokens": 128, "concurrency": 4},
        "constraints": {"gpus": ["l4"], "max_gpus": 2}})
    assert count() == before + r.json()["search"]["candidates"] > before


def test_cors_is_off_by_default(client: TestClient) -> None:
    r = client.options("/v1/gpus", headers={"Origin": "https://example.com", "Access-Control-Request-Method": "GET"})
    assert "access-control-allow-origin" not in r.headers


def test_cors_allows_configured_origins(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'cors.db'}", calibration_cv="off",
                        cors_origins=["https://ops.example.com"])
    with TestClient(create_app(settings)) as c:
        r = c.get("/healthz", headers={"Origin": "https://ops.example.com"})
        assert r.headers["access-control-allow-origin"] == "https://ops.example.com"
        r = c.get("/healthz", headers={"Origin": "https://evil.example.com"})
        assert "access-control-allow-origin" not in r.headers


def test_json_log_lines_carry_the_request_id(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="service.access"):
        client.get("/healthz", headers={"X-Request-ID": "trace-42"})
    record = next(r for r in caplog.records if r.name == "service.access" and getattr(r, "path", "") == "/healthz")
    line = json.loads(JsonFormatter().format(record))
    assert line["status"] == 200 and line["path"] == "/healthz" and line["method"] == "GET"
    assert line["request_id"] == "trace-42"
