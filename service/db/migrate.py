"""Run the Alembic migrations from code (start-up and tests) and check the schema version."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


class SchemaTooNewError(RuntimeError):
    """The database carries a revision this code does not know (a newer release migrated it)."""


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def _current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    known = {s.revision for s in ScriptDirectory.from_config(cfg).walk_revisions()}
    current = _current_revision(engine)
    if current is not None and current not in known:
        raise SchemaTooNewError(
            f"database schema revision {current!r} is unknown to this release "
            f"(known: {sorted(known)}); refusing to start against a newer schema")
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def is_at_head(engine: Engine) -> bool:
    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    return _current_revision(engine) == ScriptDirectory.from_config(cfg).get_current_head()
