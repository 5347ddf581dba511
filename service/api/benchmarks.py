"""POST /v1/benchmarks: users' measurements in (published.csv rows as JSON or CSV, or a benchmark tool's result)."""

from __future__ import annotations

import json
from typing import Annotated, Any, get_args

from fastapi import APIRouter, Depends, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError

from service.api.deps import SessionDep, StateDep, WriterDep
from service.api.predictions import as_problem
from service.api.problems import (
    JSON_MEDIA_TYPE,
    ProblemError,
    empty_body,
    invalid_json,
    not_json_text,
    unsupported_media_type,
)
from service.db.session import finish
from service.errors import InvalidRequest
from service.ingest.store import IngestConflict, answer_after_refit, store
from service.ingest.validate import prepare, rows_from_csv
from service.schemas.benchmarks import (
    ROWS_EXAMPLE,
    VLLM_EXAMPLE,
    IngestRequest,
    IngestResponse,
    RowsIngest,
    ToolIngest,
)

router = APIRouter(prefix="/v1", tags=["benchmarks"])

CSV_MEDIA_TYPE = "text/csv"
_INGEST: TypeAdapter[RowsIngest | ToolIngest] = TypeAdapter(IngestRequest)
_FORMATS = ["rows", *get_args(ToolIngest.model_fields["format"].annotation)]
_CSV_EXAMPLE = ("row_id,source,engine,engine_version,gpu,gpu_count,model,weight_dtype,tp,mode,input_tokens,"
                "output_tokens,concurrency,output_tok_s,ttft_ms,ttft_stat,tpot_ms,tpot_stat\n"
                "lab-a-0002,our lab 2025-09-15,vllm,0.11.0,l40s,1,meta-llama/Llama-3.1-8B-Instruct,fp8,1,concurrency,"
                "1024,128,16,1210.5,180.2,mean,12.1,mean\n")


async def read_body(request: Request) -> bytes:
    """The raw body (JSON or CSV). Its size is bounded by the app-wide MAX_BODY_BYTES (413 past it, before it is
    read: service/api/operations.py)."""
    return await request.body()


def parse_body(raw: bytes, content_type: str) -> RowsIngest | ToolIngest:
    media = content_type.split(";")[0].strip().lower()
    if media == CSV_MEDIA_TYPE:
        try:
            return RowsIngest(format="rows", rows=rows_from_csv(raw))
        except ValidationError as exc:
            raise RequestValidationError(_body_errors(exc)) from exc
    if media and media != JSON_MEDIA_TYPE and not media.endswith("+json"):
        raise unsupported_media_type(content_type, [JSON_MEDIA_TYPE, CSV_MEDIA_TYPE])
    if not raw.strip():
        raise empty_body()
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise invalid_json(exc.msg, exc.doc, exc.pos) from exc
    except ValueError as exc:        # bytes that are not UTF-8, -16 or -32 text
        raise not_json_text(exc) from exc
    try:
        return _INGEST.validate_python(data)
    except ValidationError as exc:
        raise RequestValidationError(_body_errors(exc)) from exc


def _body_errors(exc: ValidationError) -> list[dict[str, Any]]:
    out = []
    for e in exc.errors(include_url=False):
        err: dict[str, Any] = {k: v for k, v in e.items() if k != "input"}  # a result file can be megabytes
        loc = tuple(e["loc"])
        if e["type"] in ("union_tag_invalid", "union_tag_not_found") and not loc:
            loc = ("format",)
            err["ctx"] = {**(e.get("ctx") or {}), "expected_tags": _FORMATS}
            if e["type"] == "union_tag_not_found":
                err["msg"] = f"required: one of {_FORMATS}"
        out.append(err | {"loc": ("body", *loc)})
    return out


@router.post(
    "/benchmarks", status_code=201, response_model=IngestResponse,
    summary="Add measurements: published.csv rows (JSON or CSV), or a benchmark tool's result file",
    responses={200: {"model": IngestResponse, "description": "the same content was stored before: nothing added"},
               401: {"description": "no key"}, 403: {"description": "wrong key"},
               409: {"description": "a row_id or run is stored already with other content"},
               413: {"description": "body too large"}, 415: {"description": "neither JSON nor CSV"},
               422: {"description": "invalid: the problem names the field path and the valid choices"}},
    openapi_extra={"requestBody": {"required": True, "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/BenchmarkIngest"},
                             "examples": {"rows": {"value": ROWS_EXAMPLE},
                                          "vllm_bench_serve": {"value": VLLM_EXAMPLE}}},
        CSV_MEDIA_TYPE: {"schema": {"type": "string", "description": "published.csv header and rows"},
                         "example": _CSV_EXAMPLE}}}})
def post_benchmarks(submitted_by: WriterDep, raw: Annotated[bytes, Depends(read_body)], request: Request,
                    response: Response, state: StateDep, session: SessionDep) -> IngestResponse:
    """Store measurements whole or not at all, and refit the calibration on them.

    - ``{"format": "rows", "rows": [...]}``: rows in the columns of gpu_catalog/data/benchmarks/published.csv; or
      the same rows as a CSV upload (``Content-Type: text/csv``, header row first).
    - ``{"format": "vllm_bench_serve" | "genai_perf" | "trtllm_bench", "model", "deployment", "workload"?,
      "source"?, "result"}``: the tool's result JSON unchanged, with the deployment it measured (as in
      POST /v1/predictions) and workload facts the file lacks.

    201: stored; the answer has the measurement ids and the calibration version the refit produced (only the
    segments holding the new rows are refitted; every other prediction stays as it was). 200 with
    ``duplicate: true``: the same content (SHA-256 of its canonical JSON) was stored before. Each row records who
    sent it (a digest of the key) and when; its ``source_id`` is ``user:<ingest id>``."""
    try:
        body = parse_body(raw, request.headers.get("content-type", ""))
        prepared = prepare(state.current().advisor, body, submitted_by)
        result = store(session, state, prepared, submitted_by)
        if result.created and state.settings.ingest_refit == "sync":
            # the refit process must see the rows: commit them now (the refit covers them even if this worker
            # stops before it answers), then answer with the version the refit produced
            finish(session, ok=True)
            result = answer_after_refit(session, state, result)
    except InvalidRequest as exc:
        raise as_problem(exc) from exc
    except IngestConflict as exc:
        raise ProblemError(409, "Conflict", exc.message, field=exc.field, measurement_id=exc.measurement_id,
                           ingest_id=exc.ingest_id) from exc
    if not result.created:
        response.status_code = 200
    response.headers["Location"] = f"/v1/benchmarks?source={result.response.source_id}"
    return result.response


def install(app: FastAPI) -> None:
    """Add the request body's schema (a union FastAPI does not see: the body is read raw for CSV) to /openapi.json."""
    default = app.openapi

    def openapi() -> dict[str, Any]:
        schema = default()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        if "BenchmarkIngest" not in components:
            body = _INGEST.json_schema(ref_template="#/components/schemas/{model}")
            for name, definition in body.pop("$defs", {}).items():
                components.setdefault(name, definition)
            components["BenchmarkIngest"] = body
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
