"""A prediction's response body: memory, cost, the figures (simulated, else analytic), confidence and notes."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from gpu_catalog.schema import GpuSpec, ModelSpec
from service.core.calibration import model_class
from service.core.costmodel import GB_BYTES, Params, Result
from service.prediction.analytic import analytic_predicted
from service.prediction.confidence import segment_confidence
from service.prediction.levers import lever_choice, lever_notes
from service.prediction.simulation import Simulation, percentile_method, simulated
from service.schemas.predictions import (
    Cost,
    Deployment,
    LatencyStats,
    Launch,
    MemoryPerGpu,
    Predicted,
    PredictionResponse,
    ResolvedSettings,
    Simulated,
    Workload,
)
from service.units import S_PER_HOUR, TOKENS_PER_MILLION

if TYPE_CHECKING:
    from service.prediction.advisor import Advisor


def response(adv: Advisor, model: ModelSpec, dep: Deployment, wl: Workload, gpu: GpuSpec, settings: ResolvedSettings,
             res: Result, params: Params, key: tuple[str, str, str, str], sim: Simulation | None,
             launch: Launch | None) -> PredictionResponse:
    """The response body of deployment ``dep`` from its analytic terms (one row), its simulation (None: not
    simulated) and its launch (rendered by the caller when it fits)."""
    i = 0
    fits = bool(res.fits[i])
    notes: list[str] = []
    cap_gb = gpu.memory_gb
    mem = MemoryPerGpu(
        weights=round(float(res.weights_bytes[i]) / GB_BYTES, 3),
        kv_cache=round(float(res.kv_cache_bytes[i]) / GB_BYTES, 3),
        activations=round(float(res.activations_bytes[i]) / GB_BYTES, 3),
        overhead=round(float(res.overhead_bytes[i]) / GB_BYTES, 3),
        total=round(float(res.weights_bytes[i] + res.kv_cache_bytes[i] + res.activations_bytes[i]
                          + res.overhead_bytes[i]) / GB_BYTES, 3),
        capacity=cap_gb,
        kv_bytes_per_token=round(float(res.kv_bytes_per_seq[i]) / settings.max_model_len, 1),
        kv_capacity_tokens=int(res.kv_cache_bytes[i] / max(float(res.kv_bytes_per_seq[i]), 1.0)
                               * settings.max_model_len))
    confidence = segment_confidence(adv.cal, key, wl.mode, model_class(model))
    price = gpu.price_usd_per_gpu_hour
    usd_h = price * dep.total_gpus if price else None
    if not fits:
        need = float(res.weights_bytes[i] + res.activations_bytes[i] + res.overhead_bytes[i]) / GB_BYTES
        if need >= cap_gb:
            notes.append(f"does not fit: weights {mem.weights:.1f} GB + activations {mem.activations:.1f} GB + "
                         f"overhead {mem.overhead:.1f} GB per GPU exceed the {cap_gb:.0f} GB of one {gpu.id}")
        else:
            notes.append(f"does not fit: {mem.kv_cache:.2f} GB left for the KV cache per GPU cannot hold one "
                         f"{settings.max_model_len}-token sequence "
                         f"({float(res.kv_bytes_per_seq[i]) / GB_BYTES:.2f} "
                         "GB per GPU)")
        return PredictionResponse(fits=False, model=model.id, predicted=None, memory_per_gpu_gb=mem,
                                  cost=Cost(usd_per_hour=usd_h, usd_per_million_output_tokens=None,
                                            price_source=gpu.sources.price),
                                  settings=settings, confidence=confidence, notes=notes)
    predicted = predicted_figures(res, params, i, wl, sim, dep.serving_units)
    if wl.concurrency is not None and wl.concurrency > predicted.max_concurrency:
        notes.append(f"{wl.concurrency} concurrent requests exceed the {predicted.max_concurrency} sequences "
                     f"of {settings.max_model_len} tokens the deployment holds at once: the rest queue "
                     "(TTFT includes the wait)")
    if bool(res.overloaded[i]):
        notes.append(f"request rate {wl.request_rate} req/s exceeds the capacity of about "
                     f"{predicted.requests_per_s:.2f} req/s: the queue grows without bound; TTFT is the "
                     "value at the edge of saturation")
    if sim is not None and sim.result.saturated:
        notes.append(f"in the simulation one replica completed {sim.result.requests_s:.3g} req/s of the "
                     f"{sim.load_per_replica} offered: its queue grew for the whole run, so the simulated "
                     "percentiles grow with the number of requests simulated")
    if sim is not None and sim.result.preemptions:
        notes.append(f"the KV cache ran out in the simulation: {sim.result.preemptions} preemptions "
                     f"(requests evicted and recomputed) over {sim.result.requests + sim.result.warmup} "
                     "requests")
    if sim is not None and sim.result.clipped:
        notes.append(f"{sim.result.clipped} of the {sim.result.requests} simulated requests had sampled lengths "
                     f"cut to max_model_len {settings.max_model_len} (raise workload.max_context_tokens to keep "
                     "the distribution's tail)")
    level = adv.support.get((dep.engine, "weight", dep.weight_dtype, gpu.architecture))
    if level == "fallback":
        notes.append(f"{dep.weight_dtype} has no native tensor-core path on {gpu.architecture}: weights are "
                     "stored in it but the GEMMs run in 16 bits (saves memory, not compute)")
    notes.extend(lever_notes(lever_choice(adv, model, dep, wl), dep.pp))
    usd_m = (usd_h / (predicted.output_tok_s * S_PER_HOUR) * TOKENS_PER_MILLION
             if usd_h and predicted.output_tok_s > 0 else None)
    return PredictionResponse(
        fits=True, model=model.id, predicted=predicted, memory_per_gpu_gb=mem,
        cost=Cost(usd_per_hour=round(usd_h, 4) if usd_h else None,
                  usd_per_million_output_tokens=round(usd_m, 4) if usd_m else None,
                  price_source=gpu.sources.price),
        settings=settings, confidence=confidence,
        launch=launch, notes=notes)


def predicted_figures(res: Result, params: Params, i: int, wl: Workload, sim: Simulation | None = None,
              replicas: int = 1) -> Predicted:
    """The response's figures, from one mechanism: every latency mean and percentile and the throughput
    from the simulation when there is one (so that p50 <= p90 <= p95 <= p99 and each mean lies within its
    distribution), else all from the analytic model (its means, an analytic tail). Memory, capacity,
    the prompt alone and the compute share are the analytic model's either way (no load involved)."""
    analytic = analytic_predicted(res, params, i, wl)
    if sim is None:
        return analytic
    s = simulated(sim)
    r = sim.result
    thr = 1.0
    if res.correction is not None:     # users' measurements nearby: the factors the analytic figures got
        s, thr = corrected_simulated(s, res.correction[i])
    tpot = s.tpot_ms if s.tpot_ms is not None else LatencyStats(
        **{k: round(s.itl_ms.mean if s.itl_ms else 0.0, 3) for k in ("mean", "p50", "p90", "p95", "p99")})
    # the deployment's throughput: the simulated replica's times the replicas, a closed loop's scaled by the
    # clients each replica has on average over those the busiest one (the one simulated) has
    scale = float(replicas)
    if wl.concurrency is not None:
        scale = float(wl.concurrency) / math.ceil(wl.concurrency / replicas)
    return analytic.model_copy(update={
        "ttft_ms": s.ttft_ms.mean, "ttft_p50_ms": s.ttft_ms.p50, "ttft_p90_ms": s.ttft_ms.p90,
        "ttft_p95_ms": s.ttft_ms.p95, "ttft_p99_ms": s.ttft_ms.p99,
        "tpot_ms": tpot.mean, "tpot_p50_ms": tpot.p50, "tpot_p90_ms": tpot.p90, "tpot_p95_ms": tpot.p95,
        "tpot_p99_ms": tpot.p99, "e2e_ms": s.e2e_ms.mean, "e2e_p95_ms": s.e2e_ms.p95,
        # tokens generated over the simulated window (in-flight requests' included), and the requests they
        # make at the workload's mean lengths: output = requests/s x output tokens holds
        "output_tok_s": round(r.output_tok_s * thr * scale, 2),
        "total_tok_s": round(r.output_tok_s * thr * scale * (wl.input_tokens + wl.output_tokens)
                             / wl.output_tokens, 2),
        "requests_per_s": round(r.output_tok_s * thr * scale / wl.output_tokens, 4),
        "batch_per_replica": round(r.batch_mean, 2),
        "percentile_method": percentile_method(sim), "simulation": s})

def corrected_simulated(s: Simulated, factors: NDArray[np.float64]) -> tuple[Simulated, float]:
    """The simulation's figures scaled by the correction of users' measurements (TTFT, TPOT and throughput
    factors), as the analytic figures are: each statistic of one distribution by one factor, so their
    order holds; E2E by the factor of its mean TTFT and decode parts. Also the throughput factor."""
    f_ttft, f_tpot, f_thr = (float(v) for v in factors)

    def scaled(st: LatencyStats | None, k: float, digits: int) -> LatencyStats | None:
        return None if st is None else LatencyStats(**{q: round(v * k, digits)
                                                        for q, v in st.model_dump().items()})

    e2e, ttft = s.e2e_ms.mean, s.ttft_ms.mean
    f_e2e = (f_ttft * ttft + f_tpot * (e2e - ttft)) / e2e if e2e > 0 else 1.0
    return s.model_copy(update={
        "ttft_ms": scaled(s.ttft_ms, f_ttft, 2), "tpot_ms": scaled(s.tpot_ms, f_tpot, 3),
        "itl_ms": scaled(s.itl_ms, f_tpot, 3), "e2e_ms": scaled(s.e2e_ms, f_e2e, 2),
        "replica_output_tok_s": round(s.replica_output_tok_s * f_thr, 2)}), f_thr
