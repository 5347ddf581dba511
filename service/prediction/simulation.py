"""The scheduler simulation for the API: a request's workload and deployment as a simulated replica, and the
simulation's figures as the response's percentile fields.

No web framework or database here; the core is service/core/simulate.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from service.core.costmodel import MODES, Params, Static
from service.core.simulate import Lengths, Load, SimResult, Stat, replica, simulate
from service.engines.registry import engine_for
from service.schemas.predictions import (
    DEFAULT_SIM_REQUESTS,
    Deployment,
    LatencyStats,
    LengthDistribution,
    Simulated,
    SimulationOptions,
    Workload,
)
from service.units import MS_PER_S

# Closed-loop clients one replica may be simulated with: every client's first request is simulated before
# the measured ones, so the work grows with the clients (cost per request: benchmarks/sim_speed.py). Beyond
# it the percentiles stay analytic: a bound on the work of one request.
MAX_SIM_CLIENTS_PER_REPLICA = 10_000
# Requests of a benchmark run (workload.num_requests with concurrency) simulated per replica at most (a bound
# on the work of one request); a longer run is simulated as its first this many requests (its first wave
# weighs more in them).
MAX_BENCHMARK_REQUESTS = 20_000
VLLM_SCHEDULER = ("vLLM V1: decode-first, chunked prefill within max_num_batched_tokens, KV allocated as "
                  "tokens are computed, the newest request preempted and recomputed when the cache runs out")
TRTLLM_SCHEDULER = ("TensorRT-LLM in-flight batching: decode-first, GUARANTEED_NO_EVICT (a request is admitted "
                    "only when prompt + output fit in the KV cache, never preempted), {chunking} within "
                    "max_num_tokens")


@dataclass
class Simulation:
    result: SimResult
    load_per_replica: str
    scheduler: str
    mode: str                   # the workload's mode
    fixed_lengths: bool         # no length distribution given
    benchmark_run: bool = False  # a closed loop started all at once, its first wave measured


def lengths(mean_tok: int, dist: LengthDistribution | None) -> Lengths:
    if dist is None:
        return Lengths(float(mean_tok))
    if dist.histogram:
        return Lengths(float(mean_tok), hist_tok=tuple(float(b.tokens) for b in dist.histogram),
                       hist_weight=tuple(b.weight for b in dist.histogram))
    return Lengths(float(mean_tok), std_tok=float(dist.std_tokens or 0.0))


def skip_reason(dep: Deployment, wl: Workload) -> str | None:
    """Why a workload is not simulated (its percentiles stay analytic), or None."""
    if wl.concurrency is not None and math.ceil(wl.concurrency / dep.serving_units) > MAX_SIM_CLIENTS_PER_REPLICA:
        return (f"not simulated: {math.ceil(wl.concurrency / dep.serving_units)} clients per replica exceed the "
                f"{MAX_SIM_CLIENTS_PER_REPLICA} a simulation takes; the percentiles are analytic")
    return None


# Simulations already run, by what they depend on: a recommendation's candidates that differ only where the
# step model does not (8-bit weights of two formats with the same fitted parameters, say) are simulated once.
SimMemo = dict[tuple[bytes, bool, bool, Load], SimResult]


def simulation_key(static: Static, params: Params) -> bytes:
    """Every static term and parameter of a one-candidate ``static`` and ``params``, as bytes."""
    return b"".join(np.ascontiguousarray(getattr(obj, f.name)).tobytes()
                    for obj in (static, params) for f in fields(obj))


def simulate_deployment(static: Static, params: Params, dep: Deployment, wl: Workload,
                        opts: SimulationOptions, memo: SimMemo | None = None) -> Simulation:
    """Candidate 0 of ``static`` (the deployment ``dep``) serving its share of ``wl`` on one replica.
    ``memo``: the simulations the caller has run for the same request; one with the same inputs (static
    terms, parameters, scheduler and load) is not run again."""
    engine = engine_for(dep.engine)
    # vLLM V1 always chunks prompts (engines/vllm-*.yaml adjustments). TensorRT-LLM's flag defaults to off
    # (trtllm-*.yaml), but whole prompts only would starve a prompt as long as max_num_tokens behind any
    # decode, and the stored TensorRT-LLM runs show no such starvation (8192-token prompts at the default
    # budget answered in ~1 s where whole-prompt scheduling simulates minutes: benchmarks/accuracy.py
    # --simulate): its prompts are simulated chunked unless the request turns chunking off.
    chunked = engine.always_chunks_prefill or dep.engine_args.enable_chunked_prefill is not False
    reserve_full = engine.reserves_whole_sequences
    n_rep = dep.serving_units      # a replica's attention DP ranks each schedule their own share
    requests = opts.requests or DEFAULT_SIM_REQUESTS
    if wl.mode == "concurrency":
        clients = wl.concurrency or 1
        value = float(math.ceil(clients / n_rep))
        share = (f"{clients} clients / {n_rep} replicas: {value:.0f} clients (the busiest replica)" if n_rep > 1
                 else f"{clients} clients")
        if wl.benchmark_run:
            # the run as its benchmark client sends it: its requests (the busiest replica's share), all clients
            # starting together, the first wave measured
            requests = min(math.ceil((wl.num_requests or 1) / n_rep), MAX_BENCHMARK_REQUESTS)
            share += f", a benchmark run of {requests} requests"
    elif wl.mode == "request_rate":
        value = float(wl.request_rate or 0.0) / n_rep
        share = f"{value:.4g} req/s Poisson" + (f" ({wl.request_rate} req/s split over {n_rep} replicas)"
                                               if n_rep > 1 else "")
    else:
        value = 0.0
        if wl.num_requests:
            requests = min(math.ceil(wl.num_requests / n_rep), requests)
        share = f"{requests} requests at once"
    load = Load(MODES[wl.mode], value, lengths(wl.input_tokens, wl.input_distribution),
                lengths(wl.output_tokens, wl.output_distribution), requests=requests, seed=opts.seed,
                burst_start=wl.benchmark_run)
    scheduler = TRTLLM_SCHEDULER.format(
        chunking="prompts chunked" if chunked else "whole prompts only (enable_chunked_prefill: false)"
    ) if reserve_full else VLLM_SCHEDULER

    def run() -> SimResult:
        return simulate(replica(static, params, 0, chunked_prefill=chunked, reserve_full=reserve_full), load)

    if memo is None:
        result = run()
    else:
        key = (simulation_key(static, params), chunked, reserve_full, load)
        if key not in memo:
            memo[key] = run()
        result = memo[key]
    return Simulation(result, share, scheduler, wl.mode,
                      wl.input_distribution is None and wl.output_distribution is None, wl.benchmark_run)


def _ms(stat: Stat, digits: int) -> LatencyStats | None:
    if math.isnan(stat.mean):
        return None
    return LatencyStats(**{k: round(getattr(stat, k) * MS_PER_S, digits) for k in ("mean", "p50", "p90", "p95", "p99")})


def simulated(sim: Simulation) -> Simulated:
    r = sim.result
    ttft, e2e, queue = _ms(r.ttft_s, 2), _ms(r.e2e_s, 1), _ms(r.queue_s, 2)
    assert ttft is not None and e2e is not None and queue is not None   # every measured request has them
    return Simulated(
        requests=r.requests, warmup_requests=r.warmup, seed=r.seed, load_per_replica=sim.load_per_replica,
        ttft_ms=ttft, tpot_ms=_ms(r.tpot_s, 3), itl_ms=_ms(r.itl_s, 3), e2e_ms=e2e, queue_ms=queue,
        replica_output_tok_s=round(r.output_tok_s, 2), replica_requests_per_s=round(r.requests_s, 4),
        batch_per_replica=round(r.batch_mean, 2), preemptions=r.preemptions, saturated=r.saturated,
        clipped_requests=r.clipped, scheduler=sim.scheduler)


def percentile_method(sim: Simulation) -> str:
    r = sim.result
    origin = {"offline": "latencies counted from admission (the job's own queue is simulation.queue_ms)",
              "concurrency": "a benchmark run (every client sends its first request at once; the first wave is "
              "measured)" if sim.benchmark_run else f"steady state (clients start spread over a request cycle; "
              f"{r.warmup} warm-up requests dropped)",
              "request_rate": f"steady state ({r.warmup} warm-up requests dropped)"}[sim.mode]
    return (f"simulated: {r.requests} requests (seed {r.seed}) through a discrete-event simulation of one "
            f"replica's scheduler at {sim.load_per_replica}, {origin}; every step timed by the calibrated step "
            "model. Every latency mean and percentile (TTFT, TPOT, E2E) and the throughput come from it (ITL "
            "and queueing are in simulation); memory, capacity, prefill_ms and compute_bound_share are the "
            "analytic model's"
            + ("; each client sends its next request at a point of the engine step that ended its last one "
               "drawn uniform over the step (nothing ties a client's turnaround to the step boundaries), so "
               "clients fall out of step as real ones do" if sim.mode == "concurrency" else "")
            + ("; lengths fixed as given: give input_distribution/output_distribution for traffic whose "
               "lengths vary" if sim.fixed_lengths and sim.mode == "concurrency" else ""))
