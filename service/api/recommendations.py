"""POST /v1/recommendations: search, rank and explain deployments; GET it back by id for audit."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from service.api.deps import SessionDep, StateDep, require_read_key
from service.api.predictions import as_asked, as_problem
from service.api.problems import ProblemError
from service.errors import InvalidRequest
from service.recommendation.pareto_svg import CostAxis, render
from service.repository import recommendations as rec_repo
from service.schemas.recommendations import Links, RecommendationRequest, RecommendationResponse

router = APIRouter(prefix="/v1", tags=["recommendations"], dependencies=[Depends(require_read_key)])


@router.post("/recommendations", response_model=RecommendationResponse,
             summary="Search, rank and explain deployments that meet a model's traffic and SLA")
async def recommend(body: RecommendationRequest, state: StateDep, session: SessionDep, request: Request) -> Response:
    """Every allowed GPU x quantisation x parallel layout x engine settings x replicas, scored by the
    calibrated cost model; the feasible ones ranked by the objective, one per layout (top_k), with the
    Pareto front of cost, latency and throughput. When nothing fits: ``feasible: false`` and an
    ``explanation`` of what rules the candidates out and what to relax. Stored; ``GET
    /v1/recommendations/{id}`` returns it again."""
    metrics = getattr(request.app.state, "metrics", None)

    def answer_and_store() -> str:
        # the search and the answer in one worker thread; the session dependency commits the stored answer
        # before it is sent
        try:
            answer = as_asked(state.current().recommender.recommend(body), body.model)
        except InvalidRequest as exc:
            raise as_problem(exc) from exc
        answer.id = str(uuid.uuid4())
        answer.links = Links.of(answer.id)
        if metrics is not None:
            metrics.candidates.inc(answer.search.candidates)
        # the answer as JSON at once, stored and sent as it is (the schema above documents it): FastAPI would
        # validate it again against RecommendationResponse in another thread hop, then serialize it
        text = answer.model_dump_json()
        rec_repo.add(session, answer.id, body.model_dump(mode="json"), text, answer.calibration_version)
        return text

    return Response(content=await run_in_threadpool(answer_and_store), media_type="application/json")


def stored(session: SessionDep, rec_id: str) -> RecommendationResponse:
    """A stored answer (its links made from its id: answers stored before they had links get them too)."""
    row = rec_repo.by_id(session, rec_id)
    if row is None:
        raise ProblemError(404, "Not found", f"no recommendation with id '{rec_id}'", field=["id"])
    answer = RecommendationResponse.model_validate(row.response)
    answer.links = Links.of(answer.id)
    return answer


@router.get("/recommendations/{rec_id}", response_model=RecommendationResponse,
            summary="A stored recommendation, as it was answered")
def get_recommendation(rec_id: str, session: SessionDep) -> RecommendationResponse:
    return stored(session, rec_id)


@router.get("/recommendations/{rec_id}/pareto.svg", response_class=Response,
            responses={200: {"content": {"image/svg+xml": {}}, "description": "the picture, SVG text"}},
            summary="A stored recommendation's Pareto front as an SVG picture")
def pareto_svg(rec_id: str, session: SessionDep,
               cost: Annotated[CostAxis, Query(description="the cost axis: USD per hour of the deployment, or "
                                               "USD per million output tokens")] = "usd_per_hour") -> Response:
    """Two panels: cost against TTFT (at the answer's percentile) and cost against output tokens/s; the
    search's Pareto-optimal deployments as circles, the recommendations as labelled diamonds (rank, GPU count x
    GPU, weight/KV dtype, engine) at their predicted figures."""
    return Response(content=render(stored(session, rec_id), cost), media_type="image/svg+xml")
