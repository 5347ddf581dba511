"""The prediction's pieces on the real app's catalog and calibration: the endpoint's ``predict`` is
``predict_deployment`` of the resolved, checked deployment; the analytic tail; the checks before anything runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fastapi.testclient import TestClient

from service.errors import InvalidRequest
from service.prediction.advisor import Advisor
from service.prediction.analytic import QUANTILES, analyse, analytic_ttft_quantile_s
from service.prediction.launch_settings import launch, settings_for
from service.prediction.predictor import predict, predict_deployment
from service.prediction.validate import check_context, check_runnable, model_for
from service.schemas.predictions import Deployment, PredictionRequest, Workload

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
DEP = Deployment(gpu="h100-sxm", tp=1, weight_dtype="fp8", kv_dtype="fp8", engine="vllm")
WL = Workload(input_tokens=1024, output_tokens=256, concurrency=32)


@pytest.fixture(scope="module")
def advisor(client: TestClient) -> Advisor:
    adv = client.app.state.app_state.current().advisor  # type: ignore[attr-defined]
    assert isinstance(adv, Advisor)
    return adv


def test_the_endpoint_predicts_through_predict_deployment(advisor: Advisor, client: TestClient) -> None:
    req = PredictionRequest(model=MODEL, deployment=DEP, workload=WL)
    model = model_for(advisor, MODEL, None)
    settings, _ = settings_for(advisor, DEP, advisor.gpus[DEP.gpu], WL)
    terms = analyse(advisor, model, WL, [DEP]).row(0)
    direct = predict_deployment(advisor, model, DEP, WL, req.simulation, settings, terms,
                                launch(advisor, MODEL, DEP, settings), None)
    assert direct == predict(advisor, req)
    over_http = client.post("/v1/predictions", json=req.model_dump(mode="json", exclude_none=True)).json()
    assert over_http["predicted"] == direct.model_dump(mode="json")["predicted"]


def test_a_batch_analysis_gives_each_deployment_its_own_terms(advisor: Advisor) -> None:
    # the recommender analyses the next candidates together: a row of the batch is that deployment alone
    model = model_for(advisor, MODEL, None)
    deps = [DEP, DEP.model_copy(update={"tp": 2, "gpu_count": 2}), DEP.model_copy(update={"gpu": "l4"})]
    batch = analyse(advisor, model, WL, deps)
    for k, dep in enumerate(deps):
        alone = analyse(advisor, model, WL, [dep]).row(0)
        row = batch.row(k)
        assert row[3] == alone[3]
        assert np.allclose(row[2].ttft_s, alone[2].ttft_s) and np.allclose(row[2].tpot_s, alone[2].tpot_s)


def test_the_analytic_tail_is_ordered_and_leaves_the_prompt_alone() -> None:
    ttft_s, fixed_s, prefill_s = 0.5, 0.02, 0.08
    qs = [analytic_ttft_quantile_s(ttft_s, fixed_s, prefill_s, q) for q in QUANTILES.values()]
    assert qs == sorted(qs) and qs[0] < ttft_s < qs[-1]
    # no queueing: every percentile is the mean
    assert math.isclose(analytic_ttft_quantile_s(0.1, 0.02, 0.08, 0.99), 0.1)


def test_an_unknown_model_names_the_nearest(advisor: Advisor) -> None:
    with pytest.raises(InvalidRequest) as err:
        model_for(advisor, "meta-llama/Llama-3.1-8B-Instruc", None)
    assert err.value.field == ["model"] and err.value.title == "Unknown model"
    assert err.value.valid and MODEL in err.value.valid


def test_a_context_beyond_the_window_is_refused(advisor: Advisor) -> None:
    model = model_for(advisor, MODEL, None)
    long = WL.model_copy(update={"max_context_tokens": model.max_position_embeddings + 1})
    with pytest.raises(InvalidRequest) as err:
        check_context(model, long)
    assert err.value.field == ["workload", "max_context_tokens"]
    with pytest.raises(InvalidRequest):
        check_runnable(advisor, model, DEP, long, ["deployment"])


def test_an_engine_setting_of_the_other_engine_is_refused(advisor: Advisor) -> None:
    model = model_for(advisor, MODEL, None)
    dep = DEP.model_copy(update={"engine_args": DEP.engine_args.model_copy(
        update={"kv_cache_free_gpu_memory_fraction": 0.9})})
    with pytest.raises(InvalidRequest) as err:
        check_runnable(advisor, model, dep, WL, ["deployment"])
    assert err.value.field == ["deployment", "engine_args", "kv_cache_free_gpu_memory_fraction"]
