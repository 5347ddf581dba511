"""The compiled step of one candidate (service/core/step_kernels.py) against the step model on arrays."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from service.core.costmodel import (
    static_terms,
    step_model,
)
from service.core.step_kernels import decode_step_f
from tests.core.support import (
    PARAMS,
    TABLES,
    cand,
    deployments,
)


@settings(max_examples=30, deadline=None)
@given(d=deployments, batch=st.floats(0.0, 2048.0))
def test_the_compiled_serving_solve_steps_like_the_step_model(d: dict[str, Any], batch: float) -> None:
    # the compiled solve (serve_kernel.serve_into) times decode steps with its own scalar copy of
    # StepModel.decode_step (which the simulation's step tables use): the two must agree to the last bit
    st_ = static_terms(TABLES, cand(d.pop("model"), d.pop("gpu"), **d))
    sm = step_model(st_, PARAMS)
    want = sm.decode_step(np.asarray([batch]))
    got = decode_step_f(batch, sm.pp[0], sm.dense_s[0], sm.expert_s[0], sm.log_miss[0], bool(sm.moe[0]), sm.seq_s[0],
                         sm.flop_s_seq[0], sm.comm_fixed_s[0], sm.comm_seq_s[0], float(sm.step_fixed_s[0]),
                         float(np.ravel(sm.draft_expert_s)[0]), float(np.ravel(sm.draft_log_miss)[0]))
    assert got == (float(want[0][0]), float(want[1][0]))
