"""Runtime settings, read from the environment (and a .env file if present)."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    database_url: str = Field(
        default="sqlite:///./llm_deploy_advisor.db",
        description="SQLAlchemy URL; PostgreSQL as postgresql+psycopg://user@host:5432/db",
    )
    auto_migrate: bool = Field(default=True, description="migrate and load the catalog at start-up")
    advisor_api_key: SecretStr | None = Field(
        default=None, description="comma-separated keys that may write (Bearer token)")
    advisor_read_key: SecretStr | None = Field(default=None, description="if set, reads need a key too")
    log_level: str = Field(default="INFO")
    calibration_cv: Literal["background", "sync", "off"] = Field(
        default="background",
        description="leave-one-source-out error of a new calibration: computed in a separate low-priority "
        "process after start-up (background), before serving (sync), or not at all (off: in-sample errors only; "
        "`python -m service.calibration.jobs` computes it on demand)")
    ingest_refit: Literal["sync", "background", "inline"] = Field(
        default="sync",
        description="the calibration refit after POST /v1/benchmarks. sync: the rows are committed, the worker's "
        "refit process (a child at the lowest CPU priority) refits, and the answer carries the version it produced, "
        "as the contract states (after ingest_refit_wait_s without it, the answer says refit pending); "
        "background: the same process refits after the answer (refit pending, calibration_version null; "
        "GET /v1/calibration shows the new version once stored); inline: in the request's transaction, in the "
        "worker (no second process; the refit's CPU work competes with the searches)")
    ingest_refit_wait_s: float = Field(
        default=20.0, gt=0,
        description="longest an ingest waits for its refit with ingest_refit=sync, seconds; beyond it the answer says "
        "refit pending (a saturated machine leaves the low-priority refit process little CPU); below a 30 s client "
        "timeout")
    log_format: Literal["json", "text"] = Field(default="json", description="log lines as JSON objects or text")
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024,
                                description="largest request body accepted, bytes (larger: 413)")
    cors_origins: list[str] = Field(default_factory=list,
                                    description="origins allowed to call from a browser (JSON list); empty: no CORS")
    calibration_refresh_s: float = Field(
        default=5.0, ge=0, description="how often a worker checks the database for a newer calibration, seconds")

    startup_mode: Literal["background", "blocking"] = Field(
        default="background",
        description="background: the port opens at once (/healthz 200, /readyz 503 naming what is still loading) "
        "and the catalog, calibration and compiled kernels load behind it; blocking: all of it before serving")
    max_in_flight: int = Field(
        default=0, ge=0,
        description="CPU-heavy requests (recommendations, predictions) one worker works on at "
        "once; one more is answered 503 with Retry-After at once; 0: the number of cores this process may use")
    max_ingests_in_flight: int = Field(
        default=1, ge=1,
        description="benchmark ingests (each stores rows under a lock) one worker works on at once; one more is "
        "answered 503 with Retry-After (ingests serialise on a database lock: a second one would only wait)")
    retry_after_s: int = Field(default=1, ge=1, le=3600,
                               description="Retry-After of a 503 for a full worker or one still starting, seconds")

    @field_validator("database_url")
    @classmethod
    def _psycopg_driver(cls, v: str) -> str:
        # A bare postgresql:// URL would make SQLAlchemy look for psycopg2, which we do not install.
        if v.startswith("postgresql://"):
            return "postgresql+psycopg://" + v.removeprefix("postgresql://")
        if v.startswith("postgres://"):
            return "postgresql+psycopg://" + v.removeprefix("postgres://")
        return v

    def write_keys(self) -> list[str]:
        if self.advisor_api_key is None:
            return []
        return [k.strip() for k in self.advisor_api_key.get_secret_value().split(",") if k.strip()]


@lru_cache
def get_settings() -> Settings:
    return Settings()
