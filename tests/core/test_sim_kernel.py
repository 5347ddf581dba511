"""The compiled event loop (service/core/sim_kernel.py) against traces worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.core import sim_kernel as sk

ALONE_S = 0.05           # the prompt prefilled as a step of its own
STEP_S = 0.01            # a decode step at any batch and context (a flat step table)


def _inputs(prompt_tok: list[int], output_tok: list[int], arrival_s: list[float],
            max_run: int = 8, cap_tok: float = 1e9) -> tuple[np.ndarray, ...]:
    n = len(prompt_tok)
    tok = np.asarray([prompt_tok, output_tok], dtype=np.int64)
    cost = np.zeros((sk.COST_ROWS, n))             # a closed loop's clients send as their last request ends
    cost[sk.COST_CARRIED_S] = 1e-4                  # per prompt token carried by a decode step
    cost[sk.COST_COMPUTE_S] = 1e-4
    cost[sk.COST_ALONE_S] = ALONE_S
    k = np.zeros(sk.K_SIZE)
    k[sk.K_PP] = k[sk.K_TP] = k[sk.K_N_GPU] = 1.0
    k[sk.K_GEMM_RATE_FLOPS_S] = k[sk.K_ATTN_RATE_FLOPS_S] = k[sk.K_LINK_BYTES_S] = 1.0
    k[sk.K_WINDOW_TOK] = k[sk.K_TABLE_WINDOW_TOK] = math.inf
    k[sk.K_TABLE_INV_DU] = k[sk.K_TABLE_FULL_LAYERS] = 1.0
    k[sk.K_CAP_TOK] = cap_tok
    k[sk.K_VERIFY_TOK] = k[sk.K_TOK_PER_STEP] = 1.0      # no speculation: one budget token per decode
    lim = np.zeros(sk.L_SIZE, dtype=np.int64)
    lim[sk.L_NEXT_RID], lim[sk.L_END_MEAS] = n, n
    lim[sk.L_MAX_TOK], lim[sk.L_MAX_RUN], lim[sk.L_CHUNKED] = 4096, max_run, 1
    order = np.argsort(arrival_s, kind="stable")
    table = np.full((max_run + 1, 4), STEP_S)
    return tok, cost, np.asarray(arrival_s)[order], order.astype(np.int64), table, k, lim


def test_one_request_is_its_prompt_alone_then_one_decode_step_per_further_token() -> None:
    # arrives at 0, prefilled alone (0.05 s, first token), then 9 decode steps of 0.01 s: done at 0.14 s
    out = sk.loop(*_inputs([100], [10], [0.0]))
    t_arr, t_admit, t_first, t_done, itl_v, itl_w, window_s, tok_out, tok_in, done, _, pre, steps, events, sim = out
    assert (t_arr[0], t_admit[0]) == (0.0, 0.0)
    assert t_first[0] == pytest.approx(ALONE_S)
    assert t_done[0] == pytest.approx(ALONE_S + 9 * STEP_S)
    assert window_s == pytest.approx(ALONE_S + 9 * STEP_S)
    # one event for the prompt, one for the run of 9 identical decode steps (advanced at once)
    assert (steps, events) == (10, 2)
    assert (tok_out, tok_in, done, pre, sim) == (10, 100, 1, 0, 1)
    # the decode run's inter-token gap is one step, standing for 9 tokens
    assert list(itl_v) == pytest.approx([STEP_S]) and list(itl_w) == [9.0]


def test_a_second_request_waits_for_a_free_slot_when_one_sequence_may_run() -> None:
    # max_num_seqs 1: the second request, there from the start, is admitted when the first ends (0.05 + 4 x
    # 0.01 = 0.09 s) and then takes the same 0.09 s: done at 0.18 s
    out = sk.loop(*_inputs([50, 50], [5, 5], [0.0, 0.0], max_run=1))
    t_admit, t_first, t_done = out[1], out[2], out[3]
    assert t_done[0] == pytest.approx(0.09)
    assert t_admit[1] == pytest.approx(0.09)
    assert t_first[1] == pytest.approx(0.09 + ALONE_S)
    assert t_done[1] == pytest.approx(0.18)
