"""Discrete-event simulation of one engine replica's continuous-batching scheduler.

The analytic model (costmodel.py) gives steady-state means; an SLA is a percentile, and the tail comes from
queueing, from prefills that stall decodes and from requests of different lengths. This module replays a
stream of requests through a scheduler like the engine's and times every step with the calibrated step
model (``costmodel.step_model``), so the latency distributions follow from the same physics as the means.

The scheduler (vLLM V1 ``Scheduler.schedule``; TensorRT-LLM's in-flight batching where it differs):

* Each step first gives one token to every running sequence that is decoding (decode-first), then spends
  what is left of the token budget (``max_num_batched_tokens``) on prompts: partially prefilled ones in
  admission order, then waiting requests first-come first-served, while fewer than ``max_num_seqs`` run.
  With chunked prefill (vLLM V1 always; for TensorRT-LLM see service/prediction/simulation.py) a prompt is cut to
  the budget left; without it a prompt waits for a step with room for all of it.
* KV cache (vLLM): a request holds KV for the tokens computed so far, allocated as it goes; when a step's
  tokens do not fit, the newest running request is preempted (its KV freed, recomputed from scratch later,
  first in the queue) and nothing new is admitted in that step. TensorRT-LLM's default
  ``GUARANTEED_NO_EVICT`` admits a request only when prompt + output fit beside what the running requests
  reserved, so it never preempts.
* A step that decodes ``b`` sequences at mean context ``c`` and carries prompt tokens takes
  ``decode_step(b, c)`` plus the prompt tokens' compute, ``sum(tokens x prefill_tok_s(prompt length))``
  (for MoE models, against reading the experts those tokens route to beyond the decodes':
  ``carried_prefill_s``); a step with no decodes is a prefill on its own, ``prefill_only_s + step
  overhead``. The first token of a request is sampled at the end of the step that completes its prompt
  (so it waits for that whole step, its decodes included); each decode step emits one more.
* Arrivals: Poisson at a rate, a closed loop of N clients, or all at once (offline). A closed-loop client
  sends its next request once its last one has ended: the last token reaches it through the engine's
  output processing and the network, while the engine runs its next step, at a point of that step nothing
  ties to the step boundaries, drawn uniform over a step (the step that ended the request). Without that
  draw, clients whose requests end in the same step would send together, and every request of a
  fixed-length closed loop would meet the same steps in the same phase: one TTFT and one E2E for all. The
  fitted front-end time (``ttft_fixed_s``: HTTP, tokenisation) delays each request's arrival at the scheduler
  and counts in its TTFT and E2E.

Speed: the loop (service/core/sim_kernel.py) advances a run of identical steps in one move, with decode
step times from a table of the step model over batch sizes and a grid of contexts; it turns only at events
(two or three per request), and is compiled by numba, as is the step table, because a recommendation
simulates several candidates of thousands of requests each (benchmarks/sim_speed.py measures it).

Steady state: closed loops drop the first wave of clients and a tenth of the requests as warm-up; Poisson
runs drop a tenth; arrivals continue after the measured requests until they all finish. Offline runs
measure the whole job, with latencies counted from admission (the job's own queue is the queue time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from service.core.candidates import MODE_CONCURRENCY, MODE_OFFLINE, MODE_RATE, Params, take_rows
from service.core.memory import Static
from service.core.scheduler import Plan, StepTable, Trace, decode_rows, run
from service.core.step_model import StepModel, step_model
from service.core.types import F

# Requests measured per simulation by default: p99 then rests on the 20 slowest (benchmarks/sim_speed.py
# times it; at this size a configuration takes tens of milliseconds).
DEFAULT_REQUESTS = 2000
# What POST /v1/predictions simulates by default: the p99 rests on the 10 slowest. A recommendation predicts each
# candidate it offers, and a calibration anchors a user's measurement, with the same count, so all three agree.
PREDICTION_REQUESTS = 1000
# Share of the measured count simulated before measuring (warm-up; closed loops also drop the first wave),
# and the requests drawn to follow them (arrivals that keep the load on until the measured requests finish;
# only those sent by then are simulated: a heavy-tailed length can outlast many later requests).
WARMUP_SHARE = 0.1
COOLDOWN_SUPPLY = 1.0
# Points of the decode step-time table's grid over the contexts the requests can reach (linear
# interpolation between them, in attended layer-tokens, where the step time is a smooth maximum of two
# lines; tests/core/test_simulate.py measures 6e-6 over 1k-5k tokens and 0.56% over 1-32k, where the bend of
# the maximum at short contexts and large batches falls between points 256 tokens apart).
CTX_GRID_POINTS = 129
# A Poisson run whose completions fall short of the offered rate by more than this share is saturated
# (the queue grows for as long as the run lasts); two thousand requests carry a ~2% counting noise.
SATURATION_SHORTFALL = 0.05
QUANTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}


@dataclass(frozen=True)
class Lengths:
    """Token lengths of requests: fixed (``mean_tok``), lognormal with mean ``mean_tok`` and standard deviation
    ``std_tok``, or a histogram (``hist_tok`` values drawn with relative frequencies ``hist_weight``)."""

    mean_tok: float
    std_tok: float = 0.0
    hist_tok: tuple[float, ...] = ()
    hist_weight: tuple[float, ...] = ()

    @property
    def fixed(self) -> bool:
        """Every request the same length (no random draw)."""
        return not self.hist_tok and self.std_tok <= 0

    def sample(self, rng: np.random.Generator | None, n: int) -> NDArray[np.int64]:
        """``n`` lengths drawn with ``rng`` (None will do for fixed lengths, which draw nothing)."""
        if self.fixed:
            return np.full(n, max(round(self.mean_tok), 1), dtype=np.int64)    # as np.rint: half to even
        assert rng is not None
        if self.hist_tok:
            w = np.asarray(self.hist_weight, dtype=np.float64)
            x = rng.choice(np.asarray(self.hist_tok, dtype=np.float64), size=n, p=w / w.sum())
        else:
            # lognormal with the given mean and standard deviation: sigma^2 = ln(1 + cv^2), mu = ln(mean) - sigma^2/2
            sigma2 = math.log1p((self.std_tok / self.mean_tok) ** 2)
            x = rng.lognormal(math.log(self.mean_tok) - sigma2 / 2.0, math.sqrt(sigma2), size=n)
        return np.maximum(np.rint(x), 1.0).astype(np.int64)


@dataclass(frozen=True)
class Load:
    """What one replica serves: ``mode`` MODE_RATE (``value`` requests/s, Poisson), MODE_CONCURRENCY
    (``value`` clients in a closed loop) or MODE_OFFLINE (``requests`` at once)."""

    mode: int
    value: float
    input: Lengths
    output: Lengths
    requests: int = DEFAULT_REQUESTS
    seed: int = 0
    # closed loop: every client sends its first request at t = 0, as a benchmark client does, and that first
    # wave is measured (no warm-up). Default: clients start spread over one estimated request cycle and
    # the warm-up is dropped (the steady state an SLA is about)
    burst_start: bool = False


@dataclass
class Replica:
    """One candidate's replica: its step model and its scheduler's limits."""

    step: StepModel              # the candidate alone (one-row arrays): step-time tables, per-prompt costs
    scalar: StepModel            # the same with float fields: prefill-only steps inside the loop
    max_num_seqs: int
    max_batched_tok: int
    kv_capacity_tok: float       # tokens the KV pool holds (bytes per token at the workload's mean context)
    max_model_len: int
    chunked_prefill: bool
    reserve_full: bool           # admit only when prompt + output fit (TensorRT-LLM GUARANTEED_NO_EVICT)


def replica(static: Static, params: Params, i: int, *, chunked_prefill: bool = True,
            reserve_full: bool = False) -> Replica:
    """Candidate ``i`` of ``static`` under ``params`` (per-candidate arrays or scalars) as a simulated replica."""
    idx = np.asarray([i])
    alone = len(static.isl) == 1          # already one candidate's (a single prediction's): taken as it is
    s = static if alone else take_rows(static, idx)
    p = Params(*(np.atleast_1d(np.asarray(v, dtype=np.float64))[idx if np.ndim(v) and not alone else [0]]
                 for v in (getattr(params, f) for f in Params.__dataclass_fields__)))
    sm = step_model(s, p)
    ctx_mean_tok = float(s.isl[0] + s.osl[0] / 2.0)
    return Replica(
        step=sm, scalar=sm.one(0), max_num_seqs=int(s.max_num_seqs[0]), max_batched_tok=int(s.max_batched_tok[0]),
        kv_capacity_tok=float(s.kv_pool[0]) * ctx_mean_tok / max(float(s.seq_mean[0]), 1e-30),
        max_model_len=int(s.context_tok[0]), chunked_prefill=chunked_prefill, reserve_full=reserve_full)


_Q = np.asarray(list(QUANTILES.values()))


@lru_cache(maxsize=16)
def _interpolation(n: int) -> tuple[NDArray[np.int64], NDArray[np.int64], F]:
    """Where ``QUANTILES`` fall in ``n`` sorted values (numpy's linear method): below, above and the weight of above."""
    virtual = _Q * (n - 1)
    below = np.minimum(np.floor(virtual).astype(np.int64), n - 1)
    return below, np.minimum(below + 1, n - 1), virtual - below


def _linear_quantiles(x: F) -> list[float]:
    """``np.percentile(x, 100 * QUANTILES)`` (its default linear method, equal to rounding) from one sort and
    four interpolations; numpy's general routine does far more work per call, and a simulation makes five."""
    xs = np.sort(x)
    below, above, gamma = _interpolation(len(xs))
    lo = xs[below]
    return (lo + (xs[above] - lo) * gamma).tolist()


@dataclass(frozen=True)
class Stat:
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float

    @classmethod
    def of(cls, x: F, weights: F | None = None) -> Stat:
        if not len(x):
            return cls(math.nan, math.nan, math.nan, math.nan, math.nan)
        if weights is None:
            return cls(float(np.mean(x)), *_linear_quantiles(x))
        # any order of equal values gives the same quantiles (a run of equal values ends at the same
        # cumulative weight whatever its order) and the mean is order-free: no stable sort needed
        order = np.argsort(x)
        xs, cw = x[order], np.cumsum(weights[order])
        at = np.searchsorted(cw, _Q * cw[-1], side="left")
        q = xs[np.minimum(at, len(xs) - 1)]
        return cls(float(np.dot(x, weights) / cw[-1]), *(float(v) for v in q))


@dataclass
class SimResult:
    """Latencies of the measured requests (seconds) and one replica's throughput over the measured window."""

    ttft_s: Stat
    tpot_s: Stat                 # per request: (E2E - TTFT) / (output - 1), requests of two tokens or more
    itl_s: Stat                  # every gap between consecutive tokens of a request (token-weighted)
    e2e_s: Stat
    queue_s: Stat                # arrival at the scheduler to first admission
    output_tok_s: float
    total_tok_s: float
    requests_s: float
    batch_mean: float            # sequences decoding, time-averaged
    requests: int                # measured
    warmup: int
    seed: int
    preemptions: int
    steps: int
    events: int                  # turns of the event loop (a step, or a run of decode steps)
    simulated: int               # requests that reached the scheduler (warm-up, measured, cool-down)
    clipped: int                 # measured requests whose sampled lengths were cut to max_model_len
    saturated: bool              # Poisson load above what the replica completes: the queue grew all run


def table_grid(sm: StepModel, ctx_lo_tok: float, ctx_hi_tok: float) -> tuple[float, float, F, float, float, float]:
    """The step table's grid for mean contexts ``ctx_lo_tok``..``ctx_hi_tok``: its first and last points in
    attended layer-tokens, the contexts of its points, and the full-attention layers, sliding-window layers
    and window (inf: none) it is measured in."""
    s = sm.s
    full, win_l = float(s.full_layers[0]), float(s.window_layers[0])
    win = float(s.window_tok[0]) or math.inf
    u_lo = full * ctx_lo_tok + win_l * min(ctx_lo_tok, win)
    u_hi = max(full * ctx_hi_tok + win_l * min(ctx_hi_tok, win), u_lo + 1.0)
    u = np.linspace(u_lo, u_hi, CTX_GRID_POINTS)
    # the contexts of those points: below the window every layer attends to all of it, above only the full ones
    if math.isfinite(win):
        u_win = (full + win_l) * win
        ctx = np.where(u <= u_win, u / (full + win_l), win + (u - min(u_win, u_hi)) / max(full, 1e-30))
    else:
        ctx = u / (full + win_l)
    return u_lo, u_hi, ctx, full, win_l, win


def decode_table(sm: StepModel, b_top: int, ctx_lo_tok: float, ctx_hi_tok: float) -> StepTable:
    """Decode step times of one candidate (``sm``: one-row arrays) for batches 0..``b_top`` at mean contexts
    from ``ctx_lo_tok`` to ``ctx_hi_tok``, on an even grid of attended layer-tokens (``table_grid``)."""
    u_lo, u_hi, ctx, full, win_l, win = table_grid(sm, ctx_lo_tok, ctx_hi_tok)
    # sm.decode_step(batch, ctx) over the grid, compiled, from the per-context terms decode_step uses
    seq_s, flop_s_seq = sm.context_terms(ctx)
    pp, dense_s, expert_s, log_miss, comm_fixed_s, comm_seq_s, step_fixed_s = (
        float(np.ravel(v)[0]) for v in (sm.pp, sm.dense_s, sm.expert_s, sm.log_miss, sm.comm_fixed_s, sm.comm_seq_s,
                                        sm.step_fixed_s))
    rows = decode_rows(int(b_top), pp, dense_s, expert_s, log_miss, bool(np.ravel(sm.moe)[0]), seq_s, flop_s_seq,
                       comm_fixed_s, comm_seq_s, step_fixed_s, float(np.ravel(sm.draft_expert_s)[0]),
                       float(np.ravel(sm.draft_log_miss)[0]))
    return StepTable(rows=rows, u_lo=u_lo, inv_du=(CTX_GRID_POINTS - 1) / (u_hi - u_lo),
                     full_layers=full, window_layers=win_l, window_tok=win)


def request_costs(sm: StepModel, isl: NDArray[np.int64]) -> tuple[F, F, F]:
    """Per request of ``isl`` prompt tokens: the time of a prompt token carried by a decode step; the compute
    per prompt token when the prompt is prefilled alone; the whole prompt as a step of its own. Prompts all
    of one length (fixed lengths) are priced once, the same figures: every operation is elementwise."""
    one_length = len(isl) > 1 and int(isl.min()) == int(isl.max())
    isl_f = np.full(1, float(isl[0])) if one_length else isl.astype(np.float64)
    cp = sm.prefill_tok_s(isl_f)
    prompt_s = sm.prompt_compute_s(isl_f)
    pc = prompt_s / isl_f
    alone = sm.prefill_only_s(prompt_s, isl_f) + sm.step_overhead_s
    if one_length:
        return np.full(len(isl), float(cp[0])), np.full(len(isl), float(pc[0])), np.full(len(isl), float(alone[0]))
    return cp, pc, alone


def simulate(rep: Replica, load: Load, compiled: bool = True) -> SimResult:
    """Simulate ``load`` on ``rep``. Deterministic for a given ``load.seed``. ``compiled=False`` runs the event
    loop as plain Python (the compiled loop must give the same trace: tests/core/test_simulate.py)."""
    sm, one = rep.step, rep.scalar
    n_meas = max(int(load.requests), 1)
    mode = load.mode
    clients = max(math.ceil(load.value - 1e-9), 1) if mode == MODE_CONCURRENCY else 0
    if mode == MODE_OFFLINE:
        warm, total = 0, n_meas
    elif mode == MODE_CONCURRENCY and load.burst_start:
        warm, total = 0, n_meas + clients
    else:
        warm = int(n_meas * WARMUP_SHARE) + clients
        # cool-down supply: only what is sent before the measured requests finish is simulated
        total = warm + n_meas + max(int(n_meas * COOLDOWN_SUPPLY), 2 * clients)
    # independent streams, so that a change of rate leaves the lengths alone (common random numbers)
    s_in, s_out, s_arr, s_send = np.random.SeedSequence(load.seed).spawn(4)
    # (seeding a generator is not free: fixed lengths, which draw nothing, go without)
    isl = load.input.sample(None if load.input.fixed else np.random.default_rng(s_in), total)
    osl = load.output.sample(None if load.output.fixed else np.random.default_rng(s_out), total)
    max_len = max(rep.max_model_len, 2)
    cut = (isl > max_len - 1) | (isl + osl > max_len)
    clipped = int(np.sum(cut[warm:warm + n_meas]))
    isl = np.minimum(isl, max_len - 1)
    osl = np.minimum(osl, max_len - isl)
    fixed_s = float(one.ttft_fixed_s)
    if mode == MODE_RATE:
        gaps = np.random.default_rng(s_arr).standard_exponential(total) / max(load.value, 1e-12)
        send = np.cumsum(gaps)
    else:
        send = np.zeros(total)

    CP, PC, ALONE = request_costs(sm, isl)
    in_min = int(isl.min())
    overhead_s = float(one.step_overhead_s)
    max_tok = rep.max_batched_tok
    cap = rep.kv_capacity_tok
    chunked, reserve = rep.chunked_prefill, rep.reserve_full
    # no more sequences decode than the limits, the requests, or the KV cache at the shortest prompt allow
    max_run = max(min(rep.max_num_seqs, max_tok), 1)
    b_top = min(max_run, total, clients if clients else total, int(cap / max(in_min, 1)) + 2)
    table = decode_table(sm, b_top, float(in_min), float((isl + osl).max()) + 1.0)

    # closed loop: when each client sends its next request within the step its last one ended (share of it)
    send_steps = (np.random.default_rng(s_send).random(total) if mode == MODE_CONCURRENCY else np.zeros(total))
    if mode == MODE_CONCURRENCY:
        first = min(clients, total)
        cycle_s = 0.0
        if not load.burst_start:
            # one request's cycle with the clients decoding together (or as many as the limits let run)
            in_mean, out_mean = float(np.mean(isl)), float(np.mean(osl))
            together = max(min(clients, b_top, int(cap / (in_mean + out_mean / 2.0))), 1)
            step_s = table.at(together, in_mean + out_mean / 2.0)
            e2e_s = fixed_s + float(one.prefill_alone_s) + overhead_s + (out_mean - 1.0) * step_s
            cycle_s = e2e_s * max(clients / together, 1.0)
        arrival_rid = np.arange(first, dtype=np.int64)
        arrival_s = np.asarray([fixed_s + rid * cycle_s / first for rid in range(first)], dtype=np.float64)
        next_rid = first
    else:
        arrival_rid = np.arange(total, dtype=np.int64)
        arrival_s = send + fixed_s
        next_rid = total
    trace = run(Plan(
        mode=mode, in_tok=isl, out_tok=osl, cp_s=CP, pc_s=PC, alone_s=ALONE, send_steps=send_steps,
        arrival_s=arrival_s,
        arrival_rid=arrival_rid, next_rid=next_rid, first_meas=warm, end_meas=warm + n_meas, fixed_s=fixed_s,
        table=table, max_tok=max_tok, max_run=max_run, cap_tok=cap, chunked=chunked, reserve=reserve,
        overhead_s=overhead_s, one=one), compiled)
    return _summarise(trace, osl, fixed_s, warm, n_meas, mode, load, clipped)


def _summarise(z: Trace, out_tok: NDArray[np.int64], fixed_s: float, warm: int, n_meas: int, mode: int, load: Load,
               clipped: int) -> SimResult:
    sl = slice(warm, warm + n_meas)
    arr = np.asarray(z.t_arr[sl])
    admit = np.asarray(z.t_admit[sl])
    first = np.asarray(z.t_first[sl])
    done = np.asarray(z.t_done[sl])
    out = np.asarray(out_tok[sl], dtype=np.float64)
    # latencies from the client's send (arrival minus the front end), or offline from admission
    start = admit - fixed_s if mode == MODE_OFFLINE else arr - fixed_s
    ttft = first - start
    e2e = done - start
    multi = out >= 2
    tpot = (done[multi] - first[multi]) / (out[multi] - 1.0)
    requests_s = z.done_window / z.window_s
    offered = load.value if mode == MODE_RATE else math.nan
    return SimResult(
        ttft_s=Stat.of(ttft), tpot_s=Stat.of(tpot), itl_s=Stat.of(np.asarray(z.itl_v), np.asarray(z.itl_w)),
        e2e_s=Stat.of(e2e), queue_s=Stat.of(admit - arr), output_tok_s=z.tok_out / z.window_s,
        total_tok_s=(z.tok_out + z.tok_in) / z.window_s, requests_s=requests_s,
        batch_mean=z.busy_b_s / z.window_s, requests=n_meas, warmup=warm, seed=load.seed,
        preemptions=z.preemptions, steps=z.steps, events=z.events, simulated=z.simulated, clipped=clipped,
        saturated=bool(requests_s < (1.0 - SATURATION_SHORTFALL) * offered))
