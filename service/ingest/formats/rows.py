"""What every benchmark-file parser shares when it builds a row: the offered load, values taken from the file
or the hint, the row id, the notes and the checked ``MeasurementRow``."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import ValidationError

from gpu_catalog.schema import MEASUREMENT_COLUMNS, MeasurementRow
from service.ingest.formats.checks import (
    HINT,
    REL_TOL,
    SOURCE_ID,
    DeploymentInfo,
    FormatError,
    WorkloadHint,
    join,
)


@dataclass
class Load:
    """The offered load of a run: closed-loop cap and/or open-loop rate (None = not set / infinite)."""

    concurrency: int | None
    request_rate: float | None
    used_hint: list[str]

    @property
    def mode(self) -> str:
        if self.concurrency is not None:
            return "concurrency"
        if self.request_rate is not None:
            return "request_rate"
        return "offline"


def reconcile(file_value: float | None, file_states: bool, file_path: str, hint_value: float | None,
               hint_name: str, used: list[str]) -> float | None:
    """The file's value when the file states it (a contradicting hint is an error), else the hint's."""
    if file_states:
        if hint_value is not None and (file_value is None or not math.isclose(file_value, hint_value,
                                                                              rel_tol=REL_TOL)):
            shown = "not set" if file_value is None else file_value
            raise FormatError(join(HINT, hint_name), f"{hint_value} contradicts {file_path} ({shown})")
        return file_value
    if hint_value is not None:
        used.append(hint_name)
    return hint_value


def tokens(measured: float | None, hint_value: float | None, hint_name: str, path: str, used: list[str]) -> float:
    if measured is not None:
        return measured
    if hint_value is None:
        raise FormatError(path, f"required field is missing (or give {HINT}.{hint_name})")
    used.append(hint_name)
    return hint_value


def row_id(fmt: str, run: Any, dep: DeploymentInfo, hint: WorkloadHint) -> str:
    canonical = json.dumps({"format": fmt, "result": run, "deployment": asdict(dep), "hint": asdict(hint)},
                           sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True, default=repr)
    return "user-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def clean(v: Any) -> Any:
    """JSON-safe copy for notes: drops None, empty containers and non-finite numbers."""
    if isinstance(v, Mapping):
        out = {str(k): clean(x) for k, x in v.items()}
        return {k: x for k, x in out.items() if x is not None and x != {} and x != []}
    if isinstance(v, list | tuple):
        return [clean(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v if v is None or isinstance(v, str | int | float | bool) else repr(v)


def notes(tool: str, fmt: str, defined_in: str, **extra: Any) -> str:
    body = clean({"tool": tool, "format": fmt, "format_defined_in": defined_in, **extra})
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)


def latency(value: float | None, zero: list[str], name: str) -> tuple[float | None, str | None]:
    """(value, stat) for a mean latency cell; a zero mean means the tool did not measure it (e.g. no streaming)."""
    if value is None:
        return None, None
    if value == 0:
        zero.append(name)
        return None, None
    return value, "mean"


def finish(fmt: str, run: Any, path: str, dep: DeploymentInfo, hint: WorkloadHint, source: str,
            cells: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(MEASUREMENT_COLUMNS)
    row.update({
        "row_id": row_id(fmt, run, dep, hint),
        "quality": "good",
        "source_id": SOURCE_ID,
        "source": source,
        "engine": dep.engine,
        "engine_version": dep.engine_version,
        "gpu": dep.gpu,
        "gpu_count": dep.gpu_count,
        "model": dep.model,
        "weight_dtype": dep.weight_dtype,
        "kv_dtype": dep.kv_dtype,
        "tp": dep.tp,
        "pp": dep.pp,
        "dp": dep.replicas,
    })
    unknown = set(cells) - set(row)
    if unknown:  # a programming error, not bad input
        raise KeyError(f"not MeasurementRow columns: {sorted(unknown)}")
    row.update(cells)
    try:
        MeasurementRow.model_validate(row)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise FormatError(path, f"does not make a valid measurement row ({loc}: {err['msg']})") from exc
    return row


def dedupe(rows: list[dict[str, Any]], paths: list[str]) -> list[dict[str, Any]]:
    seen: dict[str, str] = {}
    for row, path in zip(rows, paths, strict=True):
        if row["row_id"] in seen:
            raise FormatError(path, f"is the same run as {seen[row['row_id']]}")
        seen[row["row_id"]] = path
    return rows
