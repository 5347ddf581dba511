"""Generated requests against the service's own OpenAPI schema (schemathesis): no 5xx, and every answer
conforms to the schema it documents. A bounded number of cases per operation, so CI can afford it; the
larger run is `python benchmarks/fuzz.py`.

Deterministic by default: tests/conftest.py loads the hypothesis profile ``deterministic`` (derandomize, no example
database), so every run sends the same requests in the same order (two runs: the same 2,245 requests and
statuses) and a failure replays. ``HYPOTHESIS_PROFILE=explore`` draws fresh cases each run, and ``FUZZ_SEED``
replays one of those runs (benchmarks/fuzz.py sets both). The app is called in-process, so no request can outlast a
network timeout (the schemathesis command line counts one that does as an error apart from the checks, and exits 1
with every case passed); there is no hypothesis deadline or health check (both depend on the machine's speed,
not on the case). The app is fully
loaded before the first case (``startup_mode="blocking"``) and runs no background work (``calibration_cv="off"``),
so nothing but the case decides the answer: a 503 "starting", "warming up" or "busy" would fail
``not_a_server_error`` for reasons outside the case."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, seed, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from service.main import create_app
from service.settings import Settings

# Generated cases per operation: 15 in the suite; benchmarks/fuzz.py sets FUZZ_CASES for a larger run.
CASES_PER_OPERATION = int(os.environ.get("FUZZ_CASES", "15"))
# The seed of an exploratory run to replay (unset: schemathesis draws one; ignored by the derandomized profile).
FUZZ_SEED = os.environ.get("FUZZ_SEED")


@pytest.fixture(scope="module")
def fuzz_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastAPI]:
    db = tmp_path_factory.mktemp("fuzz") / "fuzz.db"
    app = create_app(Settings(database_url=f"sqlite:///{Path(db)}", calibration_cv="off",
                              advisor_api_key="fuzz-write-key", startup_mode="blocking"))
    with TestClient(app):                      # runs the lifespan: migrated, calibrated, ready
        yield app


@pytest.fixture(scope="module")
def fuzz_schema(fuzz_app: FastAPI) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_asgi("/openapi.json", fuzz_app)


schema = schemathesis.pytest.from_fixture("fuzz_schema")


def _seeded(test: Callable[..., None]) -> Callable[..., None]:
    return seed(int(FUZZ_SEED))(test) if FUZZ_SEED else test


@schema.parametrize()
@settings(max_examples=CASES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck))
@_seeded
def test_no_server_error_and_schema_conformance(case: schemathesis.Case) -> None:
    case.call_and_validate(checks=[not_a_server_error, response_schema_conformance, status_code_conformance,
                                   content_type_conformance])
