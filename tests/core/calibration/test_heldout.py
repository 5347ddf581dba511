"""The headline accuracy figures (service/core/calibration/heldout.py) on real shipped rows: signed and
absolute medians per family x metric x concurrency bucket, and the one-client datasheet floor."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from gpu_catalog.loader import PUBLISHED_CSV, load_catalog, load_cost_constants
from service.core.calibration import MeasurementSet, fit, predict_metrics, prepare
from service.core.calibration.heldout import bucket_labels, datasheet_floor, family_table, floor_check, latency_rows
from service.core.costmodel import build_tables

CATALOG = load_catalog()
CONSTANTS = load_cost_constants()
TABLES = build_tables(CATALOG, CONSTANTS)


@pytest.fixture(scope="module")
def latency() -> MeasurementSet:
    """The shipped closed-loop rows of Qwen3-32B and gpt-oss-120b on H100 and H200 (2 to 64+ clients, TTFT and
    TPOT, both engines) and the one-request runs of Llama-3.3-70B on 4 x H100 (TensorRT-LLM tuning guide)."""
    with PUBLISHED_CSV.open(encoding="utf-8", newline="") as fh:
        rows = [r for r in csv.DictReader(fh)
                if r["quality"] == "good" and ((r["model_family"] in ("qwen3-32b", "gpt-oss-120b")
                and r["gpu"] in ("h100-sxm", "h200-sxm") and r["mode"] == "concurrency")
                or r["source_id"] == "trtllm_perf_tuning_guide_llama33_70b_4xH100")]
    ms = prepare(rows, CATALOG, TABLES, CONSTANTS)
    assert latency_rows(ms).sum() >= 50
    return ms


def test_buckets_follow_the_concurrency(latency: MeasurementSet) -> None:
    labels = bucket_labels(latency)
    for lab, load, mode in zip(labels, latency.cand.load, latency.modes, strict=True):
        if mode not in ("concurrency", "static_batch"):
            assert lab == mode
            continue
        assert lab == ("1" if load == 1 else "2-8" if load <= 8 else "9-64" if load <= 64 else ">64")
    assert len(set(labels)) >= 3


def test_table_reports_signed_and_absolute_medians(latency: MeasurementSet) -> None:
    # predictions 20% above every measurement of one family and 10% below those of the others
    fam = np.asarray(latency.families)
    first = sorted(set(fam))[0]
    pred = np.where((fam == first)[:, None], latency.y * 1.2, latency.y * 0.9)
    table = family_table(latency, pred)
    assert table["rows"] == int(latency_rows(latency).sum())
    for cell in table["cells"]:
        want = 20.0 if cell["family"] == first else -10.0
        assert cell["signed_median_pct"] == pytest.approx(want) and cell["abs_median_pct"] == pytest.approx(abs(want))
    assert table["worst_bias"]["ttft"]["signed_median_pct"] == pytest.approx(20.0)
    assert sum(c["n"] for c in table["cells"] if c["metric"] == "tpot") == table["overall"]["tpot"]["n"]


def test_floor_check_flags_predictions_below_the_datasheet(latency: MeasurementSet) -> None:
    cal = fit(TABLES, latency, CONSTANTS)
    pred = predict_metrics(TABLES, latency, cal.params_for(latency.keys, latency.current))
    fitted = floor_check(TABLES, latency, pred)
    assert fitted["rows"] > 0
    # measurements of real runs respect the floor, and so do the fitted predictions
    assert fitted["ttft"]["measured_below_floor"] == 0 and fitted["tpot"]["measured_below_floor"] == 0
    assert fitted["ttft"]["predicted_below_floor"] == 0 and fitted["tpot"]["predicted_below_floor"] == 0
    # a prediction at half the floor is flagged, row by row
    floor = datasheet_floor(TABLES, latency)
    low = pred.copy()
    low[:, 1:] = floor * 0.5
    flagged = floor_check(TABLES, latency, low)
    assert flagged["ttft"]["predicted_below_floor"] == fitted["ttft"]["n"]
    assert flagged["tpot"]["predicted_below_floor"] == fitted["tpot"]["n"]
    assert len(flagged["tpot"]["below_floor_rows"]) == fitted["tpot"]["n"]
