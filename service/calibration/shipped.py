"""The calibration of the shipped measurements, shipped as a file, so that a fresh install need not fit it.

A full fit of the shipped measurements is slow, and their leave-one-source-out error (a fit per source) slower.
``gpu_catalog/data/calibration.shipped.json`` holds what that fit stores (parameters and metrics, whatever the
fit produces) with two hashes: of the data it was fitted on (the calibration's own data fingerprint of the
measurement set) and of the code and catalog files the fit depends on. Start-up uses the file only when both
match what it would fit now; anything else fits as before, so a stale file costs time, never wrong parameters.

Regenerate it after changing the shipped measurements, the catalog or the cost-model code (the test
tests/calibration/test_shipped.py fails until then):

    python -m service.calibration.shipped            # fit + leave-one-source-out error (minutes)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from gpu_catalog.loader import DATA_DIR, Catalog
from gpu_catalog.schema import CostConstants
from service.core.calibration import MeasurementSet
from service.core.costmodel import Tables
from service.db.models import Calibration as CalibrationRow
from service.repository import calibrations as repo

log = logging.getLogger(__name__)

SHIPPED_PATH = DATA_DIR / "calibration.shipped.json"
FORMAT = 1
_ROOT = Path(__file__).resolve().parents[2]
# What the fitted parameters depend on besides the measurements: the cost model and fit code and the catalog
# (GPU figures, model architectures, engine defaults, cost constants). Any change to these refits.
_CODE_GLOBS = ("service/core/**/*.py", "service/engines/**/*.py", "service/calibration/fit.py", "gpu_catalog/*.py",
               "gpu_catalog/data/*.yaml", "gpu_catalog/data/**/*.yaml")


def code_fingerprint(root: Path = _ROOT) -> str:
    digest = hashlib.sha256()
    paths = sorted({p for g in _CODE_GLOBS for p in root.glob(g) if p.is_file()})
    for p in paths:
        digest.update(p.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(p.read_bytes()).digest())
    return digest.hexdigest()


def read(path: Path = SHIPPED_PATH) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        log.info("no usable shipped calibration (%s): %s", path.name, exc)
        return None
    return data if data.get("format") == FORMAT else None


def matching(data_sha256: str, path: Path = SHIPPED_PATH) -> dict[str, Any] | None:
    """The shipped calibration if it was fitted on exactly this data by exactly this code, else None (logged)."""
    shipped = read(path)
    if shipped is None:
        return None
    if shipped.get("data_sha256") != data_sha256:
        log.info("shipped calibration not used: fitted on other measurements (%s..., stored data %s...)",
                 str(shipped.get("data_sha256"))[:12], data_sha256[:12])
        return None
    if shipped.get("code_sha256") != code_fingerprint():
        log.info("shipped calibration not used: the cost model, fit or catalog changed since it was made "
                 "(regenerate: python -m service.calibration.shipped)")
        return None
    return shipped


def store(session: Session, shipped: dict[str, Any]) -> CalibrationRow:
    """The shipped calibration as a new stored version (as a fit would have stored it)."""
    metrics = {**shipped["metrics"], "shipped": SHIPPED_PATH.name}
    version = repo.store(session, shipped["data_sha256"], int(shipped["n_measurements"]), shipped["params"], metrics)
    row = repo.by_version(session, version)
    assert row is not None
    log.info("calibration v%d: the shipped calibration of these %d measurements (hashes match)", version,
             row.n_measurements)
    return row


@contextmanager
def _shipped_database() -> Iterator[tuple[sessionmaker[Session], Catalog, CostConstants, Tables, MeasurementSet]]:
    """The shipped catalog and measurements in a throwaway SQLite database, loaded exactly as start-up loads them."""
    from gpu_catalog.loader import load_cost_constants
    from service.calibration.fit import measurement_set
    from service.core.costmodel import build_tables
    from service.db.session import make_engine, make_sessionmaker, transaction
    from service.repository.catalog import read_catalog
    from service.startup import migrate_and_load

    with tempfile.TemporaryDirectory() as d:
        engine = make_engine(f"sqlite:///{d}/shipped.db")
        sessions = make_sessionmaker(engine)
        migrate_and_load(engine, sessions)
        with transaction(sessions) as session:
            catalog = read_catalog(session)
            constants = load_cost_constants()
            tables = build_tables(catalog, constants)
            ms = measurement_set(session, catalog, tables, constants)
        try:
            yield sessions, catalog, constants, tables, ms
        finally:
            engine.dispose()


def shipped_data_fingerprint() -> str:
    """The data fingerprint start-up computes for the shipped measurements on an empty database."""
    from service.core.calibration import data_fingerprint

    with _shipped_database() as (_, _, _, _, ms):
        return data_fingerprint(ms)


def generate(path: Path = SHIPPED_PATH, cross_validate: bool = True) -> dict[str, Any]:
    """Fit the shipped measurements as start-up would, and write the file."""
    from service.calibration.fit import fit_and_store, run_cross_validation
    from service.db.session import transaction

    with _shipped_database() as (sessions, _, constants, tables, ms):
        with transaction(sessions) as session:
            version = fit_and_store(session, tables, ms, constants).version
        if cross_validate:
            run_cross_validation(sessions, version, tables, ms, constants)
        with transaction(sessions) as session:
            row = repo.by_version(session, version)
            assert row is not None
            out = {"format": FORMAT, "data_sha256": row.data_sha256, "code_sha256": code_fingerprint(),
                   "n_measurements": row.n_measurements, "params": row.params, "metrics": row.metrics}
    path.write_text(json.dumps(out, sort_keys=True, separators=(",", ":")) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-cross-validation", action="store_true",
                    help="skip the leave-one-source-out error (start-up then computes it in the background)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    t0 = time.perf_counter()
    out = generate(cross_validate=not args.no_cross_validation)
    print(f"{SHIPPED_PATH}: calibration of {out['n_measurements']} measurements, data {out['data_sha256'][:12]}, "
          f"code {out['code_sha256'][:12]}, held-out error {'included' if out['metrics'].get('held_out') else 'not'}"
          f"; {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
