"""The compiled serving solve (service/core/serve_kernel.py): compiled once, the same figures as run as Python,
and each candidate's figures independent of the others in its call."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.core import serve, serve_kernel
from service.core.costmodel import (
    MODES,
    Result,
    ServeInputs,
    static_terms,
    warm_up,
)
from tests.core.support import (
    PARAMS,
    TABLES,
    cand,
    deployments,
    kernel,
    run,
)


def test_the_serving_solve_is_compiled_once_for_every_mode() -> None:
    # another argument type (a read-only view, say) would compile the kernel again: ~6 s in a request
    warm_up()
    for mode in MODES:
        run(cand("Qwen/Qwen3-30B-A3B", "h100-sxm", mode=mode, load=[1.0, 8.0]))
    assert len(serve_kernel.serve_into.signatures) == 1


@settings(max_examples=20, deadline=None)
@given(d=deployments, mode=st.sampled_from(list(MODES)))
def test_the_compiled_serving_solve_gives_the_interpreted_ones_figures(d: dict[str, Any], mode: str) -> None:
    # the same function run as Python (numba's py_func) must give the same figures to the last bit
    c = cand(d.pop("model"), d.pop("gpu"), mode=mode, load=np.geomspace(0.05, 500, 12), **d)
    compiled = run(c)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(serve, "serve_into", serve_kernel.serve_into.py_func)
        m.setattr(serve_kernel, "_root_block", serve_kernel._root_block.py_func)
        interpreted = run(c)
    for f in fields(Result):
        got, want = getattr(compiled, f.name), getattr(interpreted, f.name)
        # correction: none without users' measurements, in both
        assert (got is None and want is None) or np.array_equal(got, want, equal_nan=True), f.name



@pytest.mark.parametrize("mode", ["concurrency", "request_rate"])
def test_a_candidates_solve_does_not_depend_on_the_others_in_its_call(mode: str) -> None:
    # the compiled solve takes candidates in blocks (serve_kernel._ROOT_BLOCK): 300 candidates solved together
    # must get exactly the figures each gets alone
    loads = np.geomspace(0.05, 3000, 300)
    static = static_terms(TABLES, cand("Qwen/Qwen3-30B-A3B", "h100-sxm", mode=mode, load=loads))
    inputs = ServeInputs.of(static, PARAMS)
    together = inputs.solve(MODES[mode])
    for i in range(0, len(loads), 7):
        alone = kernel(MODES[mode], inputs.moe[i:i + 1].copy(), np.ascontiguousarray(inputs.rows[:, i:i + 1]))
        for got, want in zip(alone, together, strict=True):
            assert got[0] == want[i]
