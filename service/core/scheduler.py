"""The event loop of the scheduler simulation: one replica's engine, step by step.

service/core/simulate.py draws the requests, prices them with the step model and summarises the trace this
loop leaves; the scheduler it follows is described there. The loop keeps aggregates rather than walking
the batch each step (the decoding sequences' KV tokens at step g are ``d0 + b g``; each one's last step is
in a heap), and advances runs of identical steps at once: pure decode steps up to the next completion,
KV exhaustion or admissible arrival, and the chunks of one long prompt that fill the token budget.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from service.core.costmodel import MODE_CONCURRENCY, StepModel


@dataclass
class StepTable:
    """Decode step times ``rows[batch][point]`` on an even grid of attended layer-tokens (full-attention layers x
    context + sliding-window layers x min(context, window)): the step model is a smooth maximum of two lines
    in them, so interpolating linearly between points has no kink where a window fills."""

    rows: list[list[float]]
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
        return row[k] + (x - k) * (row[k + 1] - row[k])


@dataclass
class Plan:
    """What the loop runs: the requests and their costs, the first arrivals, the replica's limits and step times."""

    mode: int
    in_tok: list[int]
    out_tok: list[int]
    cp_s: list[float]            # replica time per prompt token carried by a decode step
    pc_s: list[float]            # compute per prompt token when the prompt is prefilled alone
    alone_s: list[float]         # the whole prompt as a step of its own
    arrivals: list[tuple[float, int]]   # (time at the scheduler, request) of the requests sent so far, in order
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
    step: StepModel              # the candidate (one-row arrays): costs of recomputed prompts
    one: StepModel               # the same with floats: carried and prefill-only steps


@dataclass
class Trace:
    t_arr: list[float]           # at the scheduler (the client's send + the front end)
    t_admit: list[float]         # first admission
    t_first: list[float]
    t_done: list[float]
    itl_v: list[float]           # inter-token gaps ...
    itl_w: list[float]           # ... and how many tokens each stands for
    window_s: float              # from the first measured arrival to the last measured completion
    tok_out: int                 # in the window
    tok_in: int
    done_window: int
    busy_b_s: float              # integral of the decoding batch over the window
    preemptions: int
    steps: int
    events: int
    simulated: int


def run(plan: Plan) -> Trace:
    """Run the loop until every measured request has finished."""
    mode, in_tok, out_tok = plan.mode, plan.in_tok, plan.out_tok
    CP, PC, ALONE = list(plan.cp_s), list(plan.pc_s), plan.alone_s
    sm, one = plan.step, plan.one
    table, u_lo, inv_du = plan.table.rows, plan.table.u_lo, plan.table.inv_du
    full_l, win_l, win = plan.table.full_layers, plan.table.window_layers, plan.table.window_tok
    top_k = len(table[0]) - 2
    max_tok, max_run, cap = plan.max_tok, plan.max_run, plan.cap_tok
    chunked, reserve, overhead_s, fixed_s = plan.chunked, plan.reserve, plan.overhead_s, plan.fixed_s
    first_meas, end_meas = plan.first_meas, plan.end_meas
    total = len(in_tok)
    n_meas = end_meas - first_meas

    def step_at(row: list[float], ctx: float) -> float:
        x = (full_l * ctx + win_l * (ctx if ctx < win else win) - u_lo) * inv_du
        k = int(x)
        if k > top_k:
            k = top_k
        lo = row[k]
        return lo + (x - k) * (row[k + 1] - lo)

    nan = math.nan
    t_arr = [nan] * total
    t_admit = [nan] * total
    t_first = [nan] * total
    t_done = [nan] * total
    t_last = [0.0] * total
    gen = [0] * total
    pf_rem = in_tok.copy()          # prompt tokens still to prefill (prompt + generated after a preemption)
    pf_len = [0] * total            # length of the current (re)prefill
    s0 = [0] * total                # step of a decoder's first decode
    kv0 = [0] * total               # its KV tokens then
    epoch = [0] * total             # bumped at preemption (stale heap entries are skipped)
    decoding = [False] * total
    in_run = [False] * total

    arrivals: deque[tuple[float, int]] = deque(plan.arrivals)
    for ts, rid in plan.arrivals:
        t_arr[rid] = ts
    next_rid = plan.next_rid

    waiting: deque[int] = deque()
    running: dict[int, None] = {}   # admission order (the newest is preempted first)
    prefilling: list[int] = []
    heap: list[tuple[int, int, int]] = []   # (step of the last decode, request, epoch)
    heappush, heappop = heapq.heappush, heapq.heappop
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
    itl_v: list[float] = []
    itl_w: list[float] = []

    def preempt() -> int:
        """The newest running request gives back its KV and goes first in the queue, to be recomputed."""
        nonlocal b, d0, pkv, preemptions
        victim = next(reversed(running))
        del running[victim]
        in_run[victim] = False
        if decoding[victim]:
            decoding[victim] = False
            b -= 1
            d0 -= kv0[victim] - s0[victim]
            epoch[victim] += 1
            t_last[victim] = t
        else:
            prefilling.remove(victim)
            pkv -= pf_len[victim] - pf_rem[victim]
        n_re = in_tok[victim] + gen[victim]
        pf_rem[victim] = n_re
        # the recomputed prompt is prompt + generated tokens: its per-token costs at that length
        re_tok = np.asarray([float(n_re)])
        CP[victim] = float(sm.prefill_tok_s(re_tok)[0])
        PC[victim] = float(sm.prompt_compute_s(re_tok)[0]) / n_re
        waiting.appendleft(victim)
        preemptions += 1
        return victim

    def finish(rid: int) -> None:
        nonlocal reserved, done_meas, next_rid, done_window, tok_in
        t_done[rid] = t
        del running[rid]
        in_run[rid] = False
        if reserve:
            reserved -= in_tok[rid] + out_tok[rid]
        if first_meas <= rid < end_meas:
            done_meas += 1
        if measuring:
            done_window += 1
            tok_in += in_tok[rid]
        if mode == MODE_CONCURRENCY and next_rid < total:
            t_arr[next_rid] = t + fixed_s
            arrivals.append((t + fixed_s, next_rid))
            next_rid += 1

    while done_meas < n_meas:
        if not running and not waiting:
            if not arrivals:
                break
            if t < arrivals[0][0]:
                t = arrivals[0][0]              # idle until the next arrival
        while arrivals and arrivals[0][0] <= t:
            rid = arrivals.popleft()[1]
            waiting.append(rid)
            entered += 1
            if rid == first_meas and not measuring:
                measuring, t_start = True, t

        # --- schedule one step: decodes first, then partial prefills, then new requests ------------------
        preempted = False
        if not reserve and b and d0 + b * g + pkv + b > cap:
            while d0 + b * g + pkv + b > cap and len(running) > 1:
                preempt()
                preempted = True
        budget = max_tok - b
        chunks: list[tuple[int, int]] = []
        p_tok, p_cost, p_comp = 0, 0.0, 0.0
        if prefilling:
            for rid in list(prefilling):
                if budget <= 0:
                    break
                if not in_run[rid]:
                    continue
                c = min(pf_rem[rid], budget)
                if not reserve and d0 + b * g + pkv + b + c > cap:
                    while d0 + b * g + pkv + b + c > cap and len(running) > 1:
                        preempted = True
                        if preempt() == rid:
                            break
                    if not in_run[rid]:
                        continue
                    budget = max_tok - b - p_tok
                    c = min(pf_rem[rid], budget)
                    if c <= 0:
                        break
                chunks.append((rid, c))
                budget -= c
                pkv += c
                p_tok += c
                p_cost += c * CP[rid]
                p_comp += c * PC[rid]
        if not preempted:
            while waiting and budget > 0 and len(running) < max_run:
                rid = waiting[0]
                need = pf_rem[rid]
                c = need if need < budget else budget
                if not chunked and c < need and need <= max_tok:
                    break                   # no chunking: the prompt waits for a step with room for all of it
                if running:
                    if reserve:
                        if reserved + in_tok[rid] + out_tok[rid] > cap:
                            break
                    elif d0 + b * g + pkv + b + c > cap:
                        break
                waiting.popleft()
                running[rid] = None
                in_run[rid] = True
                prefilling.append(rid)
                pf_len[rid] = need
                if t_admit[rid] != t_admit[rid]:
                    t_admit[rid] = t
                if reserve:
                    reserved += in_tok[rid] + out_tok[rid]
                chunks.append((rid, c))
                budget -= c
                pkv += c
                p_tok += c
                p_cost += c * CP[rid]
                p_comp += c * PC[rid]

        # --- its duration (a run of pure decode steps, or of one long prompt's chunks, is advanced at once) --
        k = 1
        run = 0                     # steps that each carry a budget-filling chunk of the same prompt
        if len(chunks) == 1 and budget == 0 and not preempted:
            rid, c = chunks[0]
            if pf_rem[rid] > c:
                run = (pf_rem[rid] - 1) // c
                if not reserve:
                    run = min(run, 1 + int((cap - d0 - b * g - pkv - b) // (b + c)))
        if b:
            row = table[b]
            ctx0 = (d0 + b * g) / b + 1.0
            x = (full_l * ctx0 + win_l * (ctx0 if ctx0 < win else win) - u_lo) * inv_du
            j = int(x)
            if j > top_k:
                j = top_k
            d_first = row[j] + (x - j) * (row[j + 1] - row[j])
            if p_tok:
                carry = one.carried_prefill_s(b, p_tok, p_cost)
                d_first += carry
                d_last = d_first
                if run > 1:
                    while epoch[heap[0][1]] != heap[0][2]:
                        heappop(heap)
                    k = min(run, heap[0][0] - g + 1)
                    if k > 1:
                        d_last = step_at(row, ctx0 + (k - 1)) + carry
            elif preempted:
                d_last = d_first
            else:
                while epoch[heap[0][1]] != heap[0][2]:
                    heappop(heap)
                k = heap[0][0] - g + 1
                if not reserve:
                    k = max(min(k, int((cap - d0 - b * g - pkv) // b)), 1)
                d_last = step_at(row, ctx0 + (k - 1)) if k > 1 else d_first
                if arrivals and not waiting and len(running) < max_run:
                    # stop where the next arrival could be admitted: the first step ending after it
                    wait = arrivals[0][0] - t
                    slope = (d_last - d_first) / (k - 1) if k > 1 else 0.0
                    if slope > 1e-12 * d_first:
                        half = 0.5 * slope
                        lin = d_first - half
                        m = math.ceil((-lin + math.sqrt(lin * lin + 4.0 * half * wait)) / (2.0 * half) - 1e-9)
                    else:
                        m = math.ceil(wait / d_first - 1e-9)
                    if m < k:
                        k = m if m > 1 else 1
                        d_last = d_first + slope * (k - 1)
            dur = 0.5 * (d_first + d_last) * k
        elif len(chunks) == 1 and p_tok == pf_len[chunks[0][0]] == in_tok[chunks[0][0]]:
            dur = ALONE[chunks[0][0]]
        else:
            dur = one.prefill_only_s(p_comp, p_tok) + overhead_s
            if run > 1:
                k = run
                dur *= k
        if k > 1 and p_tok:
            rid, c = chunks[0]
            chunks = [(rid, c * k)]
            pkv += c * (k - 1)
        t += dur
        g += k
        steps += k
        events += 1
        if measuring:
            tok_out += b * k
            busy_b_s += b * dur
            if b:
                itl_v.append(dur / k)
                itl_w.append(float(b * k))

        # --- prompts that finished prefilling emit their first (or, after a preemption, next) token ------
        for rid, c in chunks:
            left = pf_rem[rid] - c
            pf_rem[rid] = left
            if left:
                continue
            prefilling.remove(rid)
            pkv -= pf_len[rid]
            gen[rid] += 1
            if measuring:
                tok_out += 1
            if t_first[rid] != t_first[rid]:
                t_first[rid] = t
            elif measuring:
                itl_v.append(t - t_last[rid])
                itl_w.append(1.0)
            if gen[rid] >= out_tok[rid]:
                finish(rid)
                continue
            decoding[rid] = True
            s0[rid], kv0[rid] = g, pf_len[rid]
            heappush(heap, (g + out_tok[rid] - gen[rid] - 1, rid, epoch[rid]))
            b += 1
            d0 += kv0[rid] - g
        # --- sequences whose last token was this step's ---------------------------------------------------
        while heap and heap[0][0] < g:
            _, rid, ep = heappop(heap)
            if ep != epoch[rid]:
                continue
            decoding[rid] = False
            b -= 1
            d0 -= kv0[rid] - s0[rid]
            gen[rid] = out_tok[rid]
            finish(rid)

    return Trace(t_arr=t_arr, t_admit=t_admit, t_first=t_first, t_done=t_done, itl_v=itl_v, itl_w=itl_w,
                 window_s=max(t - t_start, 1e-30), tok_out=tok_out, tok_in=tok_in, done_window=done_window,
                 busy_b_s=busy_b_s, preemptions=preemptions, steps=steps, events=events, simulated=entered)
