"""Public schemas of the catalog endpoints."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from gpu_catalog.schema import GpuSpec, KvDtypeSpec, ModelSpec, WeightDtypeSpec


class GpuPublic(GpuSpec):
    pass


class GpuList(BaseModel):
    count: int = Field(description="GPUs in the catalog")
    items: list[GpuPublic] = Field(description="each GPU's spec with its sources")


class ModelPublic(ModelSpec):
    kv_bytes_per_token_bf16: int = Field(
        description="KV-cache bytes per token of context, whole model, BF16; "
        "sliding-window layers counted as full (an upper bound)")


class ModelList(BaseModel):
    count: int = Field(description="model architectures in the catalog")
    items: list[ModelPublic] = Field(description="each architecture with its config.json source")


class DtypeSupportPublic(BaseModel):
    engine: str = Field(description="engine id (vllm, trtllm, ...)")
    architecture: str = Field(description="GPU architecture (hopper, ampere, ...; GET /v1/gpus)")
    level: str = Field(description="native: tensor cores run the format; fallback: weight-only dequantised")


class WeightDtypePublic(WeightDtypeSpec):
    support: list[DtypeSupportPublic] = Field(
        description="which engine runs this dtype on which GPU architecture, and how")


class KvDtypePublic(KvDtypeSpec):
    support: list[DtypeSupportPublic] = Field(
        description="which engine runs this KV-cache dtype on which GPU architecture")


class QuantizationList(BaseModel):
    weight_dtypes: list[WeightDtypePublic] = Field(description="weight dtypes (quantisations), with their support")
    kv_dtypes: list[KvDtypePublic] = Field(description="KV-cache dtypes, with their support")
    architectures: dict[str, list[str]] = Field(description="GPU ids of each architecture")
    sources: dict[str, str] = Field(description="per engine: where its support table comes from")


class MeasurementPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int = Field(description="measurement id")
    row_id: str = Field(description="the row's id in its source (user rows: user:<row_id>)")
    quality: str = Field(description="good (used by the calibration) or weak (stored, not fitted)")
    source_id: str = Field(description="the source the row belongs to (user rows: user:<ingest id>)")
    source: str = Field(description="where the figures come from, in words (paper, blog post, result file, sender)")
    engine: str = Field(description="engine id as measured")
    engine_version: str | None = Field(description="engine release as measured")
    gpu: str = Field(description="GPU id")
    gpu_count: int | None = Field(description="GPUs used in total")
    model: str = Field(description="the model as the source names it")
    model_family: str | None = Field(description="its family slug (base/instruct/chat variants share it)")
    model_id: str | None = Field(description="the catalog architecture the row's model resolves to")
    weight_dtype: str | None = Field(description="weight dtype id")
    kv_dtype: str | None = Field(description="KV-cache dtype id")
    tp: int | None = Field(description="tensor-parallel size")
    pp: int | None = Field(description="pipeline-parallel size")
    dp: int | None = Field(description="data-parallel replicas")
    ep: int | None = Field(description="expert-parallel size (0: none)")
    mode: str | None = Field(description="offline, static_batch, concurrency (closed loop) or request_rate (open loop)")
    input_tokens: float | None = Field(description="mean prompt length, tokens")
    output_tokens: float | None = Field(description="mean generated length, tokens")
    concurrency: float | None = Field(description="closed loop: clients")
    request_rate: float | None = Field(description="open loop: requests per second offered")
    max_batch: int | None = Field(description="the engine's batch limit (max_num_seqs / max_batch_size), sequences")
    output_tok_s: float | None = Field(description="generated tokens/s, whole deployment")
    output_tok_s_per_gpu: float | None = Field(description="generated tokens/s per GPU")
    total_tok_s: float | None = Field(description="prompt + generated tokens/s, whole deployment")
    requests_per_s: float | None = Field(description="completed requests per second")
    ttft_ms: float | None = Field(description="time to first token, ms (statistic in ttft_stat)")
    ttft_stat: str | None = Field(description="which statistic ttft_ms is (mean, median, p90, p99, ...)")
    tpot_ms: float | None = Field(description="time per output token after the first, ms (statistic in tpot_stat)")
    tpot_stat: str | None = Field(description="which statistic tpot_ms is")
    itl_ms: float | None = Field(description="inter-token latency, ms (statistic in itl_stat)")
    itl_stat: str | None = Field(description="which statistic itl_ms is")
    e2e_ms: float | None = Field(description="request latency, ms (statistic in e2e_stat)")
    e2e_stat: str | None = Field(description="which statistic e2e_ms is")
    peak_mem_gb: float | None = Field(description="GPU memory as published, GB (may include the preallocated KV cache)")
    orig_gpu: str | None = Field(description="the GPU as the source names it")
    orig_model: str | None = Field(description="the model as the source names it")
    orig_engine: str | None = Field(description="the engine as the source names it")
    notes: str | None = Field(description="remarks on the row")
    submitted_by: str = Field(description="who stored it: catalog (shipped) or key-<digest of the sender's key>")
    created_at: datetime = Field(description="when it was stored (UTC)")


class MeasurementPage(BaseModel):
    total: int = Field(description="measurements matching the filters")
    limit: int = Field(description="page size asked")
    offset: int = Field(description="measurements skipped before this page")
    items: list[MeasurementPublic] = Field(description="this page of measurements")
