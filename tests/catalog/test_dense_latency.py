"""The shipped dense-model latency file: valid for the loader, every row sourced, no row repeating another."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from gpu_catalog.loader import DENSE_LATENCY_CSV, PUBLISHED_CSV, CatalogError, load_catalog, load_measurements

SOURCES_MD = DENSE_LATENCY_CSV.parent / "SOURCES.md"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _listed_sources() -> set[str]:
    return set(re.findall(r"^\| ([a-z0-9_.-]+) \| calibration \|", SOURCES_MD.read_text(), flags=re.M))


def test_dense_latency_validates_against_the_loader_schema() -> None:
    rows = load_measurements(DENSE_LATENCY_CSV)
    cat = load_catalog()
    names = {n.lower() for m in cat.models for n in (m.id, *m.aliases)}
    assert rows and all(r.model.lower() in names for r in rows)
    assert {r.gpu for r in rows} <= {g.id for g in cat.gpus}
    assert all(r.ttft_ms or r.tpot_ms or r.itl_ms for r in rows)  # a latency file: every row has a latency
    assert all(r.row_id.startswith("dl-") for r in rows)


def test_every_dense_latency_row_names_a_listed_source() -> None:
    rows = load_measurements(DENSE_LATENCY_CSV)
    listed = _listed_sources()
    assert all(len(r.source) > 20 and r.source_id in listed for r in rows)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.source_id] = counts.get(r.source_id, 0) + 1
    # SOURCES.md states how many rows each source kept
    for sid, n in counts.items():
        assert re.search(rf"^\| {re.escape(sid)} \| calibration \| {n} \|", SOURCES_MD.read_text(), flags=re.M)
    weak = [r for r in rows if r.quality == "weak"]
    assert all((r.notes or "").startswith("[weak: ") for r in weak)


def test_burst_latencies_are_not_fitted() -> None:
    # all-at-once runs: their TTFT/TPOT depend on how many requests were sent together, which no column carries
    bursts = [r for r in load_measurements(DENSE_LATENCY_CSV)
              if r.mode == "offline" and (r.ttft_ms or r.tpot_ms or r.itl_ms)]
    assert bursts and all(r.quality == "weak" and "all-at-once burst" in (r.notes or "") for r in bursts)


def _key(r: dict[str, str]) -> tuple[str, ...]:
    # TTFT with TPOT identifies a run; a TTFT alone only together with where it was measured
    if r["ttft_ms"] and r["tpot_ms"]:
        return (r["ttft_ms"], r["tpot_ms"])
    return (r["gpu"], r["model"].lower(), r["tp"], r["input_tokens"], r["ttft_ms"], r["itl_ms"])


def test_no_dense_latency_row_repeats_a_published_latency() -> None:
    published = {_key(r) for r in _rows(PUBLISHED_CSV) if r["ttft_ms"] or r["tpot_ms"]}
    ours = [_key(r) for r in _rows(DENSE_LATENCY_CSV)]
    assert not published & set(ours)
    assert len(set(ours)) == len(ours)


def test_a_row_without_a_source_is_refused(tmp_path: Path) -> None:
    rows = _rows(DENSE_LATENCY_CSV)
    rows[0]["source"] = ""
    bad = tmp_path / "dense_latency.csv"
    with bad.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(CatalogError, match="source"):
        load_measurements(bad)
