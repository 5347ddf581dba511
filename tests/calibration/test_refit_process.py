"""The refit after an ingest in the worker's refit process (INGEST_REFIT=sync, the default): the rows are committed,
a child at the lowest CPU priority refits, and the answer carries the version it produced, which this worker serves."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.main import create_app
from service.settings import Settings
from tests.calibration.ingest_helpers import app_state, post_row

WRITE_KEY = "refit-process-test-write-key"
AUTH = {"Authorization": f"Bearer {WRITE_KEY}"}
REFRESH_S = 3600.0                  # only the refit, not the periodic check, can make the worker serve a new version
REFIT_WAIT_S = 120.0                # a refit on a loaded machine, process start included, seconds
LOWEST_NICE = 19
MODEL_8B = "meta-llama/Llama-3.1-8B-Instruct"


def _row(n: int, gpu: str, dtype: str) -> dict[str, Any]:
    # GPUs without shipped vLLM rows that hold the 8B model at 8 clients (a run the modelled memory cannot hold is
    # not fitted): each ingest refits a segment of its own
    return {"row_id": f"refit-process-{gpu}-{n}", "source": f"test lab, one {gpu}", "engine": "vllm",
            "engine_version": "0.11.0", "gpu": gpu, "gpu_count": 1, "model": MODEL_8B, "weight_dtype": dtype,
            "kv_dtype": "auto", "tp": 1, "pp": 1, "dp": 1, "mode": "concurrency", "input_tokens": 1024.0,
            "output_tokens": 128.0, "concurrency": 8.0, "output_tok_s": 400.0 + 20 * n, "ttft_ms": 300.0 + 10 * n,
            "ttft_stat": "mean", "tpot_ms": 17.0 + n, "tpot_stat": "mean"}


@pytest.fixture(scope="module")
def api(module_db_url: str) -> Iterator[TestClient]:
    settings = Settings(database_url=module_db_url, advisor_api_key=WRITE_KEY, calibration_cv="off",
                        ingest_refit="sync", ingest_refit_wait_s=REFIT_WAIT_S, calibration_refresh_s=REFRESH_S)
    with TestClient(create_app(settings)) as c:
        yield c


def test_the_answer_carries_the_version_the_refit_process_made(api: TestClient) -> None:
    state = app_state(api)
    before = api.get("/v1/calibration").json()["version"]
    answer = post_row(api, _row(1, "rtx-6000-ada", "fp16"), AUTH)
    outcome = answer["calibration"]
    assert (outcome["refit"], outcome["version"], outcome["previous_version"]) == ("done", before + 1, before)
    assert answer["calibration_version"] == before + 1 and outcome["refitted"] is True
    assert "vllm/rtx-6000-ada/fp16" in outcome["refitted_segments"] and outcome["fit_s"] is not None
    stored = api.get(f"/v1/calibration/{before + 1}").json()
    assert stored["method"] == "refit" and stored["refitted_segments"] == outcome["refitted_segments"]
    # this worker serves it at once, though its periodic check is an hour away
    assert state.serving.calibration.version == before + 1
    # the refit ran in another process, at the lowest priority
    process = state.refit_process
    assert process is not None and process.proc is not None and process.proc.poll() is None
    assert process.proc.pid != os.getpid()
    assert os.getpriority(os.PRIO_PROCESS, process.proc.pid) == LOWEST_NICE


def test_a_refit_process_that_died_is_started_again(api: TestClient) -> None:
    state = app_state(api)
    process = state.refit_process
    assert process is not None and process.proc is not None
    dead = process.proc
    dead.kill()
    dead.wait()
    before = api.get("/v1/calibration").json()["version"]
    answer = post_row(api, _row(2, "a10", "bf16"), AUTH)
    assert (answer["calibration"]["refit"], answer["calibration_version"]) == ("done", before + 1)
    assert "vllm/a10/bf16" in answer["calibration"]["refitted_segments"]
    assert process.proc is not None and process.proc.poll() is None and process.proc.pid != dead.pid


def test_an_ingest_answers_pending_when_its_refit_outlasts_the_wait(api: TestClient) -> None:
    state = app_state(api)
    refits = state.refits
    assert refits is not None
    before = api.get("/v1/calibration").json()["version"]
    # a wait far shorter than a refit (least squares over the segment's rows, in another process)
    state.settings = state.settings.model_copy(update={"ingest_refit_wait_s": 1e-3})
    try:
        answer = post_row(api, _row(3, "rtx-6000-ada", "fp16"), AUTH)
    finally:
        state.settings = state.settings.model_copy(update={"ingest_refit_wait_s": REFIT_WAIT_S})
    assert answer["calibration"]["refit"] == "pending" and answer["calibration_version"] is None
    assert refits.wait_idle(REFIT_WAIT_S), "the refit did not finish"
    assert api.get("/v1/calibration").json()["version"] == before + 1
    assert state.serving.calibration.version == before + 1
