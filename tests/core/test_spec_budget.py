"""The token budget of speculative decoding, by hand: a verify step's decodes take k + 1 tokens each of the
step's token budget (vLLM's scheduler charges the draft tokens to it), a step of the step model is a verify
step per emitted token, and a waiting prompt rides on the next verify step. The serving solve
(serve_kernel._ttft_f) and the simulation (sim_kernel.prompt_budget_f) use the same budget."""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.core import sim_kernel as sk
from service.core.serve_kernel import _ttft_f
from service.core.sim_kernel import prompt_budget_f, verify_boundary_steps
from tests.core.test_sim_kernel import _inputs

# k = 3 draft tokens at acceptance 0.5: a verify step takes k + 1 = 4 budget tokens per decode and emits
# tau = (1 - 0.5^4) / (1 - 0.5) = 1.875 tokens per sequence
VERIFY_TOK, TAU = 4.0, 1.875
MAX_TOK = 2048


def test_a_boundary_every_tau_steps() -> None:
    # steps g starting a verify step: floor((g + 1) / 1.875) > floor(g / 1.875): 1, 3, 5, 7, 9, 11, 13, 14
    starts = [g for g in range(15) if verify_boundary_steps(g, TAU) == 0]
    assert starts == [1, 3, 5, 7, 9, 11, 13, 14]
    assert len(starts) == math.floor(15 / TAU)          # 8 verify steps emit the 15 tokens
    assert [verify_boundary_steps(g, TAU) for g in (0, 2, 8, 12)] == [1, 1, 1, 1]
    # without speculation every step is one
    assert all(verify_boundary_steps(g, 1.0) == 0 for g in range(20))


def test_prompt_budget_by_hand() -> None:
    # 100 sequences decoding: a verify step leaves 2048 - 100 x 4 = 1648 tokens to prompts, on its first step;
    # the others carry none; a step without decodes is a prefill of the whole budget
    assert prompt_budget_f(MAX_TOK, 100, VERIFY_TOK, TAU, 1) == 1648
    assert prompt_budget_f(MAX_TOK, 100, VERIFY_TOK, TAU, 2) == 0
    assert prompt_budget_f(MAX_TOK, 0, VERIFY_TOK, TAU, 2) == MAX_TOK
    assert prompt_budget_f(MAX_TOK, 600, VERIFY_TOK, TAU, 1) == 0      # the decodes fill the budget
    # plain decoding: 2048 - 100 on every step
    assert prompt_budget_f(MAX_TOK, 100, 1.0, 1.0, 2) == 1948
    # averaged over 15 steps (8 verify steps): 8 x 1648 / 15, the serving solve's 1648 / 1.875 to 1/15
    mean = np.mean([prompt_budget_f(MAX_TOK, 100, VERIFY_TOK, TAU, g) for g in range(15)])
    assert mean == pytest.approx(1648 / TAU, rel=1 / 15)


def test_serving_solve_ttft_by_hand() -> None:
    # 10 decoding, steps of 10 ms per emitted token, a 4096-token prompt at 10 us per carried token alone taking
    # 50 ms, a 100 ms front end with it: chunks of (2048 - 10 x 4) / 1.875 = 1070.9 tokens per step, and half a
    # verify step (1.875 steps) to the next one
    step_s, c_prefill, alone, fixed_alone = 0.010, 1e-5, 0.050, 0.100
    chunk = (MAX_TOK - 10 * VERIFY_TOK) / TAU
    extra = 4096 * (step_s / chunk + c_prefill) - alone
    want = fixed_alone + extra + 0.5 * step_s * TAU
    got = _ttft_f(10.0, step_s, 0.0, float(MAX_TOK), 512.0, 4096.0, c_prefill, alone, fixed_alone, 0.0, 0.0, 1.0,
                  VERIFY_TOK, TAU)
    assert got == pytest.approx(want, rel=1e-12)
    plain = _ttft_f(10.0, step_s, 0.0, float(MAX_TOK), 512.0, 4096.0, c_prefill, alone, fixed_alone, 0.0, 0.0, 1.0,
                    1.0, 1.0)
    assert plain == pytest.approx(fixed_alone + 4096 * (step_s / (MAX_TOK - 10) + c_prefill) - alone + 0.5 * step_s)
    assert got > plain


@pytest.mark.parametrize("compiled", [True, False])
def test_simulated_prompt_waits_for_the_next_verify_step(compiled: bool) -> None:
    # request 0's prompt alone takes 0.05 s (step g = 0), then it decodes in steps of 10 ms from g = 1; request 1
    # (100 tokens at 0.1 ms each when carried) arrives at 0.055 s, during step g = 1, and is carried by a step
    # of 10 + 10 ms. Plain: by step g = 2, first token at 0.08 s. tau = 1.875: the next verify step starts at
    # g = 3, one decode step later (0.09 s); tau = 5: at g = 4 (0.10 s)
    loop = sk.loop if compiled else sk.loop.py_func
    firsts = {}
    for tau in (1.0, TAU, 5.0):
        tok, cost, arr_s, arr_r, table, k, lim = _inputs([100, 100], [50, 2], [0.0, 0.055])
        k[sk.K_VERIFY_TOK], k[sk.K_TOK_PER_STEP] = (1.0, 1.0) if tau == 1.0 else (VERIFY_TOK, tau)
        firsts[tau] = loop(tok, cost, arr_s, arr_r, table, k, lim)[2][1]
    assert firsts[1.0] == pytest.approx(0.08)
    assert firsts[TAU] == pytest.approx(0.09)
    assert firsts[5.0] == pytest.approx(0.10)
