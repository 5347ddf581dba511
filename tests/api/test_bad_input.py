"""Bodies that are wrong as a whole (empty, not JSON, another media type, too large) and writes with no key
configured: each answered with the status and a message that says what is wrong, through the real app."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.main import create_app
from service.settings import Settings

PREDICTION: dict[str, Any] = {"model": "meta-llama/Llama-3.1-8B-Instruct", "deployment": {"gpu": "l4"},
                              "workload": {"input_tokens": 512, "output_tokens": 128, "concurrency": 4}}
RECOMMENDATION: dict[str, Any] = {"model": "meta-llama/Llama-3.1-8B-Instruct", "constraints": {"gpus": ["l4"]},
                                  "workload": {"input_tokens": 512, "output_tokens": 128, "concurrency": 4}}
JSON_ROUTES = ["/v1/predictions", "/v1/recommendations"]
AUTH = {"Authorization": "Bearer test-write-key"}      # the session client's write key (tests/conftest.py)


def problem(r: Any, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = r.json()
    assert body["status"] == status and body["title"] and body["detail"]
    return body


@pytest.mark.parametrize("path", JSON_ROUTES)
@pytest.mark.parametrize("media", ["text/plain", "application/x-www-form-urlencoded", "application/xml", None])
def test_a_body_sent_as_another_media_type_gets_415(client: TestClient, path: str, media: str | None) -> None:
    # curl -d sends application/x-www-form-urlencoded unless told otherwise
    headers = {"Content-Type": media} if media else {}
    body = problem(client.post(path, content=b'{"model": "x"}', headers=headers), 415)
    assert body["valid"] == ["application/json"]
    assert "application/json" in body["detail"] and (media or "names none") in body["detail"]


def test_json_with_a_charset_or_a_json_suffix_is_still_json(client: TestClient) -> None:
    import json

    for media in ("application/json; charset=utf-8", "application/vnd.api+json"):
        r = client.post("/v1/predictions", content=json.dumps(PREDICTION).encode(), headers={"Content-Type": media})
        assert r.status_code == 200, (media, r.text)


def test_the_csv_upload_keeps_its_media_types(client: TestClient) -> None:
    r = client.post("/v1/benchmarks", content=b"row_id,gpu\n", headers={**AUTH, "Content-Type": "text/csv"})
    assert r.status_code == 422        # read as CSV (a header without the required columns), not refused as media
    body = problem(client.post("/v1/benchmarks", content=b"<rows/>",
                               headers={**AUTH, "Content-Type": "application/xml"}), 415)
    assert body["valid"] == ["application/json", "text/csv"]


@pytest.mark.parametrize("path", [*JSON_ROUTES, "/v1/benchmarks"])
@pytest.mark.parametrize("content", [b"", b"   "])
def test_an_empty_body_is_named_as_such(client: TestClient, path: str, content: bytes) -> None:
    body = problem(client.post(path, content=content, headers={**AUTH, "Content-Type": "application/json"}), 422)
    assert body["title"] == "Empty body" and "empty" in body["detail"]
    assert "Field required" not in body["detail"]
    assert body["field"] == ["body"]


@pytest.mark.parametrize("path", [*JSON_ROUTES, "/v1/benchmarks"])
def test_malformed_json_names_line_and_column_not_an_offset_as_a_field(client: TestClient, path: str) -> None:
    content = b'{"model": "meta-llama/Llama-3.1-8B",\n  "workload": {"input_tokens": 512,}\n}'
    body = problem(client.post(path, content=content, headers={**AUTH, "Content-Type": "application/json"}), 422)
    assert body["field"] == ["body"]
    assert all(e["field"] == ["body"] for e in body["errors"])
    assert body["title"] == "Malformed JSON"
    # the stray comma before } on line 2: json.loads reports the position of the }
    assert (body["line"], body["column"]) == (2, 36), body
    assert "line 2, column 36" in body["detail"] and "not valid JSON" in body["detail"]


@pytest.mark.parametrize("path", [*JSON_ROUTES, "/v1/benchmarks"])
def test_bytes_that_are_not_text_are_malformed_json_not_a_400(client: TestClient, path: str) -> None:
    # found by schemathesis: FastAPI's body reader answered 400 'There was an error parsing the body'
    body = problem(client.post(path, content=b"\xa9f\x14\xe1`-", headers={**AUTH, "Content-Type": "application/json"}),
                   422)
    assert body["title"] == "Malformed JSON" and "not UTF-8 text" in body["detail"] and body["field"] == ["body"]


def test_an_oversized_chunked_body_gets_413_not_400(client: TestClient) -> None:
    limit_bytes = Settings(database_url="sqlite://").max_body_bytes
    chunk = b" " * (1 << 20)

    def chunks() -> Iterator[bytes]:          # no Content-Length: sent with Transfer-Encoding: chunked
        for _ in range(limit_bytes // len(chunk) + 2):
            yield chunk

    for path in [*JSON_ROUTES, "/v1/benchmarks"]:
        r = client.post(path, content=chunks(), headers={**AUTH, "Content-Type": "application/json"})
        assert r.request.headers.get("transfer-encoding") == "chunked"
        body = problem(r, 413)
        assert "MAX_BODY_BYTES" in body["detail"] and body["title"] == "Request body too large"


@pytest.mark.parametrize("path", ["/v1/predictions", "/v1/recommendations"])
def test_a_model_is_answered_under_the_id_it_was_asked_by(client: TestClient, path: str) -> None:
    # meta-llama/Llama-2-7b-hf shares its architecture with the catalog's meta-llama/Llama-2-7b-chat-hf
    body = PREDICTION if path == "/v1/predictions" else RECOMMENDATION
    r = client.post(path, json={**body, "model": "meta-llama/Llama-2-7b-hf"})
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["model"] == "meta-llama/Llama-2-7b-hf"
    assert answer["resolved_model"] == "meta-llama/Llama-2-7b-chat-hf"
    if path == "/v1/recommendations":
        assert client.get(f"/v1/recommendations/{answer['id']}").json()["model"] == "meta-llama/Llama-2-7b-hf"


def test_an_inline_model_is_answered_under_its_name(client: TestClient) -> None:
    spec = {"name": "my-org/tiny", "num_layers": 4, "hidden_size": 1024, "intermediate_size": 4096,
            "num_attention_heads": 16, "num_kv_heads": 4, "vocab_size": 32000}
    r = client.post("/v1/predictions", json={**{k: v for k, v in PREDICTION.items() if k != "model"},
                                             "model_spec": spec})
    assert r.status_code == 200, r.text
    assert r.json()["model"] == r.json()["resolved_model"] == "my-org/tiny"


@pytest.fixture(scope="module")
def keyless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The app as an operator runs it without ADVISOR_API_KEY."""
    db = Path(tmp_path_factory.mktemp("keyless")) / "keyless.db"
    with TestClient(create_app(Settings(database_url=f"sqlite:///{db}", calibration_cv="off",
                                        advisor_api_key=None))) as c:
        yield c


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer some-key"}])
def test_a_write_with_no_key_configured_says_writes_are_disabled(keyless: TestClient,
                                                                  headers: dict[str, str]) -> None:
    r = keyless.post("/v1/benchmarks", json={"format": "rows", "rows": []}, headers=headers)
    body = problem(r, 403)
    assert "writes are disabled" in body["detail"] and "ADVISOR_API_KEY" in body["detail"]
    assert "Authorization" not in body["detail"]
    # reads stay open
    assert keyless.get("/v1/gpus/l4").status_code == 200
