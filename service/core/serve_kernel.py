"""The serving steady state of each candidate, compiled by numba (``serve_into``): the per-candidate solve
behind serve.py.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit

from service.core.candidates import MODE_CONCURRENCY, MODE_OFFLINE, MODE_STATIC
from service.core.step_kernels import decode_step_at_f, decode_step_f, draft_read_f, expert_read_f
from service.core.types import B_, F

# Root-finding steps of the closed- and open-loop batch (Illinois regula falsi converges superlinearly;
# benchmarks/predict_speed.py --check-root measures the residual of Little's law left after them), the share
# of the saturated rate an overloaded open loop is evaluated at, and the floor on decode steps (a one-token
# output still occupies the batch for part of a step).
_ROOT_STEPS = 12
# Candidates per block of the root finding (_root_block): small enough that a block's working rows stay in
# the L1 cache over its steps, large enough that each step runs on several candidates at once (SIMD).
_ROOT_BLOCK = 64
_SATURATION_SHARE = 0.999
_MIN_DECODE_STEPS = 0.5
# Smallest prefill chunk an engine schedules when decodes fill the token budget (vLLM and TensorRT-LLM
# always make progress on a waiting prompt; the size is a modelling choice, not an engine constant, and
# the fitted efficiencies absorb it); and the utilisation at which the prefill queue is capped (beyond
# it the steady state does not exist and the closed loop's own limit, Little's law, takes over).
_MIN_CHUNK_TOK = 512.0
_MAX_PREFILL_UTILISATION = 0.95
# No bound on the requests ahead (open loops); finite so that a zero utilisation times it stays zero.
_NO_LIMIT = 1e30


@njit(cache=True, error_model="numpy")
def _ttft_f(b: float, step_s: float, arrivals: float, max_batched_tok: float, min_chunk: float, isl: float,
            c_prefill: float, alone: float, fixed_alone: float, ahead: float, wave_q: float, others: float,
            verify_tok: float, tok_per_step: float) -> float:
    """Mean TTFT with ``b`` sequences decoding in steps of ``step_s``: the front end and the prompt alone, what
    its chunks add inside decode steps, the wait in the prefill queue (M/D/1 at ``arrivals`` per second, at most
    ``ahead`` prompts ahead) and half a step to the next one. ``others``: the share of the decoding batch that
    belongs to other requests (a closed loop of one client finds no decode running when it sends).
    With speculation a step is a verify step per emitted token (``tok_per_step`` tokens each): the prompt chunk
    per step is the budget left by ``verify_tok`` tokens per decoding sequence, over ``tok_per_step``; a
    prompt waits for the next verify step, ``tok_per_step`` steps (the simulation's
    ``sim_kernel.prompt_budget_f``)."""
    chunk = max(max_batched_tok - b * verify_tok, min_chunk) / tok_per_step
    busy = min(b, 1.0) * others
    extra = busy * max(isl * (step_s / chunk + c_prefill) - alone, 0.0)
    service = alone + extra
    rho = min(arrivals * service, _MAX_PREFILL_UTILISATION)
    rho_service = rho * service
    wait = min(rho_service / (2.0 * (1.0 - rho)), ahead * rho_service)
    # half a verify step (tok_per_step steps) to the next one
    return fixed_alone + wait + extra + busy * 0.5 * step_s * tok_per_step + wave_q


@njit(cache=True, error_model="numpy")
def _offline_job(i: int, n_job: float, isl: float, dec_steps: float, max_batched_tok: float, c_prefill: float,
                 ttft_fixed_s: float, pp: float, dense_s: float, expert_s: float, log_miss: float, moe: bool,
                 seq_s: float, flop_s_seq: float, comm_fixed_s: float, comm_seq_s: float, step_fixed_s: float,
                 draft_expert_s: float, draft_log_miss: float, out_b: F, out_ttft: F, out_tpot: F, out_x: F,
                 out_share: F) -> None:
    """An offline job of ``n_job`` requests sent at once that the replica admits together (at most its cap):
    its prompts are prefilled in full steps of the token budget, each step also decoding the requests whose
    prompts are done (half the job on average); request k of the job gets its first token after k / n_job of
    those steps and decodes in full steps until the last prompt is done, then in decode steps of the whole
    job. Writes candidate ``i``'s batch, mean TTFT, mean TPOT, requests/s and compute share."""
    prefill_tok = n_job * isl
    n_pf = max(prefill_tok / max_batched_tok, 1.0)          # full steps that prefill the job's prompts
    st_half, _ = decode_step_f(max(0.5 * n_job, 1.0), pp, dense_s, expert_s, log_miss, moe, seq_s, flop_s_seq,
                               comm_fixed_s, comm_seq_s, step_fixed_s, draft_expert_s, draft_log_miss)
    t_full = st_half + prefill_tok / n_pf * c_prefill
    st_all, share = decode_step_f(n_job, pp, dense_s, expert_s, log_miss, moe, seq_s, flop_s_seq, comm_fixed_s,
                                  comm_seq_s, step_fixed_s, draft_expert_s, draft_log_miss)
    # decode tokens a request emits in full steps: min(k, O - 1) averaged over k uniform on [0, n_pf]
    d = dec_steps
    in_full = 0.5 * n_pf if n_pf <= d else d - d * d / (2.0 * n_pf)
    out_b[i] = n_job
    out_ttft[i] = ttft_fixed_s + 0.5 * (n_pf + 1.0) * t_full
    out_tpot[i] = (in_full * t_full + (d - in_full) * st_all) / d
    out_x[i] = n_job / (n_pf * t_full + d * st_all)
    out_share[i] = share


@njit(cache=True, error_model="numpy")
def _falsi_point_f(hi: float, lo: float, f_hi: float, f_lo: float) -> tuple[float, bool, float]:
    """Regula falsi on the bracket [lo, hi]: where its secant crosses zero, whether there is a secant (the
    excess rises across the bracket), and the bracket's width."""
    width = hi - lo
    denom = f_hi - f_lo
    return hi - f_hi * width / (denom if denom > 0 else 1.0), denom > 0, width


# Rows of the root finding's working block (w[row * _ROOT_BLOCK + k] for its candidate k): one array with rows
# at constant offsets, so that the compiler can tell the rows apart and run each step on several candidates
# at once (SIMD).
(_W_HI, _W_LO, _W_F_HI, _W_F_LO, _W_SIDE, _W_PP, _W_DENSE, _W_EXPERT, _W_LOG_MISS, _W_MOE, _W_SEQ, _W_FLOP_SEQ,
 _W_COMM_FIXED, _W_COMM_SEQ, _W_STEP_FIXED, _W_IO, _W_C_PREFILL, _W_DEC_STEPS, _W_MAX_TOK, _W_MIN_CHUNK, _W_ISL,
 _W_ALONE, _W_FIXED_ALONE, _W_AHEAD, _W_WAVE_Q, _W_TARGET, _W_EXPERT_TERM, _W_XB, _W_B1, _W_B, _W_F0,
 _W_OUT, _W_OTHERS, _W_DRAFT_EXPERT, _W_DRAFT_LOG_MISS, _W_VERIFY_TOK, _W_TOK_PER_STEP) = range(37)
_W_ROWS = _W_TOK_PER_STEP + 1        # the rows named above


@njit(cache=True, error_model="numpy", nogil=True)
def _root_block(w: F, closed: bool, any_moe: bool) -> None:
    """The root finding of one block of ``serve_into`` (every candidate of the block takes every step; the
    answer of one whose excess is not positive at the top end is the top end, as in the kernel's account)."""
    rb = _ROOT_BLOCK
    for it in range(_ROOT_STEPS + 2):
        if it == 0:
            for k in range(rb):
                w[_W_XB * rb + k] = w[_W_HI * rb + k]
        elif it == _ROOT_STEPS + 1:
            for k in range(rb):
                hi, lo, f_hi = w[_W_HI * rb + k], w[_W_LO * rb + k], w[_W_F_HI * rb + k]
                xb, secant, _ = _falsi_point_f(hi, lo, f_hi, w[_W_F_LO * rb + k])
                out = min(max(xb if secant else hi, lo), hi)
                out = out if f_hi > 0 else hi
                w[_W_OUT * rb + k] = out if w[_W_F0 * rb + k] > 0.0 else hi
            return
        else:
            for k in range(rb):
                hi, lo = w[_W_HI * rb + k], w[_W_LO * rb + k]
                xb, secant, width = _falsi_point_f(hi, lo, w[_W_F_HI * rb + k], w[_W_F_LO * rb + k])
                w[_W_XB * rb + k] = min(max(xb if secant else lo + 0.5 * width, lo), hi)
        for k in range(rb):         # decode_step_f's micro-batch per stage, of batch b1
            b1 = max(w[_W_XB * rb + k], 1.0)
            w[_W_B1 * rb + k] = b1
            w[_W_B * rb + k] = max(b1 / w[_W_PP * rb + k], 1e-9)
        if any_moe:                 # (calls expm1: a loop of its own; a dense block's expert reads stay 0)
            for k in range(rb):
                w[_W_EXPERT_TERM * rb + k] = expert_read_f(w[_W_B * rb + k], w[_W_EXPERT * rb + k],
                                                            w[_W_LOG_MISS * rb + k], w[_W_MOE * rb + k] > 0.0)
        for k in range(rb):
            xb = w[_W_XB * rb + k]
            b1 = w[_W_B1 * rb + k]
            st_b, _ = decode_step_at_f(w[_W_B * rb + k], w[_W_PP * rb + k], w[_W_DENSE * rb + k],
                                        w[_W_EXPERT_TERM * rb + k], w[_W_SEQ * rb + k], w[_W_FLOP_SEQ * rb + k],
                                        w[_W_COMM_FIXED * rb + k], w[_W_COMM_SEQ * rb + k], w[_W_STEP_FIXED * rb + k])
            st_b += draft_read_f(b1, w[_W_DRAFT_EXPERT * rb + k], w[_W_DRAFT_LOG_MISS * rb + k])
            c_pre = w[_W_C_PREFILL * rb + k]
            others = w[_W_OTHERS * rb + k]
            tp_b = st_b + b1 * others * w[_W_IO * rb + k] * c_pre
            x_b = xb / (w[_W_DEC_STEPS * rb + k] * tp_b)
            target = w[_W_TARGET * rb + k]
            # closed loop (computed for an open loop too, and not used)
            t_b = _ttft_f(xb, st_b, x_b, w[_W_MAX_TOK * rb + k], w[_W_MIN_CHUNK * rb + k], w[_W_ISL * rb + k], c_pre,
                          w[_W_ALONE * rb + k], w[_W_FIXED_ALONE * rb + k], w[_W_AHEAD * rb + k],
                          w[_W_WAVE_Q * rb + k], others, w[_W_VERIFY_TOK * rb + k], w[_W_TOK_PER_STEP * rb + k])
            fx = xb + x_b * t_b - target if closed else x_b - target
            if it == 0:
                w[_W_F_HI * rb + k] = fx
                w[_W_F0 * rb + k] = fx
                continue
            up = fx > 0.0
            side = w[_W_SIDE * rb + k]
            f_hi = w[_W_F_HI * rb + k]
            f_lo = w[_W_F_LO * rb + k]
            w[_W_HI * rb + k] = xb if up else w[_W_HI * rb + k]
            w[_W_LO * rb + k] = w[_W_LO * rb + k] if up else xb
            w[_W_F_HI * rb + k] = fx if up else (0.5 * f_hi if side < 0 else f_hi)
            w[_W_F_LO * rb + k] = (0.5 * f_lo if side > 0 else f_lo) if up else fx
            w[_W_SIDE * rb + k] = 1.0 if up else -1.0


# The serving solve's per-candidate inputs, rows of ``serve_into``'s ``inputs`` (a column per candidate), and
# their offsets. Only ``per_replica`` (the load over the replicas) depends on the replica count or the load.
KERNEL_INPUTS = ("isl", "osl", "pp", "per_replica", "cap_mean", "max_batched_tok", "c_prefill", "prefill_alone",
                 "dense_s", "expert_s", "log_miss", "seq_s", "flop_s_seq", "comm_fixed_s", "comm_seq_s",
                 "step_fixed_s", "step_overhead_s", "ttft_fixed_s", "wave", "draft_expert_s", "draft_log_miss",
                 "verify_tok", "tok_per_step")
(IN_ISL, IN_OSL, IN_PP, IN_PER_REPLICA, IN_CAP_MEAN, IN_MAX_BATCHED_TOK, IN_C_PREFILL, IN_PREFILL_ALONE, IN_DENSE_S,
 IN_EXPERT_S, IN_LOG_MISS, IN_SEQ_S, IN_FLOP_S_SEQ, IN_COMM_FIXED_S, IN_COMM_SEQ_S, IN_STEP_FIXED_S,
 IN_STEP_OVERHEAD_S, IN_TTFT_FIXED_S, IN_WAVE, IN_DRAFT_EXPERT_S, IN_DRAFT_LOG_MISS, IN_VERIFY_TOK,
 IN_TOK_PER_STEP) = range(len(KERNEL_INPUTS))
# Its answer, rows of ``out``: decoding batch, TTFT, TPOT, requests/s per replica, compute share of the step
# (and, apart, whether the candidate is overloaded).
KERNEL_OUTPUTS = ("batch", "ttft_s", "tpot_s", "requests_s", "compute_share")
OUT_BATCH, OUT_TTFT_S, OUT_TPOT_S, OUT_REQUESTS_S, OUT_COMPUTE_SHARE = range(len(KERNEL_OUTPUTS))


def serve_kernel(mode: int, moe: B_, inputs: F) -> tuple[F, B_]:
    """``serve_into`` over every candidate of ``inputs``, with an answer of its own: ``out`` (a row per
    ``KERNEL_OUTPUTS``) and the overloaded flags. Plain Python: a compiled caller would pass its constant
    column offsets as literals, and compile ``serve_into`` a second time."""
    n = inputs.shape[1]
    out = np.empty((len(KERNEL_OUTPUTS), n))
    over = np.empty(n, dtype=np.bool_)
    serve_into(mode, moe, inputs, 0, out, over, 0, n)
    return out, over


@njit(cache=True, error_model="numpy", nogil=True)
def serve_into(mode: int, moe_all: B_, inputs: F, first_in: int, out: F, over: B_, first_out: int,
               count: int) -> None:
    """The serving steady state of ``count`` candidates in one workload mode: their inputs are the columns of
    ``inputs`` (and entries of ``moe_all``) from ``first_in``; their answers, written into the columns of
    ``out`` (a row per ``KERNEL_OUTPUTS``) and entries of ``over`` from ``first_out``, are the decoding batch,
    TTFT, TPOT, requests/s per replica, compute share of the step and whether the candidate is overloaded.

    Continuous batching with chunked prefill. Offline: a job of as many requests as the replica holds at once
    (its load, when stated) is served as that job (``_offline_job``); a larger or unstated one as the saturated
    steady state, the KV cache or max_num_seqs full within the token budget.
    Closed loop of C clients per replica: Little's law, C = X(b) (TTFT(b) + (O-1) TPOT(b)) with X(b) the
    completion rate of a decoding batch b, rises with b, so its root is found by regula falsi; when even the
    cap leaves the law short, the batch is the cap and the rest of the clients wait for admission (TTFT
    absorbs what Little's law leaves over). Poisson arrivals at lam per replica: the decoding batch whose
    completion rate matches lam, and M/D/1 queueing for the prefill. Static batches: B sequences at once.

    Compiled by numba, candidates in the inner loops (so the root-finding steps of many candidates overlap, and
    run several at a time in SIMD registers)."""
    i0, i1, o0, o1 = first_in, first_in + count, first_out, first_out + count
    moe = moe_all[i0:i1]
    isl, osl, pp = inputs[IN_ISL, i0:i1], inputs[IN_OSL, i0:i1], inputs[IN_PP, i0:i1]
    per_replica, cap_mean = inputs[IN_PER_REPLICA, i0:i1], inputs[IN_CAP_MEAN, i0:i1]
    max_batched_tok, c_prefill = inputs[IN_MAX_BATCHED_TOK, i0:i1], inputs[IN_C_PREFILL, i0:i1]
    prefill_alone, dense_s = inputs[IN_PREFILL_ALONE, i0:i1], inputs[IN_DENSE_S, i0:i1]
    expert_s, log_miss = inputs[IN_EXPERT_S, i0:i1], inputs[IN_LOG_MISS, i0:i1]
    seq_s, flop_s_seq = inputs[IN_SEQ_S, i0:i1], inputs[IN_FLOP_S_SEQ, i0:i1]
    comm_fixed_s, comm_seq_s = inputs[IN_COMM_FIXED_S, i0:i1], inputs[IN_COMM_SEQ_S, i0:i1]
    step_fixed_s, step_overhead_s = inputs[IN_STEP_FIXED_S, i0:i1], inputs[IN_STEP_OVERHEAD_S, i0:i1]
    ttft_fixed_s, wave = inputs[IN_TTFT_FIXED_S, i0:i1], inputs[IN_WAVE, i0:i1]
    draft_expert_s, draft_log_miss = inputs[IN_DRAFT_EXPERT_S, i0:i1], inputs[IN_DRAFT_LOG_MISS, i0:i1]
    verify_tok, tok_per_step = inputs[IN_VERIFY_TOK, i0:i1], inputs[IN_TOK_PER_STEP, i0:i1]
    out_b, out_ttft = out[OUT_BATCH, o0:o1], out[OUT_TTFT_S, o0:o1]
    out_tpot, out_x = out[OUT_TPOT_S, o0:o1], out[OUT_REQUESTS_S, o0:o1]
    out_share, out_over = out[OUT_COMPUTE_SHARE, o0:o1], over[o0:o1]
    n = len(isl)
    io = np.empty(n)
    alone = np.empty(n)
    fixed_alone = np.empty(n)
    dec_steps = np.empty(n)
    min_chunk = np.empty(n)
    target = np.empty(n)
    ahead = np.empty(n)
    wave_q = np.empty(n)
    others = np.ones(n)
    lo, hi, f_lo, f_hi, side = np.zeros(n), np.empty(n), np.empty(n), np.empty(n), np.zeros(n)
    closed = mode == MODE_CONCURRENCY
    for i in range(n):
        out_over[i] = False
        io[i] = isl[i] / osl[i]
        cap = cap_mean[i]
        min_chunk[i] = min(max_batched_tok[i], _MIN_CHUNK_TOK)
        alone[i] = prefill_alone[i] + step_overhead_s[i]
        fixed_alone[i] = ttft_fixed_s[i] + alone[i]
        # time a request spends decoding after its first token (O - 1 steps; floored so that one-token
        # outputs keep a finite, monotone throughput)
        dec_steps[i] = max(osl[i] - 1.0, _MIN_DECODE_STEPS)
        if mode == MODE_STATIC:
            B = max(min(per_replica[i], cap), 1.0)
            step_b, sh_b = decode_step_f(B, pp[i], dense_s[i], expert_s[i], log_miss[i], moe[i], seq_s[i],
                                          flop_s_seq[i], comm_fixed_s[i], comm_seq_s[i], step_fixed_s[i],
                                          draft_expert_s[i], draft_log_miss[i])
            out_b[i], out_tpot[i], out_share[i], out_ttft[i], out_x[i] = B, step_b, sh_b, 0.0, 0.0
            continue
        if mode == MODE_OFFLINE and 0.0 < per_replica[i] <= cap:
            _offline_job(i, per_replica[i], isl[i], dec_steps[i], max_batched_tok[i], c_prefill[i], ttft_fixed_s[i],
                         pp[i], dense_s[i], expert_s[i], log_miss[i], moe[i], seq_s[i], flop_s_seq[i], comm_fixed_s[i],
                         comm_seq_s[i], step_fixed_s[i], draft_expert_s[i], draft_log_miss[i], out_b, out_ttft,
                         out_tpot, out_x, out_share)
            continue
        if mode == MODE_OFFLINE:
            # every step is full: its decodes plus the prompts of the sequences that replace those finishing
            # (I/O prompt tokens per decode) fill at most the token budget, so the decoding batch is at most
            # budget x O / (I + O) however many sequences memory would hold (prefill-bound steady state)
            # (with speculation, per verify step: k + 1 tokens per decode and the prompts of tau tokens each)
            b_off = min(cap, max(max_batched_tok[i] / (verify_tok[i] + tok_per_step[i] * io[i]), 1.0))
            step, share = decode_step_f(b_off, pp[i], dense_s[i], expert_s[i], log_miss[i], moe[i], seq_s[i],
                                         flop_s_seq[i], comm_fixed_s[i], comm_seq_s[i], step_fixed_s[i],
                                         draft_expert_s[i], draft_log_miss[i])
            tpot = step + b_off * io[i] * c_prefill[i]
            # no prefill queue (every prompt is admitted as a sequence finishes); the wave of the cap's prompts
            ttft = _ttft_f(b_off, step, 0.0, max_batched_tok[i], min_chunk[i], isl[i], c_prefill[i], alone[i],
                           fixed_alone[i], 0.0, wave[i] * (b_off - 1.0) * isl[i] * c_prefill[i], 1.0, verify_tok[i],
                           tok_per_step[i])
            out_b[i], out_ttft[i], out_tpot[i] = b_off, ttft, tpot
            out_x[i], out_share[i] = b_off / (osl[i] * tpot), share
            continue
        if closed:
            C = max(per_replica[i], 1.0)
            wave_q[i] = wave[i] * (min(C, cap) - 1.0) * isl[i] * c_prefill[i]
            ahead[i] = max(C - 1.0, 0.0)
            # a decoding request's steps carry the prompts of the other C - 1 clients only (its own prompt was
            # prefilled before it decoded): with one client, a step reads the weights and its own KV, no more
            others[i] = ahead[i] / C
            target[i] = C
            hi[i] = min(C, cap)
        else:
            lam = max(per_replica[i], 1e-9)
            # the saturated steady state at the cap, and its completion rate
            step, _ = decode_step_f(cap, pp[i], dense_s[i], expert_s[i], log_miss[i], moe[i], seq_s[i],
                                    flop_s_seq[i], comm_fixed_s[i], comm_seq_s[i], step_fixed_s[i],
                                    draft_expert_s[i], draft_log_miss[i])
            x_cap = cap / (dec_steps[i] * (step + cap * io[i] * c_prefill[i]))
            target[i] = min(lam, x_cap * _SATURATION_SHARE)
            wave_q[i] = 0.0
            ahead[i] = _NO_LIMIT
            others[i] = 1.0         # Poisson arrivals: every other prompt arrives whatever this one does
            hi[i] = cap
            out_over[i] = lam >= x_cap
        f_lo[i] = -target[i]
    if mode in (MODE_STATIC, MODE_OFFLINE):
        return
    # regula falsi with the Illinois modification on [0, top] for excess(b), which rises with b: closed loop
    # b + X(b) TTFT(b) - C; open loop X(b) - lam. Step 0 evaluates the top end; the last only interpolates.
    # Where excess is not positive even at the top end (the closed loop saturates the cap), every step
    # moves the low end up and the answer is the top. Blocks of _ROOT_BLOCK candidates, copied into one
    # working array, take every step in turn (_root_block).
    w = np.empty(_W_ROWS * _ROOT_BLOCK)
    for start in range(0, n, _ROOT_BLOCK):
        count = min(_ROOT_BLOCK, n - start)
        for k in range(_ROOT_BLOCK):
            i = start + k if k < count else start          # a part block is padded with its first candidate
            w[_W_HI * _ROOT_BLOCK + k] = hi[i]
            w[_W_LO * _ROOT_BLOCK + k] = lo[i]
            w[_W_F_HI * _ROOT_BLOCK + k] = f_hi[i]
            w[_W_F_LO * _ROOT_BLOCK + k] = f_lo[i]
            w[_W_SIDE * _ROOT_BLOCK + k] = side[i]
            w[_W_PP * _ROOT_BLOCK + k] = pp[i]
            w[_W_DENSE * _ROOT_BLOCK + k] = dense_s[i]
            w[_W_EXPERT * _ROOT_BLOCK + k] = expert_s[i]
            w[_W_LOG_MISS * _ROOT_BLOCK + k] = log_miss[i]
            w[_W_MOE * _ROOT_BLOCK + k] = 1.0 if moe[i] else 0.0
            w[_W_SEQ * _ROOT_BLOCK + k] = seq_s[i]
            w[_W_FLOP_SEQ * _ROOT_BLOCK + k] = flop_s_seq[i]
            w[_W_COMM_FIXED * _ROOT_BLOCK + k] = comm_fixed_s[i]
            w[_W_COMM_SEQ * _ROOT_BLOCK + k] = comm_seq_s[i]
            w[_W_STEP_FIXED * _ROOT_BLOCK + k] = step_fixed_s[i]
            w[_W_IO * _ROOT_BLOCK + k] = io[i]
            w[_W_C_PREFILL * _ROOT_BLOCK + k] = c_prefill[i]
            w[_W_DEC_STEPS * _ROOT_BLOCK + k] = dec_steps[i]
            w[_W_MAX_TOK * _ROOT_BLOCK + k] = max_batched_tok[i]
            w[_W_MIN_CHUNK * _ROOT_BLOCK + k] = min_chunk[i]
            w[_W_ISL * _ROOT_BLOCK + k] = isl[i]
            w[_W_ALONE * _ROOT_BLOCK + k] = alone[i]
            w[_W_FIXED_ALONE * _ROOT_BLOCK + k] = fixed_alone[i]
            w[_W_AHEAD * _ROOT_BLOCK + k] = ahead[i]
            w[_W_WAVE_Q * _ROOT_BLOCK + k] = wave_q[i]
            w[_W_TARGET * _ROOT_BLOCK + k] = target[i]
            w[_W_OTHERS * _ROOT_BLOCK + k] = others[i]
            w[_W_EXPERT_TERM * _ROOT_BLOCK + k] = 0.0
            w[_W_DRAFT_EXPERT * _ROOT_BLOCK + k] = draft_expert_s[i]
            w[_W_DRAFT_LOG_MISS * _ROOT_BLOCK + k] = draft_log_miss[i]
            w[_W_VERIFY_TOK * _ROOT_BLOCK + k] = verify_tok[i]
            w[_W_TOK_PER_STEP * _ROOT_BLOCK + k] = tok_per_step[i]
        any_moe = False
        for i in range(start, start + count):
            any_moe = any_moe or bool(moe[i])
        _root_block(w, closed, any_moe)
        for k in range(count):
            out_b[start + k] = w[_W_OUT * _ROOT_BLOCK + k]
    # the state at the root
    for i in range(n):
        b = out_b[i]
        b1 = max(b, 1.0)
        st_b, sh_b = decode_step_f(b1, pp[i], dense_s[i], expert_s[i], log_miss[i], moe[i], seq_s[i],
                                    flop_s_seq[i], comm_fixed_s[i], comm_seq_s[i], step_fixed_s[i],
                                    draft_expert_s[i], draft_log_miss[i])
        tp_b = st_b + b1 * others[i] * io[i] * c_prefill[i]
        x_b = b / (dec_steps[i] * tp_b)
        t_b = _ttft_f(b, st_b, x_b if closed else target[i], max_batched_tok[i], min_chunk[i], isl[i], c_prefill[i],
                      alone[i], fixed_alone[i], ahead[i], wave_q[i], others[i], verify_tok[i], tok_per_step[i])
        if closed:
            t_b = max(t_b, target[i] / x_b - dec_steps[i] * tp_b)
        out_b[i], out_ttft[i], out_tpot[i], out_share[i] = b, t_b, tp_b, sh_b
        out_x[i] = x_b if closed else target[i]


def warm_up() -> float:
    """Compile the serving solve (or load it from numba's on-disk cache) before a request needs it; seconds."""
    t0 = time.perf_counter()
    serve_kernel(MODE_CONCURRENCY, np.zeros(1, dtype=np.bool_), np.ones((len(KERNEL_INPUTS), 1)))
    return time.perf_counter() - t0
