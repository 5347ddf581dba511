"""The analytic model's side of a prediction: the cost model's terms of a batch of deployments and the response
figures they give without a simulation (means, and an exponential tail on TTFT's queueing part)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gpu_catalog.schema import ModelSpec
from service.core.calibration import calibration_engine, model_class
from service.core.costmodel import MODES, Candidates, Params, Result, Static, serve, static_terms, take_rows
from service.core.residuals import corrected, correction
from service.engines.defaults import is_current
from service.prediction.launch_settings import settings_for
from service.prediction.levers import with_lever_terms
from service.schemas.predictions import Deployment, Predicted, Workload
from service.units import MS_PER_S

if TYPE_CHECKING:
    from service.prediction.advisor import Advisor

# Tail of an exponential queueing delay: P(wait > t) = exp(-t / mean) -> quantile q at mean x ln(1/(1-q)).
QUANTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}


def analytic_ttft_quantile_s(ttft_s: Any, fixed_s: Any, prefill_s: Any, q: float) -> Any:
    """Quantile ``q`` of TTFT without a simulation: the waiting part of the mean TTFT (everything but the front
    end and the prompt's own prefill) given an exponential tail. Floats or arrays."""
    wait_s = np.maximum(ttft_s - fixed_s - prefill_s, 0.0)
    return ttft_s - wait_s + wait_s * math.log(1.0 / (1.0 - q))


# One deployment's analytic terms (one-row arrays) and its calibration segment key: ``Analyses.row``.
Analysed = tuple[Static, Params, Result, tuple[str, str, str, str]]


@dataclass
class Analyses:
    """``analyse``'s answer: the analytic terms of several deployments, a row each."""

    static: Static
    params: Params
    res: Result
    keys: list[tuple[str, str, str, str]]

    def row(self, k: int) -> Analysed:
        """Deployment ``k``'s terms as one-row arrays (taken when asked for: a batch is seldom all used)."""
        if len(self.keys) == 1:
            return self.static, self.params, self.res, self.keys[0]
        one = np.asarray([k])
        return take_rows(self.static, one), take_rows(self.params, one), take_rows(self.res, one), self.keys[k]

def load_of(wl: Workload) -> float:
    """The workload's load in its mode's unit: clients (concurrency), requests/s (request_rate) or the job's
    requests (offline)."""
    return {"concurrency": float(wl.concurrency or 0), "request_rate": float(wl.request_rate or 0.0),
            "offline": float(wl.num_requests or 0)}[wl.mode]


def analyse(adv: Advisor, model: ModelSpec, wl: Workload, deps: list[Deployment]) -> Analyses:
    """Static terms, fitted parameters and analytic serving figures of each deployment of ``model`` under
    ``wl``, computed for all of them at once."""
    tables, m_idx = adv.tables_for(model)
    load = load_of(wl)
    rows: list[tuple[float, ...]] = []
    idx: list[tuple[int, int, int, int]] = []
    keys: list[tuple[str, str, str, str]] = []
    current: list[bool] = []
    for dep in deps:
        gpu = adv.gpus[dep.gpu]
        settings, defaults = settings_for(adv, dep, gpu, wl)
        idx.append((adv.index["gpu"][gpu.id], adv.index["wdtype"][dep.weight_dtype],
                    adv.index["kvdtype"][dep.kv_dtype], defaults.budget))
        rows.append((float(dep.tp), float(dep.pp), float(dep.ep or 1), float(dep.replicas),
                     float(settings.max_num_seqs), float(settings.max_num_batched_tokens),
                     settings.memory_fraction, float(settings.max_model_len), float(dep.dp),
                     1.0 if defaults.reserve_full else 0.0))
        keys.append((calibration_engine(dep.engine, gpu.vendor), gpu.architecture, gpu.id, dep.weight_dtype))
        current.append(is_current(dep.engine, settings.engine_version, adv.constants))
    n = len(deps)
    ix = np.asarray(idx, dtype=np.int64).reshape(n, 4).T
    f = np.asarray(rows, dtype=np.float64).reshape(n, 10).T
    cand = Candidates(
        model=np.full(n, m_idx), gpu=ix[0], wdtype=ix[1], kvdtype=ix[2], budget=ix[3], tp=f[0], pp=f[1], ep=f[2],
        replicas=f[3], max_num_seqs=f[4], max_batched_tok=f[5], mem_fraction=f[6], reserve_full=f[9],
        input_tok=np.full(n, float(wl.input_tokens)), output_tok=np.full(n, float(wl.output_tokens)),
        mode=np.full(n, MODES[wl.mode]), load=np.full(n, load), context_tok=f[7],
        first_wave_share=np.full(n, wl.first_wave_share), dp=f[8])
    params = adv.params_for(keys, current, model_class(model))
    static = with_lever_terms(adv, tables, cand, static_terms(tables, cand), deps, wl, model)
    res = serve(static, params)
    # users' measurements near these deployments (the same function corrects the search's candidates)
    corr = correction(adv.cal.calibration.residuals(), keys, cand.tp * cand.pp, MODES[wl.mode],
                      wl.input_tokens, wl.output_tokens, float(tables.active_linear_params[m_idx]))
    if corr is not None:
        res = corrected(res, corr.factors(np.arange(n), load / np.maximum(cand.replicas, 1.0)), cand.output_tok)
    return Analyses(static, params, res, keys)


def analytic_predicted(res: Result, params: Params, i: int, wl: Workload) -> Predicted:
    ttft = float(res.ttft_s[i])
    tpot = float(res.tpot_s[i])
    base = float(params.ttft_fixed_s[i] if np.ndim(params.ttft_fixed_s) else params.ttft_fixed_s)
    prefill = float(res.prefill_s[i])

    def ttft_q(q: float) -> float:
        return float(analytic_ttft_quantile_s(ttft, base, prefill, q)) * MS_PER_S

    return Predicted(
        ttft_ms=round(ttft * MS_PER_S, 2), ttft_p50_ms=round(ttft_q(QUANTILES["p50"]), 2),
        ttft_p90_ms=round(ttft_q(QUANTILES["p90"]), 2), ttft_p95_ms=round(ttft_q(QUANTILES["p95"]), 2),
        ttft_p99_ms=round(ttft_q(QUANTILES["p99"]), 2),
        tpot_ms=round(tpot * MS_PER_S, 3), tpot_p50_ms=round(tpot * MS_PER_S, 3),
        tpot_p90_ms=round(tpot * MS_PER_S, 3), tpot_p95_ms=round(tpot * MS_PER_S, 3),
        tpot_p99_ms=round(tpot * MS_PER_S, 3),
        e2e_ms=round(float(res.e2e_s[i]) * MS_PER_S, 1),
        e2e_p95_ms=round((ttft_q(QUANTILES["p95"]) / MS_PER_S + (wl.output_tokens - 1) * tpot) * MS_PER_S, 1),
        output_tok_s=round(float(res.output_tok_s[i]), 2), total_tok_s=round(float(res.total_tok_s[i]), 2),
        requests_per_s=round(float(res.requests_s[i]), 4), max_concurrency=int(res.max_concurrency[i]),
        batch_per_replica=round(float(res.batch[i]), 2), prefill_ms=round(float(res.prefill_s[i]) * MS_PER_S, 2),
        compute_bound_share=round(float(res.compute_bound_share[i]), 3),
        percentile_method="analytic steady state: TTFT percentiles put an exponential tail on the queueing "
        "part of the mean TTFT; TPOT percentiles equal the mean (each request's TPOT averages many steps)")
