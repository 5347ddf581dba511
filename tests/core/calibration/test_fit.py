"""Calibration on real shipped measurements: deterministic, lowers the error it is fitted on, falls back
through the segment levels, and survives a JSON round trip (as it is stored)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from gpu_catalog.loader import PUBLISHED_CSV
from service.core.calibration import (
    CLASS_LEVEL,
    HARDWARE_PARAMS,
    LEVELS,
    SOFTWARE_PARAMS,
    Calibration,
    MeasurementSet,
    ape,
    fit,
    predict_measured,
    predict_metrics,
    prepare,
)
from service.core.calibration.measurements import split_layout
from service.core.costmodel import PARAM_NAMES, Params
from tests.core.support import CATALOG, CONSTANTS, TABLES


@pytest.fixture(scope="module")
def subset() -> MeasurementSet:
    """Every good H100-SXM and L40S row of the shipped file (a few hundred rows: two GPUs, both engines)."""
    with PUBLISHED_CSV.open(encoding="utf-8", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["quality"] == "good" and r["gpu"] in ("h100-sxm", "l40s")]
    ms = prepare(rows, CATALOG, TABLES, CONSTANTS)
    assert len(ms) > 100
    return ms


def _median_error(ms: MeasurementSet, params: Params) -> float:
    pred = predict_metrics(TABLES, ms, params)
    e = ape(pred, ms.y)
    return float(np.nanmedian(e))


def test_fit_is_deterministic_and_lowers_the_error(subset: MeasurementSet) -> None:
    a = fit(TABLES, subset, CONSTANTS)
    b = fit(TABLES, subset, CONSTANTS)
    assert a.to_json() == b.to_json()
    n = len(subset)
    initial = Params.from_matrix(np.tile([CONSTANTS.initial_params[p].initial for p in PARAM_NAMES], (n, 1)))
    fitted = a.params_for(subset.keys, subset.current)
    assert _median_error(subset, fitted) < 0.8 * _median_error(subset, initial)


def test_fitted_parameters_stay_within_their_bounds(subset: MeasurementSet) -> None:
    cal = fit(TABLES, subset, CONSTANTS)
    for seg in cal.segments.values():
        for name, value in seg["params"].items():
            bound = CONSTANTS.initial_params[name]
            assert bound.min * (1 - 1e-9) <= value <= bound.max * (1 + 1e-9), (name, value)


def test_lookup_falls_back_to_the_nearest_fitted_level(subset: MeasurementSet) -> None:
    cal = fit(TABLES, subset, CONSTANTS)
    # an H100 dtype with rows gets its own segment; an unmeasured Hopper GPU falls back to the architecture
    seg, info = cal.lookup(("trtllm", "hopper", "h100-sxm", "fp8"))
    assert seg == "trtllm/h100-sxm/fp8" and info["n"] > 0
    seg, info = cal.lookup(("trtllm", "hopper", "h20", "fp8"))
    assert seg == "trtllm/hopper"
    # an engine with no rows at all uses the global values
    assert cal.lookup(("sglang", "hopper", "h100-sxm", "fp8"))[0] == "global"


def test_stored_form_round_trips(subset: MeasurementSet) -> None:
    cal = fit(TABLES, subset, CONSTANTS)
    back = Calibration.from_json(cal.to_json())
    keys, cur = subset.keys[:20], subset.current[:20]
    assert np.array_equal(back.params_for(keys, cur).eff_bw, cal.params_for(keys, cur).eff_bw)


def test_parameters_are_keyed_by_what_varies(subset: MeasurementSet) -> None:
    """Hardware efficiencies by GPU segment, software overheads by engine x model class where latency
    measurements of several architectures support them, a harness TTFT per source that no prediction carries."""
    cal = fit(TABLES, subset, CONSTANTS)
    sw = [PARAM_NAMES.index(n) for n in SOFTWARE_PARAMS]
    for key, seg in cal.segments.items():
        if seg["level"] in LEVELS[2:]:          # below the engine: hardware only, overheads the engine's
            assert seg["owns"] == list(HARDWARE_PARAMS), key
            engine = key.split("/")[0]
            assert [seg["params"][n] for n in SOFTWARE_PARAMS] == [cal.segments[engine]["params"][n]
                                                                   for n in SOFTWARE_PARAMS], key
        if seg["level"] == CLASS_LEVEL:
            assert seg["owns"] == list(SOFTWARE_PARAMS) and seg["architectures"] >= 2, key
    # every class with latency rows of several architectures got its segment, the others inherit the engine's
    for (engine, *_), cls in set(zip(subset.keys, subset.classes, strict=True)):
        rows = [i for i, (k, c) in enumerate(zip(subset.keys, subset.classes, strict=True))
                if k[0] == engine and c == cls and np.isfinite(subset.y[i, 1:]).any()]
        archs = {int(subset.cand.model[i]) for i in rows}
        assert (f"{engine}/{cls}" in cal.segments) == (len(archs) >= 2), (engine, cls)
    owned = [(k, s) for k, s in cal.segments.items() if s["level"] == CLASS_LEVEL]
    assert owned, "the subset has a class with several architectures"
    key, seg = owned[0]
    engine, cls = key.split("/")
    gpu_key = next(k for k, c in zip(subset.keys, subset.classes, strict=True) if k[0] == engine and c == cls)
    with_class = np.log(cal.params_for([gpu_key], None, [cls]).step_overhead_s)
    assert float(with_class[0]) == pytest.approx(np.log(seg["params"]["step_overhead_s"]))
    assert cal.log_matrix([gpu_key], [cls])[0, sw].tolist() == pytest.approx(cal.vector(key)[sw].tolist())
    # each source's harness TTFT is fitted, bounded, and added only to what a measurement reads
    assert set(cal.harness) == set(subset.sources)
    assert all(1e-5 * (1 - 1e-9) <= v <= 2.0 for v in cal.harness.values())
    plain = predict_metrics(TABLES, subset, cal.params_for(subset.keys, subset.current, subset.classes))
    measured = predict_measured(TABLES, subset, cal)
    assert np.allclose(measured[:, 1] - plain[:, 1], cal.harness_s(subset.sources), equal_nan=True)


def test_attention_dp_and_expert_parallel_rows_do_not_move_the_shared_levels() -> None:
    """The global and engine segments (every class segment's prior) are fitted without the attention-DP /
    expert-parallel rows: the same with and without them; those rows still fit their GPU's efficiencies."""
    with PUBLISHED_CSV.open(encoding="utf-8", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["quality"] == "good" and r["gpu"] == "h200-sxm"
                and r["engine"] == "trtllm"]
    ms = prepare(rows, CATALOG, TABLES, CONSTANTS)
    split = split_layout(ms)
    assert split.sum() >= 10 and (~split).sum() >= 100
    with_split = fit(TABLES, ms, CONSTANTS)
    without = fit(TABLES, ms.take(np.flatnonzero(~split)), CONSTANTS)
    for seg in ("global", "trtllm"):
        assert with_split.segments[seg]["params"] == without.segments[seg]["params"]
    assert with_split.harness == without.harness
    assert with_split.segments["trtllm/h200-sxm"]["n"] == len(ms)


def test_an_mla_model_without_its_class_segment_takes_the_moe_class_overheads(subset: MeasurementSet) -> None:
    """Every MLA model of the catalog routes experts: where its engine has no MLA class segment (one MLA
    architecture measured, or none), its software overheads are those of the engine's MoE class, whose
    per-MoE-layer prefill dispatch its layers pay, and not the engine's average over dense models."""
    cal = fit(TABLES, subset, CONSTANTS)
    engine = next(k.split("/")[0] for k, s in cal.segments.items() if s["level"] == CLASS_LEVEL)
    sw = [PARAM_NAMES.index(n) for n in SOFTWARE_PARAMS]
    moe = np.log([CONSTANTS.initial_params[n].initial for n in PARAM_NAMES]) - 0.5
    segments = {k: s for k, s in cal.segments.items() if not k.startswith(f"{engine}/mla")}
    segments[f"{engine}/moe"] = {"level": CLASS_LEVEL, "n": 1, "owns": list(SOFTWARE_PARAMS),
                                 "params": dict(zip(PARAM_NAMES, np.exp(moe).tolist(), strict=True))}
    without_mla = Calibration(segments=segments, generation=cal.generation)
    key = (engine, "hopper", "h100-sxm", "fp8")
    assert without_mla.overheads(key, "mla")[0] == f"{engine}/moe"
    assert without_mla.log_matrix([key], ["mla"])[0, sw] == pytest.approx(moe[sw])
    # a dense model keeps the engine's; an MLA segment, where fitted, is the MLA model's own
    assert without_mla.overheads(key, "dense")[0] == (f"{engine}/dense" if f"{engine}/dense" in segments else engine)
    with_mla = Calibration(segments={**segments, f"{engine}/mla": segments[f"{engine}/moe"]}, generation={})
    assert with_mla.overheads(key, "mla")[0] == f"{engine}/mla"
