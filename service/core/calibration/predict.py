"""What the cost model predicts for measurements under a calibration, and the anchors of users' measurements."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from service.core.calibration.measurements import MeasurementSet
from service.core.calibration.segments import Calibration
from service.core.candidates import MODE_CONCURRENCY, MODE_RATE, Params
from service.core.memory import Static, static_terms
from service.core.residuals import USER_SOURCE_PREFIX, anchors_of
from service.core.serve import ModeSplit, evaluate, serve
from service.core.simulate import PREDICTION_REQUESTS, Lengths, Load, replica, simulate
from service.core.tables import Tables
from service.core.types import F


def predict_metrics(tables: Tables, ms: MeasurementSet, params: Params, static: Static | None = None,
                    split: ModeSplit | None = None) -> F:
    """(n, 3) predicted throughput (output or total, as the row publishes), TTFT s, TPOT s."""
    res = serve(static, params, split) if static is not None else evaluate(tables, ms.cand, params)
    thr = np.where(ms.thr_is_total, res.total_tok_s, res.output_tok_s)
    return np.stack([thr, res.ttft_s, res.tpot_s], axis=1)



def with_anchors(tables: Tables, ms: MeasurementSet, cal: Calibration) -> Calibration:
    """``cal`` with the anchors of the users' measurements among ``ms``: their residuals against what the
    service predicts for them under ``cal``, the scheduler simulation's means where a prediction is simulated
    (a closed loop or a request rate), so that the correction moves the figures a prediction reports. Only the
    users' rows are predicted (the shipped ones never anchor)."""
    users = np.asarray([i for i, src in enumerate(ms.sources) if src.startswith(USER_SOURCE_PREFIX)], dtype=np.int64)
    anchors: list[dict[str, Any]] = []
    if len(users):
        mine = ms.take(users)
        params = cal.params_for(mine.keys, mine.current, mine.classes)
        pred = predict_metrics(tables, mine, params)
        static = static_terms(tables, mine.cand)
        for j in range(len(mine)):
            sim = _simulated_means(static, params, j, mine.keys[j][0], bool(mine.thr_is_total[j]))
            if sim is not None:
                pred[j] = sim
        anchors = anchors_of(tables, mine.cand, mine.y, pred, mine.keys, mine.sources, mine.row_ids)
    return Calibration(segments=cal.segments, generation=cal.generation, data_sha256=cal.data_sha256,
                       n_measurements=cal.n_measurements, harness=cal.harness, anchors=anchors)


def _simulated_means(static: Static, params: Params, i: int, engine: str, thr_is_total: bool) -> F | None:
    """Row ``i``'s throughput, mean TTFT and mean TPOT (s) as POST /v1/predictions simulates its steady state
    by default (service/prediction/simulation.py: one replica at its share of the load, 1,000 requests, seed 0, fixed
    lengths; vLLM reserves KV as tokens are computed, TensorRT-LLM for the whole sequence); None for a mode
    predictions do not simulate that way (offline, static batch)."""
    mode, reps = int(static.mode[i]), max(float(static.replicas[i]), 1.0)
    if mode == MODE_CONCURRENCY:
        value = float(math.ceil(float(static.load[i]) / reps))
        scale = float(static.load[i]) / value
    elif mode == MODE_RATE:
        value, scale = float(static.load[i]) / reps, reps
    else:
        return None
    vllm = engine.startswith("vllm")
    load = Load(mode, value, Lengths(float(static.isl[i])), Lengths(float(static.osl[i])),
                requests=PREDICTION_REQUESTS, seed=0)
    r = simulate(replica(static, params, i, chunked_prefill=True, reserve_full=not vllm), load)
    out_tok_s = r.output_tok_s * scale
    thr = out_tok_s * (static.isl[i] + static.osl[i]) / static.osl[i] if thr_is_total else out_tok_s
    return np.asarray([thr, r.ttft_s.mean, r.tpot_s.mean])


def predict_measured(tables: Tables, ms: MeasurementSet, cal: Calibration) -> F:
    """What each measurement should read under ``cal``: the deployment's prediction plus its source's harness
    TTFT (a harness the fit did not see adds nothing)."""
    pred = predict_metrics(tables, ms, cal.params_for(ms.keys, ms.current, ms.classes))
    pred[:, 1] += cal.harness_s(ms.sources)
    return pred

