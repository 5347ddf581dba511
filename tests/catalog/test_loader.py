from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from gpu_catalog.loader import (
    DATA_DIR,
    PUBLISHED_CSV,
    CatalogError,
    load_catalog,
    load_shipped_measurements,
    read_shipped_rows,
)


def test_shipped_catalog_validates() -> None:
    cat = load_catalog()
    assert len(cat.gpus) >= 30
    assert len(cat.models) >= 40
    assert {"nvidia", "amd"} <= {g.vendor for g in cat.gpus}
    for required in ("t4", "a10", "l4", "h100-sxm", "b200", "mi300x", "gh200-96gb", "b300", "rtx-pro-6000"):
        assert required in {g.id for g in cat.gpus}
    # Every priced GPU names its price list; every model its config source.
    assert all(g.sources.price for g in cat.gpus if g.price_usd_per_gpu_hour)
    assert all(m.source for m in cat.models)


def test_every_benchmark_model_resolves_to_the_catalog() -> None:
    cat = load_catalog()
    names = {n.lower() for m in cat.models for n in (m.id, *m.aliases)}
    rows = load_shipped_measurements()
    assert len(rows) == len(read_shipped_rows()) > len(read_shipped_rows([PUBLISHED_CSV]))
    missing = {r.model for r in rows if r.model.lower() not in names}
    assert missing == set()
    gpu_ids = {g.id for g in cat.gpus}
    assert {r.gpu for r in rows} <= gpu_ids


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "data"
    shutil.copytree(DATA_DIR, dst, ignore=shutil.ignore_patterns("benchmarks"))
    return dst


def test_bad_field_is_named_with_file_and_row(tmp_path: Path) -> None:
    data = _copy(tmp_path)
    gpus = yaml.safe_load((data / "gpus.yaml").read_text())
    gpus[2]["memory_bw_gb_s"] = -5
    (data / "gpus.yaml").write_text(yaml.safe_dump(gpus))
    with pytest.raises(CatalogError) as err:
        load_catalog(data)
    assert err.value.file.endswith("gpus.yaml")
    assert err.value.row == 3
    assert err.value.field == "memory_bw_gb_s"


def test_duplicate_alias_is_rejected(tmp_path: Path) -> None:
    data = _copy(tmp_path)
    path = data / "models" / "part1.yaml"
    models = yaml.safe_load(path.read_text())
    models[1]["aliases"] = [*models[1]["aliases"], models[0]["id"].upper()]
    path.write_text(yaml.safe_dump(models))
    with pytest.raises(CatalogError, match="aliases"):
        load_catalog(data)
