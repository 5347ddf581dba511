"""The serving snapshot: replaced whole when a new calibration is stored, never changed under a request.

One app per database for the module; a new calibration version is stored directly, as another worker would."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.db.session import transaction
from service.main import create_app
from service.repository import calibrations as repo
from service.settings import Settings
from service.state import AppState

PREDICTION = {"model": "meta-llama/Llama-3.1-8B", "deployment": {"gpu": "l4"},
              "workload": {"input_tokens": 512, "output_tokens": 128, "concurrency": 4}}


@pytest.fixture(scope="module")
def api(module_db_url: str) -> Iterator[TestClient]:
    settings = Settings(database_url=module_db_url, calibration_cv="off")
    with TestClient(create_app(settings)) as c:
        yield c


def _state(api: TestClient) -> AppState:
    state: AppState = api.app.state.app_state  # type: ignore[attr-defined]
    return state


def _store_copy_of_latest(state: AppState) -> int:
    """A new version with the newest one's parameters, as another worker's ingest would store one."""
    with transaction(state.sessions) as session:
        row = repo.latest(session)
        assert row is not None
        return repo.store(session, row.data_sha256, row.n_measurements, row.params, dict(row.metrics or {}))


def test_a_new_calibration_replaces_the_snapshot_whole(api: TestClient) -> None:
    state = _state(api)
    taken = state.current()
    version = taken.calibration.version
    assert version is not None
    new_version = _store_copy_of_latest(state)
    state.reload_calibration()
    now = state.serving
    assert now is not taken
    assert now.calibration.version == new_version > version
    assert now.advisor.cal is now.calibration and now.recommender.advisor is now.advisor
    # what a request took is untouched: the same calibration in its advisor and recommender
    assert taken.calibration.version == version
    assert taken.advisor.cal is taken.calibration and taken.recommender.advisor is taken.advisor
    with pytest.raises(dataclasses.FrozenInstanceError):
        taken.calibration = now.calibration  # type: ignore[misc]
    answer = api.post("/v1/predictions", json=PREDICTION)
    assert answer.status_code == 200, answer.text
    assert answer.json()["confidence"]["calibration_version"] == new_version


def test_an_unchanged_calibration_keeps_the_snapshot(api: TestClient) -> None:
    state = _state(api)
    state.reload_calibration()
    held = state.serving
    state.reload_calibration()
    assert state.serving is held
