"""GET /v1/calibration: the fitted cost-model parameters by segment and their error, current or by version."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from service.api.deps import SessionDep, StateDep, require_read_key
from service.api.problems import ProblemError
from service.calibration.report import public
from service.repository import calibrations as repo
from service.schemas.calibration import CalibrationPublic

# Versions are 32-bit integer keys (INTEGER in both SQLite and PostgreSQL); a larger number is a 422, not a
# database error.
MAX_VERSION = 2**31 - 1

router = APIRouter(prefix="/v1", tags=["calibration"], dependencies=[Depends(require_read_key)])


@router.get("/calibration", response_model=CalibrationPublic,
            summary="The current calibration: parameters per segment, measurements behind each, and the error")
def current_calibration(session: SessionDep, state: StateDep) -> CalibrationPublic:
    """The newest version: its fitted parameters per segment (with level and measurement count), the generation
    factors, the leave-one-source-out error (median and p90 absolute % error of throughput, TTFT and TPOT)
    overall and by GPU, engine and dtype once computed (else the in-sample error, labelled so), and the catalog's
    GPU x engine combinations without measurements with the segment they fall back to."""
    row = repo.latest(session)
    if row is None:
        raise ProblemError(503, "No calibration yet", "the service has not fitted a calibration yet; retry later")
    return public(row, state.catalog, row.version, state.settings.calibration_cv)


@router.get("/calibration/{version}", response_model=CalibrationPublic,
            summary="One calibration version (older versions stay readable)")
def calibration_version(version: Annotated[int, Path(ge=1, le=MAX_VERSION, description="calibration version, from 1")],
                        session: SessionDep, state: StateDep) -> CalibrationPublic:
    row = repo.by_version(session, version)
    latest = repo.latest(session)
    if row is None or latest is None:
        newest = latest.version if latest is not None else "none"
        raise ProblemError(404, "Not found", f"no calibration version {version}; versions run from 1 to {newest}",
                           field=["path", "version"])
    return public(row, state.catalog, latest.version, state.settings.calibration_cv)
