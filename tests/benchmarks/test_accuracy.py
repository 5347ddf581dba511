"""benchmarks/accuracy.py and GET /v1/calibration report the same leave-one-source-out figures for the same data:
the script on a CSV, the script on the database, and the report the service stores and serves, on a subset of the
shipped measurements (four sources, so the cross-validation takes seconds), on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine

from gpu_catalog.loader import PUBLISHED_CSV, load_catalog, load_cost_constants, load_measurements
from service.calibration.fit import fit_and_store, measurement_set, run_cross_validation
from service.calibration.report import public
from service.core.calibration import MeasurementSet
from service.core.calibration.heldout import held_out_by_family, latency_rows
from service.core.costmodel import Tables, build_tables
from service.db import migrate
from service.db.session import make_sessionmaker, transaction
from service.repository import calibrations as cal_repo
from service.repository.catalog import read_catalog, sync_catalog
from service.repository.measurements import file_sha256, sync_published
from tests.benchmarks.scripts import load_script

# GPUs whose shipped rows come from four sources, both qualities (~200 rows)
SUBSET_GPUS = ("rtx-4090", "a10g", "a100-80gb-pcie")


@pytest.fixture
def subset_csv(tmp_path: Path) -> Path:
    with PUBLISHED_CSV.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        fields = list(reader.fieldnames or [])
        rows = [r for r in reader if r["gpu"] in SUBSET_GPUS]
    assert {r["quality"] for r in rows} == {"good", "weak"}
    assert len({r["source_id"] for r in rows if r["quality"] == "good"}) >= 3
    path = tmp_path / "subset.csv"
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


def _content(ms: MeasurementSet, tables: Tables) -> tuple[Any, ...]:
    """What the cost model sees of each row, with catalog entries by id rather than by index."""
    ids = {"model": tables.model_ids, "gpu": tables.gpu_ids, "wdtype": tables.wdtype_ids,
           "kvdtype": tables.kvdtype_ids}
    cand = {f.name: [ids[f.name][i] for i in getattr(ms.cand, f.name)] if f.name in ids
            else getattr(ms.cand, f.name).tolist() for f in fields(ms.cand)}
    return (ms.row_ids, ms.keys, ms.sources, ms.modes, np.nan_to_num(ms.y, nan=-1.0).tolist(),
            ms.thr_is_total.tolist(), ms.current.tolist(), cand)


def _report(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(path.read_text())
    report.pop("elapsed_s", None)
    return report


def test_script_and_service_report_the_same_held_out_error(engine: Engine, db_url: str, subset_csv: Path,
                                                            tmp_path: Path) -> None:
    constants = load_cost_constants()
    migrate.upgrade(engine)
    sessions = make_sessionmaker(engine)
    with transaction(sessions) as session:
        sync_catalog(session, load_catalog())
        sync_published(session, load_measurements(subset_csv), file_sha256(subset_csv.read_bytes()))
    # the service: the rows it calibrates on, a fitted version, its stored held-out report
    with transaction(sessions) as session:
        catalog = read_catalog(session)
        tables = build_tables(catalog, constants)
        ms = measurement_set(session, catalog, tables, constants)
        version = fit_and_store(session, tables, ms, constants).version
    run_cross_validation(sessions, version, tables, ms, constants)
    with transaction(sessions) as session:
        row = cal_repo.by_version(session, version)
        assert row is not None
        served = public(row, catalog, version)
    assert served.held_out is not None and served.error == served.held_out

    # the script reads the same rows (its catalog from the files, in another order: compared by id)
    accuracy = load_script("accuracy")
    script_tables = build_tables(load_catalog(), constants)
    csv_ms = accuracy.csv_measurements(subset_csv, "good", load_catalog(), script_tables, constants)
    assert _content(csv_ms, script_tables) == _content(ms, tables)

    assert accuracy.main(["--csv", str(subset_csv), "--json", str(tmp_path / "csv.json")]) == 0
    assert accuracy.main(["--database-url", db_url, "--json", str(tmp_path / "db.json")]) == 0
    from_csv, from_db = _report(tmp_path / "csv.json"), _report(tmp_path / "db.json")
    assert from_csv == from_db
    assert from_csv["sources"] == served.held_out.sources >= 3 and from_csv["rows"] == served.held_out.rows
    for name in ("overall", "by_gpu", "by_engine", "by_dtype", "by_mode", "by_segment"):
        figures = getattr(served.held_out, name)
        dumped = figures.model_dump() if name == "overall" else {k: v.model_dump() for k, v in figures.items()}
        assert dumped == from_csv[name], name


def test_rows_csv_holds_each_latency_rows_held_out_prediction(subset_csv: Path, tmp_path: Path) -> None:
    accuracy = load_script("accuracy")
    out = tmp_path / "rows.csv"
    assert accuracy.main(["--csv", str(subset_csv), "--group", "family", "--rows", str(out)]) == 0
    with out.open(encoding="utf-8", newline="") as fh:
        written = {r["row_id"]: r for r in csv.DictReader(fh)}
    # the same held-out fit, computed here: every latency row once, its figures in ms
    constants = load_cost_constants()
    catalog = load_catalog()
    tables = build_tables(catalog, constants)
    ms = accuracy.csv_measurements(subset_csv, "good", catalog, tables, constants)
    pred = held_out_by_family(tables, ms, constants)
    lat = np.flatnonzero(latency_rows(ms))
    assert len(lat) and sorted(written) == sorted(ms.row_ids[i] for i in lat)
    for i in lat:
        row = written[ms.row_ids[i]]
        assert row["family"] == ms.families[i] and row["source"] == ms.sources[i]
        for col, j in (("ttft_ms", 1), ("tpot_ms", 2)):
            if np.isfinite(ms.y[i, j]):
                assert float(row[col]) == pytest.approx(ms.y[i, j] * 1e3, rel=1e-5)
                assert float(row[f"{col}_predicted"]) == pytest.approx(pred[i, j] * 1e3, rel=1e-5)
            else:
                assert row[col] == "" and row[f"{col}_predicted"] == ""


def test_rows_csv_needs_the_family_group(subset_csv: Path, tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        load_script("accuracy").main(["--csv", str(subset_csv), "--group", "source", "--rows", str(tmp_path / "r.csv")])
