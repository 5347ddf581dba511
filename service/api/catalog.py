"""Read endpoints of the catalog: GPUs, models, quantizations, stored measurements."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from gpu_catalog.schema import ModelSpec
from service.api.deps import SessionDep, StateDep, require_read_key
from service.api.problems import unknown_id
from service.core.architecture import kv_bytes_per_token_upper
from service.repository import measurements as repo
from service.schemas.catalog import (
    DtypeSupportPublic,
    GpuList,
    GpuPublic,
    KvDtypePublic,
    MeasurementPage,
    MeasurementPublic,
    ModelList,
    ModelPublic,
    QuantizationList,
    WeightDtypePublic,
)

router = APIRouter(prefix="/v1", tags=["catalog"], dependencies=[Depends(require_read_key)])


@router.get("/gpus", response_model=GpuList, summary="The GPU catalog, each spec with its source")
def list_gpus(state: StateDep) -> GpuList:
    items = [GpuPublic.model_validate(g.model_dump()) for g in state.catalog.gpus]
    return GpuList(count=len(items), items=items)


@router.get("/gpus/{gpu_id}", response_model=GpuPublic)
def get_gpu(gpu_id: Annotated[str, Path(description="GPU id (lowercase slug), e.g. h100-sxm")],
            state: StateDep) -> GpuPublic:
    for g in state.catalog.gpus:
        if g.id == gpu_id.lower():
            return GpuPublic.model_validate(g.model_dump())
    raise unknown_id("GPU", gpu_id, (g.id for g in state.catalog.gpus), ["path", "gpu_id"], status=404)


def _public_model(m: ModelSpec) -> ModelPublic:
    return ModelPublic.model_validate({**m.model_dump(), "kv_bytes_per_token_bf16": kv_bytes_per_token_upper(m)})


@router.get("/models", response_model=ModelList, summary="Model architectures with their config.json source")
def list_models(state: StateDep) -> ModelList:
    items = [_public_model(m) for m in state.catalog.models]
    return ModelList(count=len(items), items=items)


@router.get("/models/{model_id:path}", response_model=ModelPublic,
            summary="One architecture; base, instruct and chat ids and any case resolve to it")
def get_model(model_id: Annotated[str, Path(description="HF repo id, any case; base, instruct, chat and alias "
                                                     "ids resolve (it may contain /)")],
              state: StateDep) -> ModelPublic:
    m = state.catalog.resolve_model(model_id)
    if m is None:
        raise unknown_id("model", model_id, state.catalog.model_names(), ["path", "model_id"], status=404)
    return _public_model(m)


@router.get("/quantizations", response_model=QuantizationList,
            summary="Weight and KV dtypes, and which engine runs each on which GPU architecture")
def list_quantizations(state: StateDep) -> QuantizationList:
    cat = state.catalog

    def support(kind: str, dtype: str) -> list[DtypeSupportPublic]:
        return [DtypeSupportPublic(engine=s.engine, architecture=s.architecture, level=s.level)
                for s in cat.support if s.kind == kind and s.dtype == dtype]

    archs: dict[str, list[str]] = {}
    for g in cat.gpus:
        archs.setdefault(g.architecture, []).append(g.id)
    return QuantizationList(
        weight_dtypes=[WeightDtypePublic(**d.model_dump(), support=support("weight", d.id))
                       for d in cat.weight_dtypes],
        kv_dtypes=[KvDtypePublic(**d.model_dump(), support=support("kv", d.id)) for d in cat.kv_dtypes],
        architectures=archs,
        sources={s.engine: s.source for s in cat.support},
    )


@router.get("/benchmarks", response_model=MeasurementPage, summary="Stored measurements, filtered and paged")
def list_benchmarks(
    session: SessionDep,
    state: StateDep,
    gpu: Annotated[str | None, Query(description="GPU id")] = None,
    model: Annotated[str | None, Query(description="model id or alias")] = None,
    engine: Annotated[str | None, Query(description="engine: vllm, trtllm, sglang, ...")] = None,
    dtype: Annotated[str | None, Query(description="weight dtype")] = None,
    source: Annotated[str | None, Query(description="source_id")] = None,
    quality: Annotated[str | None, Query(pattern="^(good|weak)$", description="good (fitted) or weak")] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="measurements per page")] = 100,
    offset: Annotated[int, Query(ge=0, description="measurements to skip (paging)")] = 0,
) -> MeasurementPage:
    model_id = None
    if model:
        resolved = state.catalog.resolve_model(model)
        if resolved is None:
            raise unknown_id("model", model, state.catalog.model_names(), ["query", "model"])
        model_id = resolved.id
    if gpu and gpu not in {g.id for g in state.catalog.gpus}:
        raise unknown_id("GPU", gpu, (g.id for g in state.catalog.gpus), ["query", "gpu"])
    total, items = repo.page(session, repo.filtered(gpu, model_id, engine, dtype, source, quality), limit, offset)
    return MeasurementPage(total=total, limit=limit, offset=offset,
                           items=[MeasurementPublic.model_validate(i) for i in items])
