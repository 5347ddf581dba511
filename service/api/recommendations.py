"""POST /v1/recommendations: search, rank and explain deployments; GET it back by id for audit."""

from __future__ import annotations

import uuid
from functools import lru_cache

from fastapi import APIRouter, Depends, Request, Response

from service.advisor import Advisor, InvalidRequest
from service.api.deps import SessionDep, StateDep, require_read_key
from service.api.predictions import as_problem
from service.api.problems import ProblemError
from service.db.models import RecommendationRecord
from service.recommend import Recommender
from service.schemas.recommendations import RecommendationRequest, RecommendationResponse

router = APIRouter(prefix="/v1", tags=["recommendations"], dependencies=[Depends(require_read_key)])


@lru_cache(maxsize=4)
def recommender_for(advisor: Advisor) -> Recommender:
    """One recommender per advisor (it caches engine defaults per GPU); a new calibration keeps the advisor."""
    return Recommender(advisor)


@router.post("/recommendations", response_model=RecommendationResponse,
             summary="Search, rank and explain deployments that meet a model's traffic and SLA")
def recommend(body: RecommendationRequest, state: StateDep, session: SessionDep, request: Request) -> Response:
    """Every allowed GPU x quantisation x parallel layout x engine settings x replicas, scored by the
    calibrated cost model; the feasible ones ranked by the objective, one per layout (top_k), with the
    Pareto front of cost, latency and throughput. When nothing fits: ``feasible: false`` and an
    ``explanation`` of what rules the candidates out and what to relax. Stored; ``GET
    /v1/recommendations/{id}`` returns it again."""
    try:
        answer = recommender_for(state.current_advisor()).recommend(body)
    except InvalidRequest as exc:
        raise as_problem(exc) from exc
    answer.id = str(uuid.uuid4())
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.candidates.inc(answer.search.candidates)
    session.add(RecommendationRecord(id=answer.id, request=body.model_dump(mode="json"),
                                     response=answer.model_dump(mode="json"),
                                     calibration_version=answer.calibration_version))
    session.flush()
    # the answer as JSON at once (the schema above documents it): FastAPI would validate it again against
    # RecommendationResponse in another thread hop, then serialize it (~1.5 ms for an answer of ~50 KB)
    return Response(content=answer.model_dump_json(), media_type="application/json")


@router.get("/recommendations/{rec_id}", response_model=RecommendationResponse,
            summary="A stored recommendation, as it was answered")
def get_recommendation(rec_id: str, session: SessionDep) -> RecommendationResponse:
    row = session.get(RecommendationRecord, rec_id)
    if row is None:
        raise ProblemError(404, "Not found", f"no recommendation with id '{rec_id}'", field=["id"])
    return RecommendationResponse.model_validate(row.response)
