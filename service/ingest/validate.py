"""A POST /v1/benchmarks body -> validated measurement rows and the content hash that detects a second post.

No database here. Every refusal is an ``InvalidRequest`` whose ``field`` is the path into the posted body
(``rows.3.ttft_ms``, ``result.mean_ttft_ms``, ``deployment.gpu``), with the valid choices where there are some.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy import String

from gpu_catalog.schema import MeasurementRow, ModelSpec
from service.db.models import Measurement
from service.engines.registry import ENGINES
from service.errors import InvalidRequest
from service.ingest.formats import PARSERS, DeploymentInfo, FormatError
from service.ingest.formats import WorkloadHint as ParserHint
from service.prediction.advisor import Advisor
from service.schemas.benchmarks import MAX_INGEST_ROWS, MAX_USER_ROW_ID_CHARS, RowsIngest, ToolIngest
from service.schemas.predictions import MAX_CONCURRENCY, MAX_PARALLEL, Deployment, Workload

Path = list[str | int]
USER_ROW_PREFIX = "user:"
# Statistics of a latency column, by what they are (the first word of a *_stat cell).
SAME_STATS = {"mean": "mean", "median": "median", "p50": "median"}
# Relative slack of the consistency checks: published figures are rounded (e.g. to 0.01 tok/s).
REL_TOL = 1e-6
# Longest text each measurement column stores (the row's id and source id are set when it is stored).
_TEXT_LIMITS = {c.name: c.type.length for c in Measurement.__table__.columns
                if isinstance(c.type, String) and c.type.length and c.name not in ("row_id", "source_id")}


@dataclass(frozen=True)
class PreparedIngest:
    format: str
    rows: list[MeasurementRow]
    paths: list[Path]                 # where each row comes from in the body
    families: list[str]               # catalog model family of each row
    content_sha256: str
    source_description: str


def content_sha256(content: Any) -> str:
    """SHA-256 of canonical JSON (sorted keys, no spaces): equal content, equal hash, whatever the layout."""
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def prepare(advisor: Advisor, body: RowsIngest | ToolIngest, submitted_by: str) -> PreparedIngest:
    if isinstance(body, RowsIngest):
        return prepare_rows(advisor, body.rows, submitted_by)
    return prepare_tool(advisor, body, submitted_by)


# --- rows (JSON list or CSV) ------------------------------------------------------------------------------


def rows_from_csv(data: bytes) -> list[dict[str, Any]]:
    """Rows of a CSV upload with the header of published.csv (any subset of its columns, any order)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidRequest(["body"], f"the CSV is not UTF-8 (byte {exc.start})", title="Invalid CSV") from exc
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if not reader.fieldnames:
        raise InvalidRequest(["body"], "the CSV is empty: expected a header row and data rows", title="Invalid CSV")
    unknown = [c for c in reader.fieldnames if c not in MeasurementRow.model_fields]
    if unknown:
        raise InvalidRequest(["body", "header", unknown[0]], f"unknown column '{unknown[0]}'",
                             title="Invalid CSV", valid=list(MeasurementRow.model_fields))
    rows: list[dict[str, Any]] = []
    for i, raw in enumerate(reader):
        if None in raw:
            raise InvalidRequest(["rows", i], f"CSV data row {i + 1} has more cells than the header",
                                 title="Invalid CSV")
        rows.append({k: v for k, v in raw.items() if v is not None})
        if len(rows) > MAX_INGEST_ROWS:
            raise InvalidRequest(["rows"], f"at most {MAX_INGEST_ROWS} rows per post", title="Too many rows")
    if not rows:
        raise InvalidRequest(["rows"], "the CSV has a header but no data rows", title="Invalid CSV")
    return rows


def prepare_rows(advisor: Advisor, posted: Sequence[Mapping[str, Any]], submitted_by: str) -> PreparedIngest:
    rows: list[MeasurementRow] = []
    families: list[str] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(posted):
        row, model = _validate_row(advisor, raw, ["rows", i])
        if row.row_id in seen:
            raise InvalidRequest(["rows", i, "row_id"], f"'{row.row_id}' is also row {seen[row.row_id]}",
                                 title="Duplicate row_id")
        seen[row.row_id] = i
        rows.append(row)
        families.append(model.family)
    sha = content_sha256({"format": "rows", "rows": [r.model_dump(mode="json") for r in rows]})
    stored = [r.model_copy(update={"row_id": _user_row_id(r.row_id)}) for r in rows]
    posted_sources = sorted({r.source_id for r in rows} - {"user"})
    description = f"rows posted to POST /v1/benchmarks by {submitted_by}"
    if posted_sources:
        description += f" (their source_id: {', '.join(posted_sources)})"
    return PreparedIngest("rows", stored, [["rows", i] for i in range(len(rows))], families, sha, description)


def _user_row_id(row_id: str) -> str:
    # Users' ids live apart from the shipped ones, which a later published.csv may add.
    return row_id if row_id.startswith(USER_ROW_PREFIX) else USER_ROW_PREFIX + row_id


def _validate_row(advisor: Advisor, raw: Mapping[str, Any], path: Path) -> tuple[MeasurementRow, ModelSpec]:
    data = dict(raw)
    if data.get("quality") in (None, ""):
        data["quality"] = "good"
    if data.get("source_id") in (None, ""):
        data["source_id"] = "user"
    rid = data.get("row_id")
    if isinstance(rid, str) and len(rid) > MAX_USER_ROW_ID_CHARS:
        raise InvalidRequest([*path, "row_id"], f"at most {MAX_USER_ROW_ID_CHARS} characters", title="Invalid row")
    try:
        row = MeasurementRow.model_validate(data)
    except ValidationError as exc:
        raise _row_error(exc, path) from exc
    _bounded(row, path)
    model = _known_ids(advisor, row, path)
    _consistent(row, model, path)
    _runnable(advisor, row, model, path)
    return row, model


def _row_error(exc: ValidationError, path: Path) -> InvalidRequest:
    err = exc.errors(include_url=False)[0]
    msg = str(err["msg"]).removeprefix("Value error, ")
    if not err["loc"]:
        # the one model-level check of MeasurementRow: tp*pp*dp = gpu_count
        return InvalidRequest([*path, "gpu_count"], msg, title="Invalid layout")
    given = err.get("input")
    if err["type"] != "missing" and not isinstance(given, dict | list):
        msg = f"{msg} (got {given!r})"
    expected = (err.get("ctx") or {}).get("expected")
    return InvalidRequest([*path, *err["loc"]], msg, title="Invalid row", valid=[expected] if expected else None)


def _unknown(path: Path, kind: str, value: str, known: Sequence[str]) -> InvalidRequest:
    valid = sorted(known)
    return InvalidRequest(path, f"unknown {kind} '{value}'; valid: {', '.join(valid)}", title=f"Unknown {kind}",
                          valid=valid)


def _known_ids(advisor: Advisor, row: MeasurementRow, path: Path) -> ModelSpec:
    if row.engine not in advisor.engines:
        raise _unknown([*path, "engine"], "engine", row.engine, list(advisor.engines))
    if row.gpu not in advisor.gpus:
        raise _unknown([*path, "gpu"], "GPU", row.gpu, list(advisor.gpus))
    try:
        model = advisor.model_for(row.model, None)
    except InvalidRequest as exc:
        raise InvalidRequest([*path, "model"], exc.message, title=exc.title, valid=exc.valid) from exc
    if row.weight_dtype is not None and row.weight_dtype not in advisor.weight_dtypes:
        raise _unknown([*path, "weight_dtype"], "weight dtype", row.weight_dtype, list(advisor.weight_dtypes))
    if row.kv_dtype is not None and row.kv_dtype not in advisor.kv_dtypes:
        raise _unknown([*path, "kv_dtype"], "KV dtype", row.kv_dtype, list(advisor.kv_dtypes))
    return model


def _bounded(row: MeasurementRow, path: Path, by_column: bool = True) -> None:
    """Layout and batch sizes within the bounds POST /v1/predictions takes (and a 32-bit integer column holds);
    texts within their columns' lengths."""
    def where(name: str) -> Path:
        if by_column:
            return [*path, name]
        return ["deployment", name] if name in Deployment.model_fields else path

    for name, most in (("tp", MAX_PARALLEL), ("pp", MAX_PARALLEL), ("dp", MAX_PARALLEL), ("ep", MAX_PARALLEL),
                       ("max_batch", MAX_CONCURRENCY)):
        value = getattr(row, name)
        if value is not None and value > most:
            raise InvalidRequest(where(name), f"{name}: at most {most}, got {value}", title="Invalid row")
    for name, chars in _TEXT_LIMITS.items():
        value = getattr(row, name, None)
        if isinstance(value, str) and len(value) > chars:
            raise InvalidRequest(where(name), f"{name}: at most {chars} characters, got {len(value)}",
                                 title="Invalid row")


def _consistent(row: MeasurementRow, model: ModelSpec, path: Path, by_column: bool = True) -> None:
    """Numbers that cannot all be true of one run. ``by_column``: the path ends in the row's column (posted rows);
    else the column is named in the message (rows parsed from a tool's file, whose keys differ)."""

    def bad(name: str, message: str) -> InvalidRequest:
        if by_column:
            return InvalidRequest([*path, name], message, title="Impossible measurement")
        return InvalidRequest(path, f"{name}: {message}", title="Impossible measurement")

    if row.gpu_count and row.tp and row.dp is None and row.gpu_count % (row.tp * (row.pp or 1)):
        raise bad("gpu_count", f"gpu_count {row.gpu_count} is not a multiple of tp x pp = {row.tp * (row.pp or 1)}")
    if row.mode in ("concurrency", "static_batch") and row.concurrency is None:
        raise bad("concurrency", f"required when mode is {row.mode}")
    if row.mode == "request_rate" and row.request_rate is None:
        raise bad("request_rate", "required when mode is request_rate")
    if row.input_tokens and row.output_tokens and row.input_tokens + row.output_tokens > model.max_position_embeddings:
        raise bad("input_tokens", f"input + output = {row.input_tokens + row.output_tokens:g} tokens exceed the "
                  f"{model.max_position_embeddings}-token context window of {model.id}")
    if row.total_tok_s and row.output_tok_s and row.total_tok_s < row.output_tok_s * (1 - REL_TOL):
        raise bad("total_tok_s", f"total (input + output) {row.total_tok_s:g} tok/s is below the output "
                  f"{row.output_tok_s:g} tok/s it includes")
    # Each request's TTFT and TPOT are at most its latency, so their mean (median) is at most the mean (median)
    # latency. Not so for ITL: a mean over token gaps weighs long requests more.
    e2e_stat = _stat(row.e2e_stat)
    if row.e2e_ms and e2e_stat in SAME_STATS:
        for name in ("ttft_ms", "tpot_ms"):
            value, stat = getattr(row, name), _stat(getattr(row, name.replace("_ms", "_stat")))
            if value and SAME_STATS.get(stat) == SAME_STATS[e2e_stat] and value > row.e2e_ms * (1 + REL_TOL):
                raise bad(name, f"{stat} {value:g} ms exceeds the {e2e_stat} request latency e2e_ms "
                          f"{row.e2e_ms:g} ms that contains it")


def _stat(stat: str | None) -> str:
    return str(stat or "").split(" ")[0].lower()


def _runnable(advisor: Advisor, row: MeasurementRow, model: ModelSpec, path: Path) -> None:
    """The deployment checks of POST /v1/predictions (engine on the GPU's vendor, dtype support, tp dividing the
    heads, ...) for a row that states its layout and dtype; multi-node layouts are allowed."""
    if row.tp is None or row.weight_dtype is None or row.engine not in ENGINES:
        return
    pp = row.pp or 1
    replicas = row.dp or (max(row.gpu_count // (row.tp * pp), 1) if row.gpu_count else 1)
    try:
        dep = Deployment(gpu=row.gpu, tp=row.tp, pp=pp, replicas=replicas,
                         ep=row.ep if row.ep and row.ep > 1 else None, weight_dtype=row.weight_dtype,
                         kv_dtype=row.kv_dtype or "auto", engine=row.engine, multi_node=True)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        name = {"replicas": "dp"}.get(str(err["loc"][0]), str(err["loc"][0])) if err["loc"] else "tp"
        raise InvalidRequest([*path, name], str(err["msg"]), title="Invalid row") from exc
    try:
        advisor.check_runnable(model, dep, Workload(input_tokens=1, output_tokens=1, concurrency=1), ["deployment"])
    except InvalidRequest as exc:
        name = {"replicas": "dp"}.get(str(exc.field[-1]), str(exc.field[-1]))
        raise InvalidRequest([*path, name], exc.message, title=exc.title, valid=exc.valid) from exc


# --- result files of benchmark tools ---------------------------------------------------------------------


def _body_path(dotted: str) -> Path:
    """A parser's dotted field path -> the path into the posted body."""
    parts: Path = [int(p) if p.isdigit() else p for p in dotted.split(".")]
    if parts[0] == "hint":
        parts[0] = "workload"
    if parts[:2] == ["deployment", "model"]:
        parts = ["model", *parts[2:]]
    return parts


def _agree(in_file: int | None, given: int | None, path: Path, what: str) -> int | None:
    """The file's value, else the caller's; both and different is a contradiction."""
    if in_file is not None and given is not None and in_file != given:
        raise InvalidRequest(path, f"{given} contradicts {what} ({in_file})", title="Contradicting deployment")
    return in_file if in_file is not None else given


def prepare_tool(advisor: Advisor, body: ToolIngest, submitted_by: str) -> PreparedIngest:
    model = advisor.model_for(body.model, None)
    dep = body.deployment
    if dep.gpu_count is not None and dep.gpu_count != dep.total_gpus:
        raise InvalidRequest(["deployment", "gpu_count"], f"gpu_count {dep.gpu_count} != tp x pp x dp x replicas = "
                             f"{dep.tp} x {dep.pp} x {dep.dp} x {dep.replicas} = {dep.total_gpus}",
                             title="Invalid layout")
    # The release that was measured need not be one the launch renderer knows: any version string is kept.
    advisor.check_runnable(model, dep.model_copy(update={"engine_version": None}),
                           Workload(input_tokens=1, output_tokens=1, concurrency=1), ["deployment"])
    info = DeploymentInfo(model=body.model, gpu=dep.gpu, gpu_count=dep.total_gpus, tp=dep.tp, pp=dep.pp,
                          replicas=dep.replicas, weight_dtype=dep.weight_dtype, kv_dtype=dep.kv_dtype,
                          engine=dep.engine, engine_version=dep.engine_version)
    hint = ParserHint(**body.workload.model_dump())
    source = body.source or f"{body.format} result posted to POST /v1/benchmarks by {submitted_by}"
    try:
        parsed = PARSERS[body.format](body.result, info, hint, source)
    except FormatError as exc:
        raise InvalidRequest(_body_path(exc.field), exc.message, title="Invalid result file") from exc
    paths: list[Path] = [["result", i] for i in range(len(parsed))] if isinstance(body.result, list) else [["result"]]
    engine_args = dep.engine_args.model_dump(exclude_none=True)
    rows: list[MeasurementRow] = []
    for cells, path in zip(parsed, paths, strict=True):
        tokens = cells["input_tokens"] + cells["output_tokens"]
        if tokens > model.max_position_embeddings:
            raise InvalidRequest(path, f"input + output = {tokens:g} tokens exceed the "
                                 f"{model.max_position_embeddings}-token context window of {model.id}",
                                 title="Impossible measurement")
        max_len = dep.engine_args.max_model_len
        if max_len is not None and tokens > max_len:
            raise InvalidRequest(["deployment", "engine_args", "max_model_len"], f"{max_len} is shorter than the "
                                 f"measured input + output = {tokens:g} tokens", title="Impossible measurement")
        notes = json.loads(cells["notes"]) if cells.get("notes") else {}
        if engine_args:
            notes["engine_args"] = engine_args
        cells.update({
            "model_family": model.family,
            "ep": _agree(cells.get("ep"), dep.ep, ["deployment", "ep"], "the file's expert-parallel size"),
            "max_batch": _agree(cells.get("max_batch"), dep.engine_args.max_num_seqs,
                                ["deployment", "engine_args", "max_num_seqs"], "the file's maximum batch size"),
            "notes": json.dumps(notes, sort_keys=True, separators=(",", ":")),
        })
        row = MeasurementRow.model_validate(cells)
        _bounded(row, path, by_column=False)
        _consistent(row, model, path, by_column=False)
        rows.append(row)
    sha = content_sha256({"format": body.format, "model": body.model, "deployment": dep.model_dump(mode="json"),
                          "workload": body.workload.model_dump(mode="json"), "result": body.result})
    description = source if body.source else f"{body.format} result posted by {submitted_by}"
    return PreparedIngest(body.format, rows, paths, [model.family] * len(rows), sha, description)
