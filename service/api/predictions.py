"""POST /v1/predictions: what one given deployment will do under one workload."""

from __future__ import annotations

from typing import TypeVar

from fastapi import APIRouter, Depends

from service.api.deps import StateDep, require_read_key
from service.api.problems import ProblemError
from service.errors import InvalidRequest
from service.schemas.predictions import PredictionRequest, PredictionResponse
from service.schemas.recommendations import RecommendationResponse

router = APIRouter(prefix="/v1", tags=["predictions"], dependencies=[Depends(require_read_key)])


def as_problem(exc: InvalidRequest) -> ProblemError:
    return ProblemError(422, exc.title, exc.message, field=exc.field, valid=exc.valid)


@router.post("/predictions", response_model=PredictionResponse,
             summary="Predict TTFT, TPOT, throughput, memory and cost of one deployment")
def predict(body: PredictionRequest, state: StateDep) -> PredictionResponse:
    """Times in ms (means unless named p50/p90/p95/p99), throughput for the whole deployment, memory per GPU
    in GB (1e9 bytes). A deployment the engine cannot start is a 422 naming the field; one that does not fit
    in memory is ``fits: false`` with the memory breakdown and why."""
    try:
        return as_asked(state.current().advisor.predict(body), body.model)
    except InvalidRequest as exc:
        raise as_problem(exc) from exc


Answer = TypeVar("Answer", PredictionResponse, RecommendationResponse)


def as_asked(answer: Answer, asked: str | None) -> Answer:
    """The answer names the model as the caller did (``meta-llama/Llama-2-7b-hf``, not the chat variant it shares
    an architecture with); ``resolved_model`` is the catalog entry whose architecture was used."""
    answer.resolved_model = answer.model
    if asked is not None:
        answer.model = asked
    return answer
