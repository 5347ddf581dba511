"""The step model of one candidate on floats, compiled by numba: what the serving solve (serve_kernel.py) and
the scheduler simulation (sim_kernel.py) call inside their loops. ``StepModel`` (step_model.py) is the same
arithmetic on arrays; tests check that the two agree."""

from __future__ import annotations

import math

from numba import njit


@njit(cache=True, error_model="numpy")
def smooth_max_f(a: float, b: float) -> float:
    """``smooth_max`` on floats, compiled."""
    hi = max(a, b, 1e-30)
    r = min(a, b) / hi
    r *= r
    r *= r
    return hi * math.sqrt(math.sqrt(1.0 + r))


@njit(cache=True, error_model="numpy")
def carried_prefill_f(batch: float, tokens: float, compute_s: float, pp: float, log_miss: float, expert_s: float,
                       moe: bool) -> float:
    """``StepModel.carried_prefill_s``, compiled (the scheduler simulation's loop calls it)."""
    if not moe:
        return compute_s
    # expected share of experts routed to by n tokens per stage: 1 - (1 - k/E)^n
    extra = math.expm1(batch / pp * log_miss) - math.expm1((batch + tokens) / pp * log_miss)
    return smooth_max_f(compute_s, pp * expert_s * extra)


@njit(cache=True, error_model="numpy")
def expert_read_f(b: float, expert_s: float, log_miss: float, moe: bool) -> float:
    """Time to read the routed experts a micro-batch of ``b`` tokens touches (MoE; 0 for a dense model)."""
    # expected share of experts the batch routes to: 1 - P(an expert is missed by all b tokens)
    return expert_s * -math.expm1(b * log_miss) if moe else 0.0


@njit(cache=True, error_model="numpy")
def decode_step_at_f(b: float, pp: float, dense_s: float, expert_read_s: float, seq_s: float, flop_s_seq: float,
                      comm_fixed_s: float, comm_seq_s: float, step_fixed_s: float) -> tuple[float, float]:
    """``decode_step_f`` given the micro-batch per stage ``b`` and its expert reads (the root finding computes
    those apart, so that the rest runs on several candidates at once)."""
    t_mem = dense_s + b * seq_s + expert_read_s
    t_cmp = b * flop_s_seq
    stage = smooth_max_f(t_mem, t_cmp) + comm_fixed_s + b * comm_seq_s
    return pp * stage + step_fixed_s, t_cmp / (t_cmp + t_mem)


@njit(cache=True, error_model="numpy")
def draft_read_f(batch: float, draft_expert_s: float, draft_log_miss: float) -> float:
    """``StepModel.draft_read_s``, compiled: the routed experts an MoE draft's passes over ``batch`` sequences
    read (0 without an MoE draft: ``draft_log_miss`` 0): ``expert_read_f`` of the whole batch."""
    return expert_read_f(max(batch, 1e-9), draft_expert_s, draft_log_miss, True)


@njit(cache=True, error_model="numpy")
def decode_step_f(batch: float, pp: float, dense_s: float, expert_s: float, log_miss: float, moe: bool,
                   seq_s: float, flop_s_seq: float, comm_fixed_s: float, comm_seq_s: float,
                   step_fixed_s: float, draft_expert_s: float, draft_log_miss: float) -> tuple[float, float]:
    """``StepModel.decode_step`` of one candidate at the workload's mean context (tests check they agree)."""
    b = max(batch / pp, 1e-9)
    step, share = decode_step_at_f(b, pp, dense_s, expert_read_f(b, expert_s, log_miss, moe), seq_s, flop_s_seq,
                                   comm_fixed_s, comm_seq_s, step_fixed_s)
    return step + draft_read_f(batch, draft_expert_s, draft_log_miss), share

