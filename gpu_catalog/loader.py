"""Reads and validates the catalog data files.

Everything is validated before anything is returned, so a caller that writes the result to the
database never writes half a catalog. A bad value raises ``CatalogError`` naming the file, the row
(1-based entry number, or CSV data-row number) and the field.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from gpu_catalog.schema import (
    CostConstants,
    EngineSpec,
    GpuSpec,
    KvDtypeSpec,
    MeasurementRow,
    ModelSpec,
    SupportRow,
    WeightDtypeSpec,
)

DATA_DIR = Path(__file__).resolve().parent / "data"
PUBLISHED_CSV = DATA_DIR / "benchmarks" / "published.csv"
DENSE_LATENCY_CSV = DATA_DIR / "benchmarks" / "dense_latency.csv"
# Every shipped measurement file (same columns; row ids unique across all of them), see benchmarks/SOURCES.md.
SHIPPED_CSVS: tuple[Path, ...] = (PUBLISHED_CSV, DENSE_LATENCY_CSV)

M = TypeVar("M", bound=BaseModel)


class CatalogError(ValueError):
    """A catalog file failed validation."""

    def __init__(self, file: Path | str, row: int | None, field_name: str | None, message: str) -> None:
        self.file = str(file)
        self.row = row
        self.field = field_name
        self.message = message
        where = self.file
        if row is not None:
            where += f", row {row}"
        if field_name:
            where += f", field '{field_name}'"
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Catalog:
    gpus: list[GpuSpec]
    models: list[ModelSpec]
    weight_dtypes: list[WeightDtypeSpec]
    kv_dtypes: list[KvDtypeSpec]
    engines: list[EngineSpec]
    support: list[SupportRow]
    content_sha256: str = field(default="")

    @cached_property
    def _model_by_name(self) -> dict[str, ModelSpec]:
        return {n.lower(): m for m in self.models for n in (m.id, *m.aliases)}

    @cached_property
    def _support_levels(self) -> dict[tuple[str, str], dict[tuple[str, str], str]]:
        out: dict[tuple[str, str], dict[tuple[str, str], str]] = {}
        for r in self.support:
            out.setdefault((r.engine, r.architecture), {})[(r.kind, r.dtype)] = r.level
        return out

    def support_levels(self, engine: str, architecture: str) -> dict[tuple[str, str], str]:
        """What ``engine`` runs on ``architecture``: (kind, dtype) -> support level (read-only: shared)."""
        return self._support_levels.get((engine, architecture), {})

    def resolve_model(self, name: str) -> ModelSpec | None:
        """The architecture an HF repo id (any case; base, instruct, chat or alias) names, if known."""
        return self._model_by_name.get(name.lower())

    def model_names(self) -> list[str]:
        return [n for m in self.models for n in (m.id, *m.aliases)]


# libyaml's loader where PyYAML was built with it: the same documents as yaml.SafeLoader (the catalog's files
# load equal under both), parsed ~7x faster (0.06 vs 0.40 s for the ten files of gpu_catalog/data).
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_yaml(stream: Any) -> Any:
    """``yaml.safe_load``, by libyaml where it is available."""
    return yaml.load(stream, Loader=_YAML_LOADER)  # a safe loader: SafeLoader or its C twin


def _read_yaml(path: Path) -> Any:
    try:
        with path.open(encoding="utf-8") as fh:
            return parse_yaml(fh)
    except yaml.YAMLError as exc:
        raise CatalogError(path, None, None, f"not valid YAML: {exc}") from exc


def _validate(model: type[M], entries: Any, path: Path, key: str | None = None) -> list[M]:
    if key is not None:
        if not isinstance(entries, dict) or key not in entries:
            raise CatalogError(path, None, key, "missing top-level key")
        entries = entries[key]
    if not isinstance(entries, list):
        raise CatalogError(path, None, key, "expected a list of entries")
    out: list[M] = []
    for i, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict):
            raise CatalogError(path, i, None, "entry is not a mapping")
        try:
            out.append(model.model_validate(entry))
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"]) or None
            raise CatalogError(path, i, loc, err["msg"]) from exc
    return out


def _unique(items: Iterable[str], path: Path, what: str) -> None:
    seen: set[str] = set()
    for i, item in enumerate(items, start=1):
        if item in seen:
            raise CatalogError(path, i, what, f"duplicate {what} '{item}'")
        seen.add(item)


def _support_rows(raw: Any, path: Path) -> list[SupportRow]:
    if not isinstance(raw, dict) or "sources" not in raw:
        raise CatalogError(path, None, "sources", "missing top-level key")
    rows: list[SupportRow] = []
    sources: dict[str, str] = raw["sources"]
    n = 0
    for kind in ("weight", "kv"):
        for engine, by_dtype in (raw.get(kind) or {}).items():
            for dtype, levels in by_dtype.items():
                for level, archs in levels.items():
                    for arch in archs:
                        n += 1
                        try:
                            rows.append(SupportRow(engine=engine, kind=kind, dtype=dtype, architecture=arch,
                                                   level=level, source=sources.get(engine, "")))
                        except ValidationError as exc:
                            err = exc.errors()[0]
                            raise CatalogError(path, n, f"{kind}.{engine}.{dtype}.{level}", err["msg"]) from exc
    return rows


def catalog_files(data_dir: Path = DATA_DIR) -> list[Path]:
    return sorted([*data_dir.glob("*.yaml"), *(data_dir / "models").glob("*.yaml")])


def files_sha256(paths: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    for p in paths:
        digest.update(p.name.encode())
        digest.update(p.read_bytes())
    return digest.hexdigest()


def load_catalog(data_dir: Path = DATA_DIR) -> Catalog:
    gpus_path = data_dir / "gpus.yaml"
    gpus = _validate(GpuSpec, _read_yaml(gpus_path), gpus_path)
    _unique((g.id for g in gpus), gpus_path, "id")

    models: list[ModelSpec] = []
    for path in sorted((data_dir / "models").glob("*.yaml")):
        models.extend(_validate(ModelSpec, _read_yaml(path), path))
    models_dir = data_dir / "models"
    _unique((m.id.lower() for m in models), models_dir, "id")
    _unique((m.family for m in models), models_dir, "family")
    _unique([n.lower() for m in models for n in (m.id, *m.aliases)], models_dir, "aliases")

    dtypes_path = data_dir / "dtypes.yaml"
    raw_dtypes = _read_yaml(dtypes_path)
    weight = _validate(WeightDtypeSpec, raw_dtypes, dtypes_path, "weight_dtypes")
    kv = _validate(KvDtypeSpec, raw_dtypes, dtypes_path, "kv_dtypes")
    _unique((d.id for d in weight), dtypes_path, "id")
    _unique((d.id for d in kv), dtypes_path, "id")

    engines_path = data_dir / "engines.yaml"
    engines = _validate(EngineSpec, _read_yaml(engines_path), engines_path, "engines")
    _unique((e.id for e in engines), engines_path, "id")

    support_path = data_dir / "support.yaml"
    support = _support_rows(_read_yaml(support_path), support_path)
    engine_ids = {e.id for e in engines}
    known = {"weight": {d.id for d in weight}, "kv": {d.id for d in kv}}
    for i, row in enumerate(support, start=1):
        if row.engine not in engine_ids:
            raise CatalogError(support_path, i, "engine", f"unknown engine '{row.engine}'")
        if row.dtype not in known[row.kind]:
            raise CatalogError(support_path, i, "dtype", f"unknown {row.kind} dtype '{row.dtype}'")

    return Catalog(gpus=gpus, models=models, weight_dtypes=weight, kv_dtypes=kv, engines=engines,
                   support=support, content_sha256=files_sha256(catalog_files(data_dir)))


def load_cost_constants(data_dir: Path = DATA_DIR) -> CostConstants:
    """The cost model's planning constants (costmodel.yaml), validated."""
    path = data_dir / "costmodel.yaml"
    return _validate(CostConstants, [_read_yaml(path)], path)[0]


def parse_measurement_rows(rows: Iterable[dict[str, Any]], origin: str) -> list[MeasurementRow]:
    """Validate measurement rows (CSV data rows or JSON objects); row numbers are 1-based."""
    return _validate(MeasurementRow, list(rows), Path(origin))


def load_measurements(path: Path = PUBLISHED_CSV) -> list[MeasurementRow]:
    with path.open(encoding="utf-8", newline="") as fh:
        rows = parse_measurement_rows(csv.DictReader(fh), str(path))
    _unique((r.row_id for r in rows), path, "row_id")
    return rows


def load_shipped_measurements(paths: Sequence[Path] = SHIPPED_CSVS) -> list[MeasurementRow]:
    """The rows of every shipped measurement file, validated; a row id may appear in only one of them."""
    rows = [r for path in paths for r in load_measurements(path)]
    _unique((r.row_id for r in rows), paths[0].parent, "row_id")
    return rows


def read_shipped_rows(paths: Sequence[Path] = SHIPPED_CSVS) -> list[dict[str, str]]:
    """The shipped measurement files' rows as CSV dicts (what the calibration scripts read)."""
    rows: list[dict[str, str]] = []
    for path in paths:
        with path.open(encoding="utf-8", newline="") as fh:
            rows.extend(csv.DictReader(fh))
    return rows
