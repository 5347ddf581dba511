"""What the ingest-refit tests share: the worker's state and one ingest of rows through HTTP."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from service.state import AppState


def app_state(api: TestClient) -> AppState:
    state: AppState = api.app.state.app_state  # type: ignore[attr-defined]
    return state


def post_row(api: TestClient, row: dict[str, Any], auth: dict[str, str]) -> dict[str, Any]:
    """POST one row; the answer of a 201."""
    r = api.post("/v1/benchmarks", json={"format": "rows", "rows": [row]}, headers=auth)
    assert r.status_code == 201, r.text
    answer: dict[str, Any] = r.json()
    return answer
