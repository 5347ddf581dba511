"""The published lever measurements (benchmarks/lever_measurements.csv): valid, every row sourced and listed."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from gpu_catalog.levers import LEVER_MEASUREMENTS_CSV, load_lever_measurements, mean_accepted_length_tok
from gpu_catalog.loader import CatalogError, load_catalog

SOURCES_MD = LEVER_MEASUREMENTS_CSV.parent / "SOURCES.md"


def _rows() -> list[dict[str, str]]:
    with LEVER_MEASUREMENTS_CSV.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def test_lever_measurements_load_against_the_catalog() -> None:
    rows = load_lever_measurements()
    catalog = load_catalog()
    assert rows and {r.gpu for r in rows} <= {g.id for g in catalog.gpus}
    assert all(catalog.resolve_model(r.model) is not None for r in rows)
    # a quoted mean accepted length is carried as the rate that reproduces it through the chain formula
    quoted = [r for r in rows if r.quoted_accepted_length is not None]
    assert quoted and all(
        r.acceptance_rate is not None
        and abs(mean_accepted_length_tok(r.acceptance_rate, r.num_speculative_tokens) - r.quoted_accepted_length)
        <= 0.005 for r in quoted)


def test_every_lever_measurement_names_a_listed_source() -> None:
    rows = load_lever_measurements()
    text = SOURCES_MD.read_text()
    counts: dict[str, int] = {}
    for r in rows:
        assert len(r.source) > 20 and r.notes
        counts[r.source_id] = counts.get(r.source_id, 0) + 1
    # SOURCES.md lists each source with the number of rows kept from it
    for sid, n in counts.items():
        assert re.search(rf"^\| {re.escape(sid)} \| levers \| {n} \|", text, flags=re.M), sid
    assert all(r.notes.startswith("[weak: ") for r in rows if r.quality == "weak")


def test_a_row_without_a_source_is_refused(tmp_path: Path) -> None:
    rows = _rows()
    rows[0]["source"] = ""
    with pytest.raises(CatalogError, match="source"):
        load_lever_measurements(_write(tmp_path / "levers.csv", rows))


def test_a_speedup_that_disagrees_with_its_throughputs_is_refused(tmp_path: Path) -> None:
    rows = _rows()
    pair = next(r for r in rows if r["value_without"] and r["value_with"])
    pair["speedup"] = str(float(pair["speedup"]) + 0.2)
    with pytest.raises(CatalogError, match="speedup"):
        load_lever_measurements(_write(tmp_path / "levers.csv", rows))


def test_an_unknown_model_is_refused(tmp_path: Path) -> None:
    rows = _rows()
    rows[0]["model"] = "nobody/NoSuchModel-7B"
    with pytest.raises(CatalogError, match="model"):
        load_lever_measurements(_write(tmp_path / "levers.csv", rows))
