"""Refit after new measurements: only the segments holding them change, they move toward the new rows, and the
result depends only on the rows and the base calibration. Real shipped rows, no database."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from gpu_catalog.loader import PUBLISHED_CSV
from service.core.calibration import (
    HARDWARE_PARAMS,
    LEVELS,
    SOFTWARE_PARAMS,
    Calibration,
    MeasurementSet,
    fit,
    predict_metrics,
    prepare,
    segment_key,
)
from service.core.calibration.refit import REFIT_LEVELS, refit_segments
from tests.core.support import CATALOG, CONSTANTS, TABLES

# The segment whose rows play the new measurements: vLLM, BF16 on H100-SXM (tens of shipped rows).
NEW = ("vllm", "hopper", "h100-sxm", "bf16")
NEW_ROWS = 8


@pytest.fixture(scope="module")
def data() -> tuple[MeasurementSet, MeasurementSet, list[str], Calibration]:
    """(all rows, the rows without NEW_ROWS of the NEW segment, those rows' ids, the full fit without them)."""
    with PUBLISHED_CSV.open(encoding="utf-8", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["quality"] == "good" and r["gpu"] in ("h100-sxm", "l40s")]
    full = prepare(rows, CATALOG, TABLES, CONSTANTS)
    in_new = np.flatnonzero([k == NEW for k in full.keys])
    assert len(in_new) > 2 * NEW_ROWS
    new_ids = [full.row_ids[i] for i in in_new[:NEW_ROWS]]
    base_ms = full.take(np.flatnonzero([rid not in new_ids for rid in full.row_ids]))
    return full, base_ms, new_ids, fit(TABLES, base_ms, CONSTANTS)


def test_only_the_segments_of_the_new_rows_change(data: tuple[MeasurementSet, MeasurementSet, list[str],
                                                              Calibration]) -> None:
    full, base_ms, _, base = data
    cal, refitted = refit_segments(TABLES, full, CONSTANTS, base, [NEW])
    path = [segment_key(level, NEW) for level in REFIT_LEVELS]
    assert refitted == path == ["vllm/hopper", "vllm/h100-sxm", "vllm/h100-sxm/bf16"]
    for key, seg in base.segments.items():
        if key in path:
            assert seg["params"] != cal.segments[key]["params"], key
            assert cal.segments[key]["n"] == seg["n"] + NEW_ROWS, key
        else:
            assert cal.segments[key] == seg, key
    assert set(cal.segments) == set(base.segments) and cal.generation == base.generation
    assert cal.n_measurements == len(full) == len(base_ms) + NEW_ROWS


def test_the_new_rows_are_predicted_better(data: tuple[MeasurementSet, MeasurementSet, list[str],
                                                       Calibration]) -> None:
    """The refit moves the hardware efficiencies (a GPU segment owns only those): the new rows' TPOT, set by
    memory bandwidth, is predicted better; the software overheads stay the engine's (a user's own deployment is
    pulled to its measurement by the residual correction, service/core/residuals.py)."""
    full, _, new_ids, base = data
    cal, refitted = refit_segments(TABLES, full, CONSTANTS, base, [NEW])
    new = full.take(np.flatnonzero([rid in new_ids for rid in full.row_ids]))

    def sq_log_error(c: Calibration) -> float:
        pred = predict_metrics(TABLES, new, c.params_for(new.keys, new.current, new.classes))
        r = np.log(pred[:, 2] / new.y[:, 2])
        return float(np.nansum(r * r))

    assert np.isfinite(new.y[:, 2]).all()
    assert sq_log_error(cal) < sq_log_error(base)
    for seg in refitted:
        assert cal.segments[seg]["owns"] == list(HARDWARE_PARAMS)
        for name in SOFTWARE_PARAMS:
            assert cal.segments[seg]["params"][name] == base.segments["vllm"]["params"][name], (seg, name)


def test_refit_is_deterministic_and_creates_segments_a_gpu_lacked(
        data: tuple[MeasurementSet, MeasurementSet, list[str], Calibration]) -> None:
    full, _, _, base = data
    a, _ = refit_segments(TABLES, full, CONSTANTS, base, [NEW])
    b, _ = refit_segments(TABLES, full, CONSTANTS, base, [NEW])
    assert a.to_json() == b.to_json()
    # rows of a GPU the base never saw (the L40S rows, relabelled as an RTX 6000 Ada: same architecture)
    l40s = [i for i, k in enumerate(full.keys) if k[2] == "l40s"]
    moved = full.take(np.asarray(l40s))
    moved.keys = [(k[0], k[1], "rtx-6000-ada", k[3]) for k in moved.keys]
    key = moved.keys[0]
    assert f"{key[0]}/rtx-6000-ada" not in base.segments
    cal, refitted = refit_segments(TABLES, moved, CONSTANTS, base, [key])
    assert refitted[1:] == [f"{key[0]}/rtx-6000-ada", f"{key[0]}/rtx-6000-ada/{key[3]}"]
    assert cal.lookup(key)[0] == f"{key[0]}/rtx-6000-ada/{key[3]}"
    assert [cal.segments[s]["level"] for s in refitted] == list(LEVELS[2:])
