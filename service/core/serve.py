"""Prefill, decode and serving dynamics of candidates whose static terms are known (``serve``, ``evaluate``).

Continuous batching: with ``B`` sequences decoding, each step also carries on average ``B x I / O`` prompt
tokens (I, O: input and output lengths) of arriving requests (chunked prefill), so
``TPOT = t_decode(B) + B x (I/O) x c_prefill``. Closed loops solve Little's law for ``B``; open loops (request
rate) add M/D/1 queueing to TTFT; when the load exceeds what ``max_num_seqs`` or the KV cache holds, requests
queue and TTFT absorbs the wait. The step model is numpy (step_model.py), the per-candidate solve compiled
(serve_kernel.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.core import cpu_pool
from service.core.candidates import MODE_OFFLINE, MODE_STATIC, PARAM_NAMES, Candidates, Params, take_rows
from service.core.memory import Static, static_terms
from service.core.serve_kernel import (
    KERNEL_INPUTS,
    KERNEL_OUTPUTS,
    OUT_BATCH,
    OUT_COMPUTE_SHARE,
    OUT_REQUESTS_S,
    OUT_TPOT_S,
    OUT_TTFT_S,
    serve_into,
)
from service.core.step_model import StepModel, step_model
from service.core.tables import Tables
from service.core.types import B_, F


@dataclass
class Result:
    fits: B_
    runnable: B_             # the GPU has a compute path for the dtype
    weights_bytes: F                        # per GPU
    kv_cache_bytes: F                       # per GPU, the KV pool
    activations_bytes: F
    overhead_bytes: F
    kv_bytes_per_seq: F                     # per GPU, one sequence of context_tok
    max_concurrency: F                      # whole deployment, sequences of context_tok held at once
    batch: F                                # sequences decoding per replica in steady state
    ttft_s: F
    tpot_s: F
    e2e_s: F
    output_tok_s: F                         # whole deployment
    total_tok_s: F
    requests_s: F
    prefill_s: F                            # one prompt alone, no queueing
    overloaded: B_           # open loop above capacity: TTFT grows without bound
    compute_bound_share: F                  # t_compute / (t_compute + t_memory) of the steady decode step
    # (n, 3) factors on TTFT, TPOT and throughput from users' measurements nearby (residuals.corrected);
    # None: no correction. A simulation of the same deployment is scaled by the same factors.
    correction: F | None = None


def evaluate(t: Tables, c: Candidates, p: Params) -> Result:
    """Score every candidate. Vectorised; no Python loop over candidates."""
    return serve(static_terms(t, c), p)



ModeSplit = list[tuple[NDArray[np.int64], Static, int]]


def split_modes(s: Static) -> ModeSplit:
    """The candidates grouped by workload mode (each group is served by its own branch)."""
    return [(idx := np.flatnonzero(s.mode == mv), take_rows(s, idx), int(mv)) for mv in np.unique(s.mode)]


def serve(s: Static, p: Params, split: ModeSplit | None = None) -> Result:
    """Prefill, decode and serving dynamics of candidates whose static terms are known.

    ``split`` (from ``split_modes(s)``) saves regrouping when the same candidates are served many times."""
    n = len(s.isl)
    p = Params(*(np.broadcast_to(np.asarray(getattr(p, name), dtype=np.float64), (n,)) for name in PARAM_NAMES))
    modes = np.unique(s.mode) if split is None else [mv for _, _, mv in split]
    if len(modes) <= 1:    # one mode (or no candidates at all)
        return _serve_mode(s, p, int(modes[0]) if len(modes) else MODE_OFFLINE)
    parts = [(idx, _serve_mode(sub, take_rows(p, idx), mv)) for idx, sub, mv in (split or split_modes(s))]
    out: dict[str, NDArray[Any]] = {}
    for f in fields(Result):
        first = getattr(parts[0][1], f.name)
        if first is None:       # correction: set only after serving (residuals.corrected)
            continue
        arr = np.empty(n, dtype=first.dtype)
        for idx, res in parts:
            arr[idx] = getattr(res, f.name)
        out[f.name] = arr
    return Result(**out)


_ROW = {name: k for k, name in enumerate(KERNEL_INPUTS)}


@dataclass
class ServeInputs:
    """``serve_into``'s inputs of some candidates, a row per input (``KERNEL_INPUTS``) and a column per
    candidate: built once, solved at any load or replica count (``solve_at``) without the step model again
    (the recommendation search solves its units at many replica counts)."""

    moe: B_
    rows: F                                     # (len(KERNEL_INPUTS), n), C-ordered: each row is contiguous

    @classmethod
    def of(cls, s: Static, p: Params, sm: StepModel | None = None) -> ServeInputs:
        sm = step_model(s, p) if sm is None else sm
        n = len(s.isl)
        rows = np.empty((len(KERNEL_INPUTS), n))
        for k, v in enumerate((s.isl, s.osl, s.pp, s.load / s.replicas, s.cap_mean, s.max_batched_tok,
                               sm.c_prefill_s, sm.prefill_alone_s, sm.dense_s, sm.expert_s, sm.log_miss, sm.seq_s,
                               sm.flop_s_seq, sm.comm_fixed_s, sm.comm_seq_s, sm.step_fixed_s, sm.step_overhead_s,
                               sm.ttft_fixed_s, p.wave * s.first_wave_share, sm.draft_expert_s, sm.draft_log_miss,
                               sm.verify_tok, sm.tok_per_step)):
            rows[k] = v
        return cls(moe=np.array(np.broadcast_to(sm.moe, (n,)), dtype=np.bool_), rows=rows)

    def row(self, name: str) -> F:
        return self.rows[_ROW[name]]

    def take(self, idx: NDArray[np.int64], replicas: F, load: float) -> ServeInputs:
        """Candidates ``idx`` at ``replicas`` each (at least one) sharing ``load``."""
        return self.expand(idx, per_replica=load / np.maximum(replicas, 1.0))

    def expand(self, idx: NDArray[np.int64], **rows: F) -> ServeInputs:
        """Candidates ``idx`` (repeats allowed), with the inputs named in ``rows`` set."""
        out = ServeInputs(moe=self.moe[idx], rows=np.take(self.rows, idx, axis=1))
        for name, v in rows.items():
            out.rows[_ROW[name]] = v
        return out

    def solve(self, mode_value: int) -> tuple[F, F, F, F, F, B_]:
        """The compiled solve's answer (batch, TTFT, TPOT, requests/s per replica, compute share, overloaded)."""
        return _solve_parts(int(mode_value), len(self.moe), lambda a, b: (self.moe, self.rows, a))

    def solve_at(self, idx: NDArray[np.int64], replicas: F, load: float, mode_value: int,
                 finish: Finish | None = None) -> tuple[F, F, F, F, F, B_]:
        """``self.take(idx, replicas, load).solve(mode_value)``, each part of the candidates gathered by the
        thread that solves it (``finish``: see ``_solve_parts``)."""
        per_replica = load / np.maximum(replicas, 1.0)

        def inputs(a: int, b: int) -> tuple[B_, F, int]:
            part = idx[a:b]
            rows = np.take(self.rows, part, axis=1)
            rows[_ROW["per_replica"]] = per_replica[a:b]
            return self.moe[part], rows, 0

        return _solve_parts(int(mode_value), len(idx), inputs, finish)


# What a caller does with each part of a split solve's answer, in the thread that solved it: called with the
# part's first and end candidate, then its batch, TTFT, TPOT, requests/s per replica, compute share, overloaded.
Finish = Callable[[int, int, F, F, F, F, F, B_], None]


def _solve_parts(mode: int, n: int, inputs: Callable[[int, int], tuple[B_, F, int]],
                 finish: Finish | None = None) -> tuple[F, F, F, F, F, B_]:
    """The compiled solve of ``n`` candidates: ``inputs(a, b)`` gives the moe flags and input rows that hold
    candidates a..b-1, and the column of candidate a in them. Many candidates are split over the cores
    (``cpu_pool.run_parts``): the compiled solve releases the GIL (as do numpy's gathers, scatters and
    arithmetic on arrays), each part writes its own columns of the answer, then hands them to ``finish``; each
    candidate's figures do not depend on the others in its call (a tested property)."""
    out = np.empty((len(KERNEL_OUTPUTS), n))
    over = np.empty(n, dtype=np.bool_)

    def part(a: int, b: int) -> None:
        moe, rows, first_in = inputs(a, b)
        serve_into(mode, moe, rows, first_in, out, over, a, b - a)
        if finish is not None:
            finish(a, b, out[OUT_BATCH, a:b], out[OUT_TTFT_S, a:b], out[OUT_TPOT_S, a:b], out[OUT_REQUESTS_S, a:b],
                   out[OUT_COMPUTE_SHARE, a:b], over[a:b])

    cpu_pool.run_parts(n, part)
    return out[OUT_BATCH], out[OUT_TTFT_S], out[OUT_TPOT_S], out[OUT_REQUESTS_S], out[OUT_COMPUTE_SHARE], over


def _serve_mode(s: Static, p: Params, mode_value: int) -> Result:
    """Prefill, decode and serving dynamics of candidates that all share one workload mode: the step model in
    numpy, the per-candidate solve compiled (``serve_kernel.serve_into``)."""
    sm = step_model(s, p)
    batch, ttft, tpot, x, share, overloaded = ServeInputs.of(s, p, sm).solve(mode_value)
    prefill_alone = sm.prefill_alone_s
    if mode_value == MODE_STATIC:
        # one batch of B prompts prefilled together (a prefill-only step of B prompts), then decodes
        B = batch
        prefill_b = sm.prefill_only_s(B * sm.prefill_compute_s, s.isl * B)
        step_b = tpot
        e2e_b = prefill_b + (s.osl - 1.0) * step_b
        ttft, x = prefill_b, B / e2e_b
    e2e = ttft + (s.osl - 1.0) * tpot
    requests_s = x * s.replicas
    return Result(
        fits=s.fits, runnable=s.runnable, weights_bytes=s.weights, kv_cache_bytes=s.kv_pool,
        activations_bytes=s.activations, overhead_bytes=s.overhead, kv_bytes_per_seq=s.seq_full,
        max_concurrency=s.max_conc_replica * s.replicas, batch=batch, ttft_s=ttft, tpot_s=tpot, e2e_s=e2e,
        output_tok_s=requests_s * s.osl, total_tok_s=requests_s * (s.isl + s.osl), requests_s=requests_s,
        prefill_s=prefill_alone, overloaded=overloaded, compute_bound_share=share,
    )
