"""What the scheduler simulation's event loop runs (``Plan``) and leaves (``Trace``), and ``run``, which packs
the one into the compiled loop's named inputs (sim_kernel.py) and reads the other back.

service/core/simulate.py draws the requests, prices them with the step model and summarises the trace; the
scheduler the loop follows is described there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from service.core import sim_kernel as sk
from service.core.candidates import MODE_CONCURRENCY
from service.core.sim_kernel import decode_rows
from service.core.step_model import StepModel
from service.core.types import I_, F

__all__ = ["Plan", "StepTable", "Trace", "decode_rows", "run", "warm_up"]


@dataclass
class StepTable:
    """Decode step times ``rows[batch, point]`` on an even grid of attended layer-tokens (full-attention layers x
    context + sliding-window layers x min(context, window)): the step model is a smooth maximum of two lines
    in them, so interpolating linearly between points has no kink where a window fills."""

    rows: F
    u_lo: float                  # layer-tokens at the first point
    inv_du: float                # points per layer-token
    full_layers: float
    window_layers: float
    window_tok: float            # math.inf without a window

    def at(self, batch: int, ctx_tok: float) -> float:
        """Step time of ``batch`` sequences at mean context ``ctx_tok`` (the loop inlines this arithmetic)."""
        u = self.full_layers * ctx_tok + self.window_layers * min(ctx_tok, self.window_tok)
        row = self.rows[batch]
        x = (u - self.u_lo) * self.inv_du
        k = min(max(int(x), 0), len(row) - 2)
        return float(row[k] + (x - k) * (row[k + 1] - row[k]))


@dataclass
class Plan:
    """What the loop runs: the requests and their costs, the first arrivals, the replica's limits and step times."""

    mode: int
    in_tok: I_
    out_tok: I_
    cp_s: F                      # replica time per prompt token carried by a decode step
    pc_s: F                      # compute per prompt token when the prompt is prefilled alone
    alone_s: F                   # the whole prompt as a step of its own
    send_steps: F                # closed loop: a client's send after its last request ended, share of a step
    arrival_s: F                 # time at the scheduler of the requests sent so far, in order ...
    arrival_rid: I_              # ... and which requests they are
    next_rid: int                # closed loop: the request a client sends when its last one ends
    first_meas: int              # measured requests: [first_meas, end_meas)
    end_meas: int
    fixed_s: float               # front end: a client's send to the scheduler
    table: StepTable
    max_tok: int                 # token budget of a step
    max_run: int                 # running requests at most
    cap_tok: float               # KV cache, tokens
    chunked: bool
    reserve: bool
    overhead_s: float            # per-step overhead
    one: StepModel               # the candidate's step model with float fields (its Static as one-row arrays)


@dataclass
class Trace:
    t_arr: F                     # at the scheduler (the client's send + the front end)
    t_admit: F                   # first admission
    t_first: F
    t_done: F
    itl_v: F                     # inter-token gaps ...
    itl_w: F                     # ... and how many tokens each stands for
    window_s: float              # from the first measured arrival to the last measured completion
    tok_out: int                 # in the window
    tok_in: int
    done_window: int
    busy_b_s: float              # integral of the decoding batch over the window
    preemptions: int
    steps: int
    events: int
    simulated: int


def _scalars(plan: Plan) -> F:
    """The loop's float scalars at their offsets (``sk.K_*``)."""
    one, tb = plan.one, plan.table
    s = one.s
    win = float(s.window_tok[0])
    k = np.empty(sk.K_SIZE)
    for offset, value in (
            (sk.K_LIN_FLOPS_TOK, float(s.lin_flops_tok[0])), (sk.K_GEMM_RATE_FLOPS_S, one.gemm_rate_flops_s),
            (sk.K_ATTN_RATE_FLOPS_S, one.attn_rate_flops_s), (sk.K_HEADS_DIMS, float(s.heads_dims[0])),
            (sk.K_FULL_LAYERS, float(s.full_layers[0])), (sk.K_WINDOW_LAYERS, float(s.window_layers[0])),
            (sk.K_WINDOW_TOK, win if win > 0 else math.inf), (sk.K_N_GPU, float(s.n_gpu[0])),
            (sk.K_TP, float(s.tp[0])), (sk.K_COMM_PER_TOK_S, one.comm_per_tok_s),
            (sk.K_PP, one.pp), (sk.K_MOE, float(bool(one.moe))), (sk.K_LOG_MISS, one.log_miss),
            (sk.K_EXPERT_S, one.expert_s), (sk.K_WEIGHTS_READ_S, one.weights_read_s),
            (sk.K_AR_LATENCY_S, one.ar_latency_s), (sk.K_PP_HANDOFF_S, one.pp_handoff_s),
            (sk.K_AR_BYTES_TOK, one.ar_bytes_tok), (sk.K_LINK_BYTES_S, one.link_bytes_s),
            (sk.K_TABLE_U_LO, tb.u_lo), (sk.K_TABLE_INV_DU, tb.inv_du),
            (sk.K_TABLE_FULL_LAYERS, tb.full_layers), (sk.K_TABLE_WINDOW_LAYERS, tb.window_layers),
            (sk.K_TABLE_WINDOW_TOK, tb.window_tok), (sk.K_FIXED_S, plan.fixed_s),
            (sk.K_CAP_TOK, plan.cap_tok), (sk.K_OVERHEAD_S, plan.overhead_s),
            (sk.K_VERIFY_TOK, one.verify_tok), (sk.K_TOK_PER_STEP, one.tok_per_step)):
        k[offset] = float(value)
    return k


def _limits(plan: Plan) -> I_:
    """The loop's integers at their offsets (``sk.L_*``)."""
    lim = np.empty(sk.L_SIZE, dtype=np.int64)
    for offset, value in (
            (sk.L_CLOSED, plan.mode == MODE_CONCURRENCY), (sk.L_NEXT_RID, plan.next_rid),
            (sk.L_FIRST_MEAS, plan.first_meas), (sk.L_END_MEAS, plan.end_meas),
            (sk.L_MAX_TOK, plan.max_tok), (sk.L_MAX_RUN, plan.max_run),
            (sk.L_CHUNKED, plan.chunked), (sk.L_RESERVE, plan.reserve)):
        lim[offset] = int(value)
    return lim


def run(plan: Plan, compiled: bool = True) -> Trace:
    """Run the loop until every measured request has finished (``compiled=False``: as plain Python)."""
    loop = sk.loop if compiled else sk.loop.py_func
    # every array in the type warm_up() compiles for (another type would compile the loop again)
    tok = np.empty((2, len(plan.in_tok)), dtype=np.int64)
    tok[sk.TOK_IN], tok[sk.TOK_OUT] = plan.in_tok, plan.out_tok
    cost = np.empty((sk.COST_ROWS, len(plan.in_tok)))
    cost[sk.COST_CARRIED_S], cost[sk.COST_COMPUTE_S] = plan.cp_s, plan.pc_s
    cost[sk.COST_ALONE_S], cost[sk.COST_SEND_STEPS] = plan.alone_s, plan.send_steps
    out = loop(tok, cost, plan.arrival_s.astype(np.float64), plan.arrival_rid.astype(np.int64),
               np.ascontiguousarray(plan.table.rows, dtype=np.float64), _scalars(plan), _limits(plan))
    (t_arr, t_admit, t_first, t_done, itl_v, itl_w, window_s, tok_out, tok_in, done_window, busy_b_s,
     preemptions, steps, events, simulated) = out
    return Trace(t_arr=t_arr, t_admit=t_admit, t_first=t_first, t_done=t_done, itl_v=itl_v, itl_w=itl_w,
                 window_s=window_s, tok_out=int(tok_out), tok_in=int(tok_in), done_window=int(done_window),
                 busy_b_s=busy_b_s, preemptions=int(preemptions), steps=int(steps), events=int(events),
                 simulated=int(simulated))


def warm_up() -> float:
    """Compile the event loop and the step-table builder (sim_kernel.warm_up); seconds."""
    return sk.warm_up()
