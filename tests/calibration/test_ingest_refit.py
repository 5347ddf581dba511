"""The refit after an ingest, run after the answer (INGEST_REFIT=background): the answer
says it is pending, and the worker then serves the new version without waiting for its refresh interval."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.calibration.ingest_refit import RefitThread
from service.db.models import Ingest
from service.db.session import transaction
from service.main import create_app
from service.settings import Settings
from tests.calibration.ingest_helpers import app_state, post_row

WRITE_KEY = "refit-test-write-key"
AUTH = {"Authorization": f"Bearer {WRITE_KEY}"}
# Long enough that only the refit thread, not the periodic check, can make the worker serve the new version.
REFRESH_S = 3600.0
# Longest wait for the refit thread, seconds (a refit of one segment takes seconds on a loaded machine).
REFIT_WAIT_S = 120.0
MODEL_8B = "meta-llama/Llama-3.1-8B-Instruct"
# GPUs without shipped vLLM rows that hold the 8B model, so that each row starts a segment of its own.
ROWS = [
    {"row_id": f"refit-{gpu}-1", "source": f"test lab, one {gpu}", "engine": "vllm", "engine_version": "0.11.0",
     "gpu": gpu, "gpu_count": 1, "model": MODEL_8B, "weight_dtype": dtype, "kv_dtype": "auto", "tp": 1, "pp": 1,
     "dp": 1, "mode": "concurrency", "input_tokens": 1024.0, "output_tokens": 128.0, "concurrency": 8.0,
     "output_tok_s": 420.0, "ttft_ms": 310.0, "ttft_stat": "mean", "tpot_ms": 17.5, "tpot_stat": "mean"}
    for gpu, dtype in (("rtx-6000-ada", "fp16"), ("a10", "bf16"))
]
PREDICTION = {"model": MODEL_8B, "deployment": {"gpu": "a10", "weight_dtype": "bf16", "engine": "vllm"},
              "workload": {"input_tokens": 1024, "output_tokens": 128, "concurrency": 8}}


@pytest.fixture(scope="module")
def api(module_db_url: str) -> Iterator[TestClient]:
    settings = Settings(database_url=module_db_url, advisor_api_key=WRITE_KEY, calibration_cv="off",
                        ingest_refit="background", calibration_refresh_s=REFRESH_S, max_ingests_in_flight=2)
    with TestClient(create_app(settings)) as c:
        yield c


def test_the_answer_comes_first_and_the_worker_then_serves_the_refit(api: TestClient) -> None:
    state = app_state(api)
    refits = state.refits
    assert refits is not None and refits.wait_idle(REFIT_WAIT_S)
    before = api.get("/v1/calibration").json()["version"]
    answer = post_row(api, ROWS[0], AUTH)
    assert answer["calibration_version"] is None
    outcome = answer["calibration"]
    assert (outcome["refit"], outcome["version"], outcome["refitted"]) == ("pending", before, False)
    assert outcome["scored_rows"] == 1
    assert refits.wait_idle(REFIT_WAIT_S), "the refit did not finish"
    after = api.get("/v1/calibration").json()
    assert after["version"] == before + 1 and after["method"] == "refit"
    assert "vllm/rtx-6000-ada/fp16" in {s["key"] for s in after["segments"]}
    # this worker serves it at once, though its periodic check is an hour away
    assert state.serving.calibration.version == before + 1
    with transaction(state.sessions) as session:
        ingest = session.get(Ingest, answer["ingest_id"])
        assert ingest is not None and ingest.calibration_version == before + 1


def test_predictions_use_the_refit_as_soon_as_it_is_stored(api: TestClient) -> None:
    state = app_state(api)
    refits = state.refits
    assert refits is not None and refits.wait_idle(REFIT_WAIT_S)
    before = api.get("/v1/calibration").json()["version"]
    post_row(api, ROWS[1], AUTH)
    assert refits.wait_idle(REFIT_WAIT_S)
    predicted = api.post("/v1/predictions", json=PREDICTION)
    assert predicted.status_code == 200, predicted.text
    assert predicted.json()["confidence"]["calibration_version"] == before + 1


def test_wakes_during_a_refit_ask_for_one_more_refit_not_one_each() -> None:
    started, release = threading.Event(), threading.Event()
    runs: list[int] = []

    def work() -> None:
        runs.append(len(runs))
        started.set()
        release.wait(REFIT_WAIT_S)

    refits = RefitThread(work)
    refits.wake()
    assert started.wait(REFIT_WAIT_S)
    for _ in range(3):                     # three ingests stored while the first refit runs
        refits.wake()
    release.set()
    assert refits.wait_idle(REFIT_WAIT_S)
    assert runs == [0, 1]
