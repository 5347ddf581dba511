"""ORM models. The schema itself comes only from the Alembic migrations in migrations/versions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.db.base import Base


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(dt: datetime) -> datetime:
    """SQLite hands DateTime(timezone=True) values back naive; every stored one is UTC."""
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware timestamp on every database: SQLite stores no offset and hands values back naive,
    so they are read back as the UTC they were written in (an answer's ``created_at`` is then a valid
    RFC 3339 date-time, with its offset, on SQLite as on PostgreSQL). Same DDL as DateTime(timezone=True)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value)


class Gpu(Base):
    __tablename__ = "gpus"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    vendor: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(128))
    architecture: Mapped[str] = mapped_column(String(32))
    compute_capability: Mapped[str | None] = mapped_column(String(16))
    memory_gb: Mapped[float] = mapped_column(Float)
    memory_type: Mapped[str] = mapped_column(String(32))
    memory_bw_gb_s: Mapped[float] = mapped_column(Float)
    dense_tflops: Mapped[dict[str, float]] = mapped_column(JSON)
    fp32_tflops: Mapped[float | None] = mapped_column(Float)
    interconnect: Mapped[str] = mapped_column(String(32))
    interconnect_bw_gb_s_bidir: Mapped[float] = mapped_column(Float)
    pcie_bw_gb_s_bidir: Mapped[float] = mapped_column(Float)
    max_gpus_per_node: Mapped[int] = mapped_column(Integer)
    nvlink_domain_gpus: Mapped[int | None] = mapped_column(Integer)
    tdp_w: Mapped[float | None] = mapped_column(Float)
    price_usd_per_gpu_hour: Mapped[float | None] = mapped_column(Float)
    sources: Mapped[dict[str, Any]] = mapped_column(JSON)
    notes: Mapped[str] = mapped_column(Text, default="")


class ModelArch(Base):
    __tablename__ = "models"

    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    family: Mapped[str] = mapped_column(String(100), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    model_type: Mapped[str] = mapped_column(String(64))
    num_layers: Mapped[int] = mapped_column(Integer)
    hidden_size: Mapped[int] = mapped_column(Integer)
    intermediate_size: Mapped[int] = mapped_column(Integer)
    num_attention_heads: Mapped[int] = mapped_column(Integer)
    num_kv_heads: Mapped[int] = mapped_column(Integer)
    head_dim: Mapped[int] = mapped_column(Integer)
    vocab_size: Mapped[int] = mapped_column(Integer)
    max_position_embeddings: Mapped[int] = mapped_column(Integer)
    tie_word_embeddings: Mapped[bool] = mapped_column(Boolean)
    num_experts: Mapped[int | None] = mapped_column(Integer)
    num_shared_experts: Mapped[int | None] = mapped_column(Integer)
    experts_per_token: Mapped[int | None] = mapped_column(Integer)
    moe_intermediate_size: Mapped[int | None] = mapped_column(Integer)
    first_k_dense_layers: Mapped[int | None] = mapped_column(Integer)
    mla_kv_lora_rank: Mapped[int | None] = mapped_column(Integer)
    mla_q_lora_rank: Mapped[int | None] = mapped_column(Integer)
    mla_qk_rope_head_dim: Mapped[int | None] = mapped_column(Integer)
    mla_qk_nope_head_dim: Mapped[int | None] = mapped_column(Integer)
    mla_v_head_dim: Mapped[int | None] = mapped_column(Integer)
    sliding_window_tokens: Mapped[int | None] = mapped_column(Integer)
    sliding_window_layers: Mapped[int | None] = mapped_column(Integer)
    linear_attention_layers: Mapped[int | None] = mapped_column(Integer)
    parallel_attention: Mapped[bool] = mapped_column(Boolean, default=False)
    total_params_b: Mapped[float] = mapped_column(Float)
    active_params_b: Mapped[float] = mapped_column(Float)
    source: Mapped[str] = mapped_column(Text)
    notes: Mapped[str] = mapped_column(Text, default="")

    aliases: Mapped[list[ModelAlias]] = relationship(
        back_populates="model", cascade="all, delete-orphan", order_by="ModelAlias.alias")


class ModelAlias(Base):
    __tablename__ = "model_aliases"

    alias_lower: Mapped[str] = mapped_column(String(200), primary_key=True)
    alias: Mapped[str] = mapped_column(String(200))
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)

    model: Mapped[ModelArch] = relationship(back_populates="aliases")


class Dtype(Base):
    """Weight and KV-cache dtypes (``kind`` tells which)."""

    __tablename__ = "dtypes"

    kind: Mapped[str] = mapped_column(String(8), primary_key=True)
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    bits: Mapped[float] = mapped_column(Float)
    native_compute: Mapped[str | None] = mapped_column(String(8))
    fallback_compute: Mapped[str | None] = mapped_column(String(8))
    activation_bits: Mapped[int | None] = mapped_column(Integer)
    quality: Mapped[str] = mapped_column(String(16))
    quality_note: Mapped[str] = mapped_column(Text, default="")
    source: Mapped[str] = mapped_column(Text)


class Engine(Base):
    __tablename__ = "engines"

    id: Mapped[str] = mapped_column(String(16), primary_key=True)
    name: Mapped[str] = mapped_column(String(64))
    vendors: Mapped[list[str]] = mapped_column(JSON)
    default_version: Mapped[str] = mapped_column(String(32))
    versions: Mapped[list[str]] = mapped_column(JSON)
    source: Mapped[str] = mapped_column(Text)


class DtypeSupport(Base):
    __tablename__ = "dtype_support"

    engine: Mapped[str] = mapped_column(ForeignKey("engines.id", ondelete="CASCADE"), primary_key=True)
    kind: Mapped[str] = mapped_column(String(8), primary_key=True)
    dtype: Mapped[str] = mapped_column(String(32), primary_key=True)
    architecture: Mapped[str] = mapped_column(String(32), primary_key=True)
    level: Mapped[str] = mapped_column(String(16))
    source: Mapped[str] = mapped_column(Text)


class BenchmarkSource(Base):
    __tablename__ = "benchmark_sources"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    description: Mapped[str] = mapped_column(Text)
    shipped: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class Ingest(Base):
    """One accepted POST /v1/benchmarks body (or the shipped file): stored whole or not at all."""

    __tablename__ = "ingests"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    content_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    format: Mapped[str] = mapped_column(String(32))
    submitted_by: Mapped[str] = mapped_column(String(128))
    row_count: Mapped[int] = mapped_column(Integer)
    calibration_version: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class Measurement(Base):
    """One measurement, every column of gpu_catalog/data/benchmarks/published.csv plus its provenance here."""

    __tablename__ = "measurements"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    row_id: Mapped[str] = mapped_column(String(200), unique=True)
    quality: Mapped[str] = mapped_column(String(8))
    source_id: Mapped[str] = mapped_column(ForeignKey("benchmark_sources.id"), index=True)
    source: Mapped[str] = mapped_column(Text)
    engine: Mapped[str] = mapped_column(String(32), index=True)
    engine_version: Mapped[str | None] = mapped_column(String(128))
    gpu: Mapped[str] = mapped_column(String(64), index=True)
    gpu_count: Mapped[int | None] = mapped_column(Integer)
    model: Mapped[str] = mapped_column(String(200), index=True)
    model_family: Mapped[str | None] = mapped_column(String(100))
    model_id: Mapped[str | None] = mapped_column(ForeignKey("models.id"), index=True)
    weight_dtype: Mapped[str | None] = mapped_column(String(32), index=True)
    kv_dtype: Mapped[str | None] = mapped_column(String(32))
    tp: Mapped[int | None] = mapped_column(Integer)
    pp: Mapped[int | None] = mapped_column(Integer)
    dp: Mapped[int | None] = mapped_column(Integer)
    ep: Mapped[int | None] = mapped_column(Integer)
    mode: Mapped[str | None] = mapped_column(String(16))
    input_tokens: Mapped[float | None] = mapped_column(Float)
    output_tokens: Mapped[float | None] = mapped_column(Float)
    concurrency: Mapped[float | None] = mapped_column(Float)
    request_rate: Mapped[float | None] = mapped_column(Float)
    max_batch: Mapped[int | None] = mapped_column(Integer)
    output_tok_s: Mapped[float | None] = mapped_column(Float)
    output_tok_s_per_gpu: Mapped[float | None] = mapped_column(Float)
    total_tok_s: Mapped[float | None] = mapped_column(Float)
    requests_per_s: Mapped[float | None] = mapped_column(Float)
    ttft_ms: Mapped[float | None] = mapped_column(Float)
    ttft_stat: Mapped[str | None] = mapped_column(String(128))
    tpot_ms: Mapped[float | None] = mapped_column(Float)
    tpot_stat: Mapped[str | None] = mapped_column(String(128))
    itl_ms: Mapped[float | None] = mapped_column(Float)
    itl_stat: Mapped[str | None] = mapped_column(String(128))
    e2e_ms: Mapped[float | None] = mapped_column(Float)
    e2e_stat: Mapped[str | None] = mapped_column(String(128))
    peak_mem_gb: Mapped[float | None] = mapped_column(Float)
    orig_gpu: Mapped[str | None] = mapped_column(Text)
    orig_model: Mapped[str | None] = mapped_column(Text)
    orig_engine: Mapped[str | None] = mapped_column(Text)
    notes: Mapped[str | None] = mapped_column(Text)
    ingest_id: Mapped[int | None] = mapped_column(ForeignKey("ingests.id"), index=True)
    submitted_by: Mapped[str] = mapped_column(String(128), default="catalog")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class Calibration(Base):
    """One fitted version of the cost-model parameters; the newest is current."""

    __tablename__ = "calibrations"

    version: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    data_sha256: Mapped[str] = mapped_column(String(64), index=True)
    n_measurements: Mapped[int] = mapped_column(Integer)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class RecommendationRecord(Base):
    __tablename__ = "recommendation_requests"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    # read back as a dict; written as the answer's JSON text (session.JSONText), encoded once for the response
    response: Mapped[Any] = mapped_column(JSON)
    calibration_version: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class CatalogState(Base):
    """Content hash of each loaded data set, so start-up reloads only what changed."""

    __tablename__ = "catalog_state"
    __table_args__ = (UniqueConstraint("name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64))
    content_sha256: Mapped[str] = mapped_column(String(64))
    loaded_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
