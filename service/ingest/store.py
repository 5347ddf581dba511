"""Store a validated ingest whole (or not at all), refit the calibration on it, and put the new version to use.

``INGEST_REFIT=inline``: rows and refit in the request's one transaction. Otherwise the rows are committed first and
the worker's refit process refits (service/calibration/ingest_refit.py): after the answer (``background``), or
before it (``sync``: ``store`` then ``answer_after_refit``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from sqlalchemy.orm import Session

from gpu_catalog.loader import Catalog
from gpu_catalog.schema import CostConstants
from service.calibration.fit import measurement_set, refit_and_store
from service.core.calibration import prepare
from service.core.costmodel import Tables
from service.db.models import Ingest
from service.db.session import after_commit
from service.ingest.validate import Path, PreparedIngest
from service.repository import calibrations as cal_repo
from service.repository import ingests as repo
from service.schemas.benchmarks import CalibrationOutcome, IngestResponse
from service.state import AppState

log = logging.getLogger(__name__)


class IngestConflict(ValueError):
    """A posted row has the id of a stored measurement of other content (409)."""

    def __init__(self, field: Path, message: str, measurement_id: int, ingest_id: int | None) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.measurement_id = measurement_id
        self.ingest_id = ingest_id


@dataclass
class Stored:
    response: IngestResponse
    created: bool
    refit_run: int | None = None         # once committed: the refit run that covers this ingest (RefitThread.wake)


def _response(ingest: Ingest, ids: list[int], row_ids: list[str], duplicate: bool,
              outcome: CalibrationOutcome | None) -> IngestResponse:
    return IngestResponse(ingest_id=ingest.id, duplicate=duplicate, format=ingest.format,
                          content_sha256=ingest.content_sha256, source_id=f"user:{ingest.id}",
                          submitted_by=ingest.submitted_by, created_at=ingest.created_at,
                          measurement_ids=ids, row_ids=row_ids, calibration_version=ingest.calibration_version,
                          calibration=outcome)


def store(session: Session, state: AppState, prepared: PreparedIngest, submitted_by: str) -> Stored:
    """In the request's transaction: the ingest and its rows (and, ``inline``, the refitted calibration version), or
    nothing.

    Ingests are serialised (``repo.lock``, held to the commit), so each refit starts from the version the previous
    one made. Once the refit is committed this worker uses the new version at once; others read it from the
    database within ``calibration_refresh_s``. Its leave-one-source-out error follows ``settings.calibration_cv``."""
    repo.lock(session)
    existing = repo.by_content(session, prepared.content_sha256)
    if existing is not None:
        ids = repo.measurement_ids(session, existing.id)
        row_ids = repo.row_ids(session, existing.id)
        return Stored(_response(existing, ids, row_ids, duplicate=True, outcome=None), created=False)
    stored = repo.stored_row_ids(session, [r.row_id for r in prepared.rows])
    for row, path in zip(prepared.rows, prepared.paths, strict=True):
        if row.row_id in stored:
            raise _conflict(prepared.format, row.row_id, path, *stored[row.row_id])
    latest = cal_repo.latest(session)
    previous = latest.version if latest is not None else None
    ingest, ids = repo.add(session, prepared.content_sha256, prepared.format, submitted_by, prepared.rows,
                           prepared.source_description, prepared.families)
    row_ids = [r.row_id for r in prepared.rows]
    if state.refits is not None:
        return _refit_later(session, state, prepared, ingest, ids, row_ids, previous, submitted_by)
    return _refit_inline(session, state, prepared, ingest, ids, row_ids, previous, submitted_by)


def _refit_inline(session: Session, state: AppState, prepared: PreparedIngest, ingest: Ingest, ids: list[int],
                  row_ids: list[str], previous: int | None, submitted_by: str) -> Stored:
    """The refit in the request's transaction, in this worker (INGEST_REFIT=inline)."""
    tables, catalog, constants = state.serving.advisor.tables, state.catalog, state.constants
    ms = measurement_set(session, catalog, tables, constants)
    refit = refit_and_store(session, tables, ms, constants, set(row_ids))
    version = refit.row.version if refit.row is not None else previous
    repo.set_calibration(session, ingest, version)
    not_scored, _ = _not_scored(prepared, catalog, tables, constants)
    cv = state.settings.calibration_cv if refit.row is not None else "off"
    held = refit.row is not None and bool((refit.row.metrics or {}).get("held_out"))
    outcome = CalibrationOutcome(
        version=version, previous_version=previous, refitted=refit.row is not None,
        refitted_segments=refit.refitted_segments, scored_rows=refit.scored_rows, not_scored=not_scored,
        fit_s=refit.fit_s, held_out="computed" if held else {"background": "pending", "sync": "computed",
                                                               "off": "off"}[cv])
    response = _response(ingest, ids, row_ids, duplicate=False, outcome=outcome)

    def put_to_use() -> None:
        log.info("ingest %d (%s, %d rows) by %s: calibration v%s", ingest.id, ingest.format, len(ids), submitted_by,
                 version)
        if refit.row is not None:
            state.held_out_for(refit.row.version, ms)
        state.reload_calibration()

    after_commit(session, put_to_use)
    return Stored(response, created=True)


def _refit_later(session: Session, state: AppState, prepared: PreparedIngest, ingest: Ingest, ids: list[int],
                 row_ids: list[str], previous: int | None, submitted_by: str) -> Stored:
    """The ingest stored with no calibration version yet: the worker's refit thread has one fitted once it is
    committed."""
    not_scored, scored = _not_scored(prepared, state.catalog, state.serving.advisor.tables, state.constants)
    outcome = CalibrationOutcome(
        refit="pending", version=previous, previous_version=previous, refitted=False, refitted_segments=[],
        scored_rows=scored, not_scored=not_scored, fit_s=None,
        held_out="off" if state.settings.calibration_cv == "off" or not scored else "pending")
    response = _response(ingest, ids, row_ids, duplicate=False, outcome=outcome)
    refits = state.refits
    assert refits is not None
    stored = Stored(response, created=True)

    def refit_soon() -> None:
        log.info("ingest %d (%s, %d rows) by %s: refit pending", ingest.id, ingest.format, len(ids), submitted_by)
        stored.refit_run = refits.wake()

    after_commit(session, refit_soon)
    return stored


def answer_after_refit(session: Session, state: AppState, stored: Stored) -> Stored:
    """INGEST_REFIT=sync, once the ingest is committed: the answer after its refit, with the version it produced;
    the pending answer when the refit has not ended within ``ingest_refit_wait_s`` or failed. The calling thread
    waits for the refit thread, which waits for the refit process: no CPU is used here meanwhile."""
    refits, outcome = state.refits, stored.response.calibration
    if refits is None or stored.refit_run is None or outcome is None:
        return stored
    if not refits.wait_for(stored.refit_run, state.settings.ingest_refit_wait_s):
        log.warning("ingest %d: refit not done within %.0f s, answered pending", stored.response.ingest_id,
                    state.settings.ingest_refit_wait_s)
        return stored
    ingest = session.get(Ingest, stored.response.ingest_id)
    assert ingest is not None
    version = ingest.calibration_version
    if version is None:                    # the refit failed: the next one covers this ingest
        return stored
    row = cal_repo.by_version(session, version)
    metrics = (row.metrics or {}) if row is not None else {}
    refitted = outcome.scored_rows > 0 and version != outcome.previous_version
    cv = state.settings.calibration_cv if refitted else "off"
    held = refitted and bool(metrics.get("held_out"))
    done = replace_outcome(outcome, refit="done", version=version, refitted=refitted,
                           refitted_segments=list(metrics.get("refitted_segments", [])) if refitted else [],
                           fit_s=metrics.get("fit_s") if refitted else None,
                           held_out="computed" if held else {"background": "pending", "sync": "computed",
                                                             "off": "off"}[cv])
    return replace(stored, response=stored.response.model_copy(update={"calibration_version": version,
                                                                         "calibration": done}))


def replace_outcome(outcome: CalibrationOutcome, **changes: object) -> CalibrationOutcome:
    return CalibrationOutcome.model_validate({**outcome.model_dump(), **changes})


def _conflict(fmt: str, row_id: str, path: Path, measurement_id: int, ingest_id: int | None) -> IngestConflict:
    where = f"ingest {ingest_id}" if ingest_id is not None else "the shipped measurements"
    if fmt == "rows":
        return IngestConflict([*path, "row_id"], f"'{row_id}' is already stored as measurement {measurement_id} "
                              f"({where}) with other content; give it another row_id", measurement_id, ingest_id)
    return IngestConflict(path, f"this run is already stored as measurement {measurement_id} ({where})",
                          measurement_id, ingest_id)


def _not_scored(prepared: PreparedIngest, catalog: Catalog, tables: Tables,
                constants: CostConstants) -> tuple[dict[str, int], int]:
    """Rows of the ingest that are stored but not fitted, by reason (as the calibration's ``prepare`` skips them),
    and how many are fitted."""
    good = [r.model_dump() for r in prepared.rows if r.quality == "good"]
    ms = prepare(good, catalog, tables, constants)
    reasons = dict(ms.skipped)
    weak = len(prepared.rows) - len(good)
    if weak:
        reasons["quality weak (stored, not fitted)"] = weak
    return reasons, len(ms)
