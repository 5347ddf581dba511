from __future__ import annotations

from sqlalchemy import Engine, func, inspect, select

from gpu_catalog.loader import read_shipped_rows
from service.db import migrate
from service.db.models import Gpu, Measurement, ModelArch
from service.db.session import make_sessionmaker
from service.startup import migrate_and_load


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def test_upgrade_downgrade_upgrade(engine: Engine) -> None:
    migrate.upgrade(engine)
    assert {"gpus", "models", "model_aliases", "dtypes", "dtype_support", "engines", "measurements",
            "benchmark_sources", "calibrations", "recommendation_requests", "ingests"} <= _tables(engine)
    assert migrate.is_at_head(engine)
    migrate.downgrade(engine, "base")
    assert _tables(engine) == set()
    migrate.upgrade(engine)
    assert migrate.is_at_head(engine)


def test_loading_twice_changes_nothing(engine: Engine) -> None:
    sessions = make_sessionmaker(engine)

    def counts() -> tuple[int, int, int]:
        with sessions() as s:
            return (s.scalar(select(func.count()).select_from(Gpu)) or 0,
                    s.scalar(select(func.count()).select_from(ModelArch)) or 0,
                    s.scalar(select(func.count()).select_from(Measurement)) or 0)

    migrate_and_load(engine, sessions)
    first = counts()
    assert first[0] >= 30 and first[1] >= 40 and first[2] == len(read_shipped_rows())
    migrate_and_load(engine, sessions)
    assert counts() == first


def test_newer_unknown_schema_refuses_to_start(engine: Engine) -> None:
    migrate.upgrade(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999_future'")
    try:
        migrate.upgrade(engine)
    except migrate.SchemaTooNewError as exc:
        assert "9999_future" in str(exc)
    else:
        raise AssertionError("start-up against an unknown newer schema must refuse")
