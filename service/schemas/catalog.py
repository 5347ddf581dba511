"""Public schemas of the catalog endpoints."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from gpu_catalog.schema import GpuSpec, KvDtypeSpec, ModelSpec, WeightDtypeSpec


class GpuPublic(GpuSpec):
    pass


class GpuList(BaseModel):
    count: int
    items: list[GpuPublic]


class ModelPublic(ModelSpec):
    kv_bytes_per_token_bf16: int = Field(
        description="KV-cache bytes per token of context, whole model, BF16; "
        "sliding-window layers counted as full (an upper bound)")


class ModelList(BaseModel):
    count: int
    items: list[ModelPublic]


class DtypeSupportPublic(BaseModel):
    engine: str
    architecture: str
    level: str = Field(description="native: tensor cores run the format; fallback: weight-only dequantised")


class WeightDtypePublic(WeightDtypeSpec):
    support: list[DtypeSupportPublic]


class KvDtypePublic(KvDtypeSpec):
    support: list[DtypeSupportPublic]


class QuantizationList(BaseModel):
    weight_dtypes: list[WeightDtypePublic]
    kv_dtypes: list[KvDtypePublic]
    architectures: dict[str, list[str]] = Field(description="GPU ids of each architecture")
    sources: dict[str, str]


class MeasurementPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    row_id: str
    quality: str
    source_id: str
    source: str
    engine: str
    engine_version: str | None
    gpu: str
    gpu_count: int | None
    model: str
    model_family: str | None
    model_id: str | None = Field(description="the catalog architecture the row's model resolves to")
    weight_dtype: str | None
    kv_dtype: str | None
    tp: int | None
    pp: int | None
    dp: int | None
    ep: int | None
    mode: str | None
    input_tokens: float | None
    output_tokens: float | None
    concurrency: float | None
    request_rate: float | None
    max_batch: int | None
    output_tok_s: float | None
    output_tok_s_per_gpu: float | None
    total_tok_s: float | None
    requests_per_s: float | None
    ttft_ms: float | None
    ttft_stat: str | None
    tpot_ms: float | None
    tpot_stat: str | None
    itl_ms: float | None
    itl_stat: str | None
    e2e_ms: float | None
    e2e_stat: str | None
    peak_mem_gb: float | None
    orig_gpu: str | None
    orig_model: str | None
    orig_engine: str | None
    notes: str | None
    submitted_by: str
    created_at: datetime


class MeasurementPage(BaseModel):
    total: int
    limit: int
    offset: int
    items: list[MeasurementPublic]
