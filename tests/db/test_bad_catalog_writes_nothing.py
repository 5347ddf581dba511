from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from sqlalchemy import Engine, func, select

from gpu_catalog import loader
from service.db import migrate
from service.db.models import Gpu
from service.db.session import make_sessionmaker
from service.startup import migrate_and_load


def test_bad_catalog_file_is_rejected_before_anything_is_written(
        engine: Engine, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(loader.DATA_DIR, data)
    gpus = yaml.safe_load((data / "gpus.yaml").read_text())
    gpus[0]["architecture"] = "not-an-arch"
    (data / "gpus.yaml").write_text(yaml.safe_dump(gpus))
    with pytest.raises(loader.CatalogError, match="architecture"):
        migrate_and_load(engine, make_sessionmaker(engine), data)
    assert migrate.is_at_head(engine)
    with make_sessionmaker(engine)() as s:
        assert s.scalar(select(func.count()).select_from(Gpu)) == 0
