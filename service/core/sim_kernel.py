"""The event loop of the scheduler simulation, compiled by numba (``loop``): one replica's engine, step by step.

scheduler.py prepares its inputs and reads its trace; simulate.py describes the scheduler it follows. The loop
keeps aggregates rather than walking the batch each step (the decoding sequences' KV tokens at step g are
``d0 + b g``; each one's last step is in a heap), and advances runs of identical steps at once: pure decode
steps up to the next completion, KV exhaustion or admissible arrival, and the chunks of one long prompt that
fill the token budget. Compiled because a recommendation simulates several candidates of a few thousand
requests each, and interpreted Python pays per event. Its queues are arrays (a ring buffer for the waiting
queue, a linked list for the running set in admission order, a binary heap of completion steps) so that it
compiles in numba's nopython mode; ``NUMBA_DISABLE_JIT=1`` runs the same code as plain Python
(tests/core/test_simulate.py checks that both give the same trace).
"""

from __future__ import annotations

import heapq
import math
import time
from typing import Any

import numpy as np
from numba import njit

from service.core.step_kernels import carried_prefill_f, decode_step_f, smooth_max_f
from service.core.types import I_, F

# Rows of ``loop``'s per-request arrays: ``tok`` (prompt and output tokens) and ``cost`` (replica time per
# prompt token carried by a decode step; compute per prompt token prefilled alone; the whole prompt as a step
# of its own; closed loop: when its client sends it after its previous request ended, as a share of the
# step that ended it, in [0, 1)).
TOK_IN, TOK_OUT = range(2)
COST_CARRIED_S, COST_COMPUTE_S, COST_ALONE_S, COST_SEND_STEPS = range(4)
COST_ROWS = COST_SEND_STEPS + 1
# Offsets of the float scalars in ``k``: the step model's (StepModel of one candidate), then the step table's
# grid and the replica's limits.
(K_LIN_FLOPS_TOK, K_GEMM_RATE_FLOPS_S, K_ATTN_RATE_FLOPS_S, K_HEADS_DIMS, K_FULL_LAYERS, K_WINDOW_LAYERS,
 K_WINDOW_TOK, K_N_GPU, K_TP, K_COMM_PER_TOK_S, K_PP, K_MOE, K_LOG_MISS, K_EXPERT_S, K_WEIGHTS_READ_S,
 K_AR_LATENCY_S, K_PP_HANDOFF_S, K_AR_BYTES_TOK, K_LINK_BYTES_S,
 K_TABLE_U_LO, K_TABLE_INV_DU, K_TABLE_FULL_LAYERS, K_TABLE_WINDOW_LAYERS, K_TABLE_WINDOW_TOK,
 K_FIXED_S, K_CAP_TOK, K_OVERHEAD_S, K_VERIFY_TOK, K_TOK_PER_STEP) = range(29)
K_SIZE = K_TOK_PER_STEP + 1
# Offsets of the integers in ``lim`` (flags are 0 or 1).
(L_CLOSED, L_NEXT_RID, L_FIRST_MEAS, L_END_MEAS, L_MAX_TOK, L_MAX_RUN, L_CHUNKED, L_RESERVE) = range(8)
L_SIZE = L_RESERVE + 1


@njit(cache=True, nogil=True)
def decode_rows(b_top: int, pp: float, dense_s: float, expert_s: float, log_miss: float, moe: bool, seq_s: F,
                flop_s_seq: F, comm_fixed_s: float, comm_seq_s: float, step_fixed_s: float, draft_expert_s: float,
                draft_log_miss: float) -> F:
    """Decode step times for batches 0..``b_top`` (rows) at contexts whose KV read of one sequence takes
    ``seq_s`` and whose compute per decoded token takes ``flop_s_seq`` (columns), by the compiled step of the
    serving solve. simulate.decode_table builds the simulation's step table with it (compiled: a table is built
    for every simulation, and the grid is large). It agrees with ``StepModel.decode_step`` to the last bit on
    dense models; on MoE models, NumPy's vectorised expm1 (the routed experts' share) may differ from the C
    library's by one unit in the last place (tests/core/test_simulate.py)."""
    rows = np.empty((b_top + 1, len(seq_s)))
    for b in range(b_top + 1):
        for k in range(len(seq_s)):
            rows[b, k] = decode_step_f(float(b), pp, dense_s, expert_s, log_miss, moe, seq_s[k], flop_s_seq[k],
                                        comm_fixed_s, comm_seq_s, step_fixed_s, draft_expert_s, draft_log_miss)[0]
    return rows


@njit(cache=True)
def _recomputed_costs(n_re: int, k: F) -> tuple[float, float]:
    """StepModel.prefill_tok_s and prompt_compute_s / n of an ``n_re``-token prompt (a preempted request's
    prompt + generated tokens), from the coefficients ``k`` (same operations, same order)."""
    lin, gemm, attn, heads_dims = k[K_LIN_FLOPS_TOK], k[K_GEMM_RATE_FLOPS_S], k[K_ATTN_RATE_FLOPS_S], k[K_HEADS_DIMS]
    full_l, win_l, win = k[K_FULL_LAYERS], k[K_WINDOW_LAYERS], k[K_WINDOW_TOK]
    n_gpu, tp, comm_tok, pp = k[K_N_GPU], k[K_TP], k[K_COMM_PER_TOK_S], k[K_PP]
    n = float(n_re)
    attn_prefill = heads_dims * (full_l * n * n + win_l * n * min(n, win))
    cp = (lin / gemm + attn_prefill / n / attn) / n_gpu + comm_tok / pp
    pc = (lin * n / (tp * gemm) + attn_prefill / (tp * attn)) / n
    return cp, pc


@njit(cache=True)
def verify_boundary_steps(g: int, tok_per_step: float) -> int:
    """Steps from step ``g`` to the next one that starts a verify step (0: ``g`` does). With speculation a step
    here emits one token per sequence, and a verify step emits ``tok_per_step`` (tau): steps ``g`` with
    floor((g + 1) / tau) > floor(g / tau) start one, a share 1 / tau of the steps (every step without
    speculation)."""
    if tok_per_step <= 1.0:
        return 0
    n = math.floor(g / tok_per_step)
    return max(math.ceil((n + 1) * tok_per_step) - 1 - g, 0)


@njit(cache=True)
def prompt_budget_f(max_tok: int, b: int, verify_tok: float, tok_per_step: float, g: int) -> int:
    """The token budget step ``g`` with ``b`` sequences decoding leaves to prompts: all of it without decodes;
    else the budget less ``verify_tok`` tokens per decode (k + 1 with speculation: vLLM charges the draft tokens
    to the budget) on a step that starts a verify step, and nothing on the others (the verify step's prompt
    tokens ride on its first step). Over tau steps that averages ``(max_tok - b x verify_tok) / tok_per_step``,
    the per-step budget the serving solve's ``serve_kernel._ttft_f`` uses."""
    if b == 0:
        return max_tok
    if verify_boundary_steps(g, tok_per_step) > 0:
        return 0
    return int(max(max_tok - b * verify_tok, 0.0))


@njit(cache=True)
def _step_at(table: F, b: int, ctx: float, full_l: float, win_l: float, win: float, u_lo: float, inv_du: float,
             top_k: int) -> float:
    """Decode step time of ``b`` sequences at mean context ``ctx`` (StepTable.at; the loop's contexts never fall
    below the table's first point)."""
    x = (full_l * ctx + win_l * (ctx if ctx < win else win) - u_lo) * inv_du
    j = int(x)
    if j > top_k:
        j = top_k
    return table[b, j] + (x - j) * (table[b, j + 1] - table[b, j])


@njit(cache=True)
def _remove(lst: I_, n: int, rid: int) -> int:
    """Remove ``rid`` from the first ``n`` entries of ``lst``, keeping their order; the new length."""
    j = 0
    while lst[j] != rid:
        j += 1
    lst[j:n - 1] = lst[j + 1:n]
    return n - 1


@njit(cache=True)
def _preempt(t: float, total: int, r_next: I_, r_prev: I_, in_run: Any, decoding: Any, kv0: I_, s0: I_, epoch: I_,
             t_last: F, pf_list: I_, pf_n: int, pf_len: I_, pf_rem: I_, in_tok: I_, gen: I_, CP: F, PC: F, k: F,
             w_buf: I_, w_head: int, w_size: int, b: int, d0: int, pkv: int) -> Any:
    """The newest running request gives back its KV and goes first in the queue, to be recomputed (its
    prompt is now prompt + generated tokens). Returns it and the loop's updated b, d0, pkv, pf_n, w_head."""
    victim = r_prev[total]
    r_next[r_prev[victim]] = r_next[victim]
    r_prev[r_next[victim]] = r_prev[victim]
    in_run[victim] = False
    if decoding[victim]:
        decoding[victim] = False
        b -= 1
        d0 -= kv0[victim] - s0[victim]
        epoch[victim] += 1
        t_last[victim] = t
    else:
        pf_n = _remove(pf_list, pf_n, victim)
        pkv -= pf_len[victim] - pf_rem[victim]
    n_re = in_tok[victim] + gen[victim]
    pf_rem[victim] = n_re
    CP[victim], PC[victim] = _recomputed_costs(n_re, k)
    w_head = (w_head - 1) % w_size
    w_buf[w_head] = victim
    return victim, b, d0, pkv, pf_n, w_head


@njit(cache=True)
def _finish(rid: int, t: float, total: int, r_next: I_, r_prev: I_, in_run: Any, t_done: F, t_arr: F, arr_t: F,
            arr_r: I_, in_tok: I_, out_tok: I_, reserve: bool, reserved: int, first_meas: int, end_meas: int,
            done_meas: int, measuring: bool, done_window: int, tok_in: int, closed: bool, next_rid: int,
            a_head: int, a_tail: int, fixed_s: float, send: F, step_s: float) -> Any:
    """Request ``rid`` ends at ``t``, the end of a step of ``step_s``: it leaves the running set, frees its
    reservation, is counted, and (closed loop) its client sends the next request ``send[next_rid]`` of a step
    later, which reaches the scheduler ``fixed_s`` after that (in arrival order in the queue). Returns the
    loop's updated counters."""
    t_done[rid] = t
    r_next[r_prev[rid]] = r_next[rid]
    r_prev[r_next[rid]] = r_prev[rid]
    in_run[rid] = False
    if reserve:
        reserved -= in_tok[rid] + out_tok[rid]
    if first_meas <= rid < end_meas:
        done_meas += 1
    if measuring:
        done_window += 1
        tok_in += in_tok[rid]
    if closed and next_rid < total:
        at = t + send[next_rid] * step_s + fixed_s
        t_arr[next_rid] = at
        pos = a_tail
        while pos > a_head and arr_t[pos - 1] > at:
            arr_t[pos], arr_r[pos] = arr_t[pos - 1], arr_r[pos - 1]
            pos -= 1
        arr_t[pos], arr_r[pos] = at, next_rid
        a_tail += 1
        next_rid += 1
    return reserved, done_meas, done_window, tok_in, a_tail, next_rid


@njit(cache=True)
def _next_last_step(heap: Any, epoch: I_) -> int:
    """The step of the next decoding sequence's last token: the top of the completion heap, once the entries of
    preempted sequences (an older epoch) are dropped."""
    while epoch[heap[0][1]] != heap[0][2]:
        heapq.heappop(heap)
    return int(heap[0][0])


@njit(cache=True)
def _until_arrival(wait_s: float, d_first: float, d_last: float, kk: int) -> tuple[int, float]:
    """A run of ``kk`` decode steps whose times rise linearly from ``d_first`` to ``d_last``, cut at the first
    step that ends after ``wait_s`` (when the next arrival could be admitted): its steps and last step time."""
    slope = (d_last - d_first) / (kk - 1) if kk > 1 else 0.0
    if slope > 1e-12 * d_first:
        half = 0.5 * slope
        lin = d_first - half
        m = math.ceil((-lin + math.sqrt(lin * lin + 4.0 * half * wait_s)) / (2.0 * half) - 1e-9)
    else:
        m = math.ceil(wait_s / d_first - 1e-9)
    if m < kk:
        kk = m if m > 1 else 1
        d_last = d_first + slope * (kk - 1)
    return kk, d_last


@njit(cache=True)
def _prefill_only_s(compute_s: float, tokens: int, k: F) -> float:
    """A step that only prefills ``tokens`` prompt tokens whose compute takes ``compute_s`` (StepModel.prefill_only_s,
    without the step overhead)."""
    pp = k[K_PP]
    return (smooth_max_f(compute_s, k[K_WEIGHTS_READ_S]) + k[K_COMM_PER_TOK_S] * tokens + k[K_AR_LATENCY_S]
            + k[K_PP_HANDOFF_S] + (pp - 1.0) * tokens * k[K_AR_BYTES_TOK] / k[K_LINK_BYTES_S])


@njit(cache=True, nogil=True)
def loop(tok: I_, cost: F, arrival_s: F, arrival_rid: I_, table: F, k: F, lim: I_) -> Any:
    """Run one replica's scheduler until every measured request has finished. ``tok``: prompt and output tokens
    of each request (rows ``TOK_*``); ``cost``: its step costs (rows ``COST_*``); ``arrival_s`` and
    ``arrival_rid``: the arrivals at the scheduler known at the start, in order; ``table``: decode step times
    (``scheduler.StepTable.rows``); ``k``: the scalars at offsets ``K_*``; ``lim``: the integers at ``L_*``.
    Returns the trace's arrays and counters, in ``scheduler.Trace``'s order."""
    closed, chunked, reserve = lim[L_CLOSED] != 0, lim[L_CHUNKED] != 0, lim[L_RESERVE] != 0
    next_rid, first_meas, end_meas = lim[L_NEXT_RID], lim[L_FIRST_MEAS], lim[L_END_MEAS]
    max_tok, max_run = lim[L_MAX_TOK], lim[L_MAX_RUN]
    in_tok, out_tok = tok[TOK_IN], tok[TOK_OUT]
    CP, PC, ALONE, SEND = cost[COST_CARRIED_S], cost[COST_COMPUTE_S], cost[COST_ALONE_S], cost[COST_SEND_STEPS]
    fixed_s, cap, overhead_s = k[K_FIXED_S], k[K_CAP_TOK], k[K_OVERHEAD_S]
    verify_tok, tok_per_step = k[K_VERIFY_TOK], k[K_TOK_PER_STEP]
    u_lo, inv_du = k[K_TABLE_U_LO], k[K_TABLE_INV_DU]
    full_l, win_l, win = k[K_TABLE_FULL_LAYERS], k[K_TABLE_WINDOW_LAYERS], k[K_TABLE_WINDOW_TOK]
    moe, log_miss, expert_s, pp = k[K_MOE] > 0.0, k[K_LOG_MISS], k[K_EXPERT_S], k[K_PP]
    top_k = table.shape[1] - 2
    total = len(in_tok)
    n_meas = end_meas - first_meas
    nan = math.nan

    t_arr = np.full(total, nan)
    t_admit = np.full(total, nan)
    t_first = np.full(total, nan)
    t_done = np.full(total, nan)
    t_last = np.zeros(total)
    gen = np.zeros(total, dtype=np.int64)
    pf_rem = in_tok.copy()          # prompt tokens still to prefill (prompt + generated after a preemption)
    pf_len = np.zeros(total, dtype=np.int64)    # length of the current (re)prefill
    s0 = np.zeros(total, dtype=np.int64)        # step of a decoder's first decode
    kv0 = np.zeros(total, dtype=np.int64)       # its KV tokens then
    epoch = np.zeros(total, dtype=np.int64)     # bumped at preemption (stale heap entries are skipped)
    decoding = np.zeros(total, dtype=np.bool_)
    in_run = np.zeros(total, dtype=np.bool_)

    # arrivals: a first-in first-out queue (each request arrives once)
    arr_t = np.empty(total + 1)
    arr_r = np.empty(total + 1, dtype=np.int64)
    a_head, a_tail = 0, len(arrival_s)
    for i in range(a_tail):
        arr_t[i], arr_r[i] = arrival_s[i], arrival_rid[i]
        t_arr[arrival_rid[i]] = arrival_s[i]
    # waiting: a ring buffer (first in line at w_head; a preempted request goes back to the front)
    w_size = total + 1
    w_buf = np.empty(w_size, dtype=np.int64)
    w_head, w_len = 0, 0
    # running: a doubly linked list in admission order (the newest is preempted first); node ``total`` is
    # the sentinel, so r_prev[total] is the newest
    r_next = np.full(total + 1, total, dtype=np.int64)
    r_prev = np.full(total + 1, total, dtype=np.int64)
    n_running = 0
    # prompts partly prefilled, in admission order
    pf_list = np.empty(total, dtype=np.int64)
    pf_n = 0
    pf_snap = np.empty(total, dtype=np.int64)
    heap = [(0, 0, 0)]              # (step of the last decode, request, epoch)
    heap.pop()
    ch_rid = np.empty(total + 1, dtype=np.int64)    # this step's prompt chunks
    ch_c = np.empty(total + 1, dtype=np.int64)
    itl_v = [0.0]                   # inter-token gaps and their weights
    itl_v.pop()
    itl_w = [0.0]
    itl_w.pop()

    b = 0                           # sequences decoding
    d0 = 0                          # sum over decoders of kv0 - s0: their KV tokens at step g are d0 + b g
    pkv = 0                         # KV tokens of partial prefills
    reserved = 0                    # tokens reserved by running requests (reserve_full)
    t, g = 0.0, 0
    steps = preemptions = events = entered = 0
    done_meas = 0
    measuring = False
    t_start = 0.0
    tok_out = tok_in = done_window = 0
    busy_b_s = 0.0

    while done_meas < n_meas:
        if n_running == 0 and w_len == 0:
            if a_head == a_tail:
                break
            if t < arr_t[a_head]:
                t = arr_t[a_head]              # idle until the next arrival
        while a_head < a_tail and arr_t[a_head] <= t:
            rid = arr_r[a_head]
            a_head += 1
            w_buf[(w_head + w_len) % w_size] = rid
            w_len += 1
            entered += 1
            if rid == first_meas and not measuring:
                measuring, t_start = True, t

        # --- schedule one step: decodes first, then partial prefills, then new requests ------------------
        preempted = False
        n_ch = 0
        p_tok, p_cost, p_comp = 0, 0.0, 0.0
        budget = prompt_budget_f(max_tok, b, verify_tok, tok_per_step, g)
        if not reserve and b and d0 + b * g + pkv + b > cap:
            while d0 + b * g + pkv + b > cap and n_running > 1:
                # the newest running request gives back its KV and goes first in the queue, to be recomputed
                victim, b, d0, pkv, pf_n, w_head = _preempt(
                    t, total, r_next, r_prev, in_run, decoding, kv0, s0, epoch, t_last, pf_list, pf_n, pf_len,
                    pf_rem, in_tok, gen, CP, PC, k, w_buf, w_head, w_size, b, d0, pkv)
                n_running -= 1
                w_len += 1
                preemptions += 1
                preempted = True
            budget = prompt_budget_f(max_tok, b, verify_tok, tok_per_step, g)
        if pf_n:
            n_snap = pf_n
            pf_snap[:n_snap] = pf_list[:n_snap]
            for si in range(n_snap):
                rid = pf_snap[si]
                if budget <= 0:
                    break
                if not in_run[rid]:
                    continue
                c = min(pf_rem[rid], budget)
                if not reserve and d0 + b * g + pkv + b + c > cap:
                    while d0 + b * g + pkv + b + c > cap and n_running > 1:
                        preempted = True
                        victim, b, d0, pkv, pf_n, w_head = _preempt(
                            t, total, r_next, r_prev, in_run, decoding, kv0, s0, epoch, t_last, pf_list, pf_n,
                            pf_len, pf_rem, in_tok, gen, CP, PC, k, w_buf, w_head, w_size, b, d0, pkv)
                        n_running -= 1
                        w_len += 1
                        preemptions += 1
                        if victim == rid:
                            break
                    if not in_run[rid]:
                        continue
                    budget = prompt_budget_f(max_tok, b, verify_tok, tok_per_step, g) - p_tok
                    c = min(pf_rem[rid], budget)
                    if c <= 0:
                        break
                ch_rid[n_ch], ch_c[n_ch] = rid, c
                n_ch += 1
                budget -= c
                pkv += c
                p_tok += c
                p_cost += c * CP[rid]
                p_comp += c * PC[rid]
        if not preempted:
            while w_len and budget > 0 and n_running < max_run:
                rid = w_buf[w_head]
                need = pf_rem[rid]
                c = need if need < budget else budget
                if not chunked and c < need and need <= max_tok:
                    break                   # no chunking: the prompt waits for a step with room for all of it
                if n_running:
                    if reserve:
                        if reserved + in_tok[rid] + out_tok[rid] > cap:
                            break
                    elif d0 + b * g + pkv + b + c > cap:
                        break
                w_head = (w_head + 1) % w_size
                w_len -= 1
                last = r_prev[total]
                r_next[last], r_prev[rid] = rid, last
                r_next[rid], r_prev[total] = total, rid
                n_running += 1
                in_run[rid] = True
                pf_list[pf_n] = rid
                pf_n += 1
                pf_len[rid] = need
                if t_admit[rid] != t_admit[rid]:
                    t_admit[rid] = t
                if reserve:
                    reserved += in_tok[rid] + out_tok[rid]
                ch_rid[n_ch], ch_c[n_ch] = rid, c
                n_ch += 1
                budget -= c
                pkv += c
                p_tok += c
                p_cost += c * CP[rid]
                p_comp += c * PC[rid]

        # --- its duration (a run of pure decode steps, or of one long prompt's chunks, is advanced at once) --
        kk = 1
        run_n = 0                   # steps that each carry a budget-filling chunk of the same prompt
        if n_ch == 1 and budget == 0 and not preempted and tok_per_step <= 1.0:
            rid, c = ch_rid[0], ch_c[0]
            if pf_rem[rid] > c:
                run_n = (pf_rem[rid] - 1) // c
                if not reserve:
                    run_n = min(run_n, 1 + int((cap - d0 - b * g - pkv - b) // (b + c)))
        if b:
            ctx0 = (d0 + b * g) / b + 1.0
            d_first = _step_at(table, b, ctx0, full_l, win_l, win, u_lo, inv_du, top_k)
            if p_tok:
                # carried prompt tokens: their compute, against (MoE) reading the experts they route to
                # beyond the decodes' (StepModel.carried_prefill_s)
                carry = carried_prefill_f(float(b), float(p_tok), p_cost, pp, log_miss, expert_s, moe)
                d_first += carry
                d_last = d_first
                if run_n > 1:
                    kk = min(run_n, _next_last_step(heap, epoch) - g + 1)
                    if kk > 1:
                        d_last = _step_at(table, b, ctx0 + (kk - 1), full_l, win_l, win, u_lo, inv_du, top_k) + carry
            elif preempted:
                d_last = d_first
            else:
                kk = _next_last_step(heap, epoch) - g + 1
                if not reserve:
                    kk = max(min(kk, int((cap - d0 - b * g - pkv) // b)), 1)
                if (w_len or pf_n) and tok_per_step > 1.0:
                    # prompt work waits for the next verify step
                    kk = max(min(kk, verify_boundary_steps(g, tok_per_step)), 1)
                d_last = d_first
                if kk > 1:
                    d_last = _step_at(table, b, ctx0 + (kk - 1), full_l, win_l, win, u_lo, inv_du, top_k)
                if a_head < a_tail and w_len == 0 and n_running < max_run:
                    kk, d_last = _until_arrival(arr_t[a_head] - t, d_first, d_last, kk)
            dur = 0.5 * (d_first + d_last) * kk
        elif n_ch == 1 and p_tok == pf_len[ch_rid[0]] and p_tok == in_tok[ch_rid[0]]:
            dur = ALONE[ch_rid[0]]
        else:
            dur = _prefill_only_s(p_comp, p_tok, k) + overhead_s
            if run_n > 1:
                kk = run_n
                dur *= kk
        if kk > 1 and p_tok:
            ch_c[0] = ch_c[0] * kk
            pkv += ch_c[0] // kk * (kk - 1)
        t += dur
        g += kk
        steps += kk
        events += 1
        if measuring:
            tok_out += b * kk
            busy_b_s += b * dur
            if b:
                itl_v.append(dur / kk)
                itl_w.append(float(b * kk))

        # --- prompts that finished prefilling emit their first (or, after a preemption, next) token ------
        for ci in range(n_ch):
            rid, c = ch_rid[ci], ch_c[ci]
            left = pf_rem[rid] - c
            pf_rem[rid] = left
            if left:
                continue
            pf_n = _remove(pf_list, pf_n, rid)
            pkv -= pf_len[rid]
            gen[rid] += 1
            if measuring:
                tok_out += 1
            if t_first[rid] != t_first[rid]:
                t_first[rid] = t
            elif measuring:
                itl_v.append(t - t_last[rid])
                itl_w.append(1.0)
            if gen[rid] < out_tok[rid]:
                decoding[rid] = True
                s0[rid], kv0[rid] = g, pf_len[rid]
                heapq.heappush(heap, (g + out_tok[rid] - gen[rid] - 1, rid, epoch[rid]))
                b += 1
                d0 += kv0[rid] - g
                continue
            # finished with its first token
            reserved, done_meas, done_window, tok_in, a_tail, next_rid = _finish(
                rid, t, total, r_next, r_prev, in_run, t_done, t_arr, arr_t, arr_r, in_tok, out_tok, reserve, reserved,
                first_meas, end_meas, done_meas, measuring, done_window, tok_in, closed, next_rid, a_head, a_tail,
                fixed_s, SEND, dur / kk)
            n_running -= 1
        # --- sequences whose last token was this step's ---------------------------------------------------
        while len(heap) and heap[0][0] < g:
            _, rid, ep = heapq.heappop(heap)
            if ep != epoch[rid]:
                continue
            decoding[rid] = False
            b -= 1
            d0 -= kv0[rid] - s0[rid]
            gen[rid] = out_tok[rid]
            reserved, done_meas, done_window, tok_in, a_tail, next_rid = _finish(
                rid, t, total, r_next, r_prev, in_run, t_done, t_arr, arr_t, arr_r, in_tok, out_tok, reserve, reserved,
                first_meas, end_meas, done_meas, measuring, done_window, tok_in, closed, next_rid, a_head, a_tail,
                fixed_s, SEND, dur / kk)
            n_running -= 1

    return (t_arr, t_admit, t_first, t_done, np.asarray(itl_v), np.asarray(itl_w), max(t - t_start, 1e-30),
            tok_out, tok_in, done_window, busy_b_s, preemptions, steps, events, entered)


def warm_up() -> float:
    """Compile the loop (or load it from numba's on-disk cache) before the first request needs it; seconds taken.
    Start-up calls it: compiling takes seconds, loading the cached code well under one."""
    t0 = time.perf_counter()
    k = np.ones(K_SIZE)
    k[K_MOE] = 0.0                                              # dense
    k[K_TABLE_U_LO], k[K_TABLE_WINDOW_LAYERS], k[K_TABLE_WINDOW_TOK], k[K_FIXED_S] = 0.0, 0.0, math.inf, 0.0
    k[K_CAP_TOK], k[K_OVERHEAD_S], k[K_VERIFY_TOK], k[K_TOK_PER_STEP] = 1e6, 0.0, 1.0, 1.0
    lim = np.zeros(L_SIZE, dtype=np.int64)
    lim[L_END_MEAS], lim[L_MAX_TOK], lim[L_MAX_RUN], lim[L_CHUNKED], lim[L_NEXT_RID] = 1, 16, 4, 1, 1
    loop(np.ones((2, 1), dtype=np.int64), np.full((COST_ROWS, 1), 1e-3), np.zeros(1), np.zeros(1, dtype=np.int64),
         np.ones((2, 3)), k, lim)
    decode_rows(1, 1.0, 1.0, 0.0, -math.inf, False, np.ones(3), np.ones(3), 0.0, 0.0, 0.0, 0.0, 0.0)
    return time.perf_counter() - t0
