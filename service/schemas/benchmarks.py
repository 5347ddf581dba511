"""Request and response bodies of POST /v1/benchmarks (SPEC.md): rows, or a benchmark tool's result file."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.schemas.predictions import MAX_CONCURRENCY, MAX_REQUEST_RATE_PER_S, MAX_TOKENS_PER_REQUEST, Deployment

# One post holds at most this many rows (published.csv has ~10k in ~9 MB; the body limit, MAX_BODY_BYTES, binds first).
MAX_INGEST_ROWS = 20_000
# Longest row_id a caller may give: stored as "user:" + row_id in a 200-character column.
MAX_USER_ROW_ID_CHARS = 190

# Examples for /docs; the vLLM one is abridged from tests/fixtures/bench/vllm_bench_serve.json (simulated numbers).
ROWS_EXAMPLE: dict[str, Any] = {
    "format": "rows",
    "rows": [{"row_id": "lab-a-0001", "source": "our lab, vllm bench serve 2025-09-15", "engine": "vllm",
              "engine_version": "0.11.0", "gpu": "l40s", "gpu_count": 1,
              "model": "meta-llama/Llama-3.1-8B-Instruct",
              "weight_dtype": "fp8", "kv_dtype": "auto", "tp": 1, "pp": 1, "dp": 1, "mode": "concurrency",
              "input_tokens": 1024, "output_tokens": 128, "concurrency": 16, "output_tok_s": 1210.5,
              "ttft_ms": 180.2, "ttft_stat": "mean", "tpot_ms": 12.1, "tpot_stat": "mean"}],
}

VLLM_EXAMPLE: dict[str, Any] = {
    "format": "vllm_bench_serve",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "deployment": {"gpu": "h100-sxm", "gpu_count": 1, "tp": 1, "weight_dtype": "bf16", "kv_dtype": "auto",
                   "engine": "vllm", "engine_version": "0.11.0"},
    "result": {"request_rate": "inf", "max_concurrency": 16, "completed": 200, "total_input_tokens": 204800,
               "total_output_tokens": 25600, "request_throughput": 15.53, "output_throughput": 1988.3,
               "total_token_throughput": 17894.7, "mean_ttft_ms": 70.9, "median_ttft_ms": 70.8,
               "p99_ttft_ms": 109.9, "mean_tpot_ms": 7.22, "median_tpot_ms": 7.15, "p99_tpot_ms": 7.63},
}


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class IngestDeployment(Deployment):
    """The measured deployment, as in POST /v1/predictions. ``engine_version`` is the release that was run (any
    version string; releases before the generation the service targets are read with their own defaults);
    ``engine_args.max_num_seqs`` is stored as the row's ``max_batch``."""

    def _count(self) -> IngestDeployment:  # type: ignore[override]
        # Replaces Deployment's model-level check: the ingest checks tp x pp x replicas = gpu_count itself, so
        # that the 422 names deployment.gpu_count rather than the whole deployment.
        return self


class WorkloadHint(_Body):
    """Workload facts the tool's file does not record; the file's own values win (a contradicting hint is a 422)."""

    input_tokens: float | None = Field(default=None, gt=0, le=MAX_TOKENS_PER_REQUEST,
                                       description="mean prompt length, tokens")
    output_tokens: float | None = Field(default=None, gt=0, le=MAX_TOKENS_PER_REQUEST,
                                        description="mean generated length, tokens")
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY,
                                    description="closed loop: clients (e.g. trtllm-bench --concurrency)")
    request_rate: float | None = Field(default=None, gt=0, le=MAX_REQUEST_RATE_PER_S,
                                       description="open loop: Poisson arrivals, requests per second")


class RowsIngest(_Body):
    """Rows in the columns of shared/benchmarks/published.csv, validated exactly as the shipped rows are, plus the
    catalog's ids. ``quality`` defaults to ``good`` (``weak`` rows are stored but not fitted); ``source_id`` may be
    left out (every stored row gets ``user:<ingest id>``: one source for leave-one-source-out); ``row_id`` is
    stored as ``user:<row_id>``, apart from the shipped ids."""

    format: Literal["rows"] = Field(description="rows: measurements in the columns of shared/benchmarks/published.csv")
    rows: list[dict[str, Any]] = Field(
        min_length=1, max_length=MAX_INGEST_ROWS,
        description="the rows, each an object of published.csv columns (row_id, source, engine, gpu, model, mode, "
                    "input_tokens, output_tokens, output_tok_s, ttft_ms ...)")

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [ROWS_EXAMPLE]})


class ToolIngest(_Body):
    """A benchmark tool's result file as the tool wrote it, with the deployment it measured."""

    format: Literal["vllm_bench_serve", "genai_perf", "trtllm_bench"] = Field(
        description="vllm_bench_serve: `vllm bench serve --save-result` JSON (a list for --append-result files); "
        "genai_perf: GenAI-Perf/AIPerf profile_export_genai_perf.json; trtllm_bench: `trtllm-bench throughput "
        "--report_json` report")
    model: str = Field(description="HF repo id of the measured model (GET /v1/models)",
                       examples=["meta-llama/Llama-3.1-8B-Instruct"])
    deployment: IngestDeployment = Field(description="the deployment that was measured, as in POST /v1/predictions")
    workload: WorkloadHint = Field(default_factory=WorkloadHint, description="workload facts the file does not record")
    source: str | None = Field(default=None, min_length=3, max_length=2000,
                               description="where the result comes from (default: the tool and the sender)")
    result: dict[str, Any] | list[dict[str, Any]] = Field(description="the tool's result JSON, unchanged")

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [VLLM_EXAMPLE]})

    @model_validator(mode="after")
    def _one_result(self) -> ToolIngest:
        if isinstance(self.result, list) and self.format != "vllm_bench_serve":
            raise ValueError(f"result: {self.format} writes one JSON object per run; only vllm_bench_serve "
                             "(--append-result) takes a list")
        return self


IngestRequest = Annotated[RowsIngest | ToolIngest, Field(discriminator="format")]


class CalibrationOutcome(BaseModel):
    refit: Literal["done", "pending"] = Field(
        default="done", description="done: the fields below describe the refit; pending: it runs after this answer "
        "(INGEST_REFIT=background, or a refit that outlasted INGEST_REFIT_WAIT_S) and GET /v1/calibration shows the "
        "new version once stored")
    version: int | None = Field(description="the calibration version in use after this ingest (while the refit "
                                "is pending: the one in use now)")
    previous_version: int | None = Field(description="the version before it")
    refitted: bool = Field(description="false when no stored row could be scored (the calibration is unchanged)")
    refitted_segments: list[str] = Field(
        description="segments fitted again on their rows, old and new; every other segment is unchanged")
    scored_rows: int = Field(description="rows of this ingest the cost model scores")
    not_scored: dict[str, int] = Field(description="rows of this ingest the cost model cannot score, by reason")
    fit_s: float | None = Field(default=None, description="seconds the refit took")
    held_out: Literal["pending", "computed", "off"] = Field(
        description="leave-one-source-out error of the new version: computing in the background, computed, or "
        "not computed (calibration_cv=off: GET /v1/calibration shows in-sample errors)")


class IngestResponse(BaseModel):
    ingest_id: int = Field(description="id of this ingest (its rows' source_id is user:<ingest_id>)")
    duplicate: bool = Field(description="true when the same content was stored before: nothing was added")
    format: str = Field(description="the format posted")
    content_sha256: str = Field(description="SHA-256 of the canonical JSON of the content (the duplicate key)")
    source_id: str = Field(description="source_id of the stored rows (GET /v1/benchmarks?source=...)")
    submitted_by: str = Field(description="who sent it: a digest of the key, never the key")
    created_at: datetime = Field(description="when it was stored (UTC)")
    measurement_ids: list[int] = Field(description="ids of the stored measurements, in the order posted")
    row_ids: list[str] = Field(description="row ids of the stored measurements, as stored (user:<row_id>)")
    calibration_version: int | None = Field(
        description="the calibration version this ingest produced (null while its refit is pending)")
    calibration: CalibrationOutcome | None = Field(
        default=None, description="what the refit did (absent for a duplicate)")
