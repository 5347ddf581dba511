"""Shared by the core's tests: the real catalog's tables, the starting efficiencies of costmodel.yaml (no fit),
and a builder of candidates for one deployment."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from gpu_catalog.loader import load_catalog, load_cost_constants
from service.core import serve_kernel
from service.core.costmodel import (
    BUDGET_SHARE_OF_TOTAL,
    MODES,
    PARAM_NAMES,
    Candidates,
    Params,
    Result,
    Tables,
    build_tables,
    evaluate,
)

CATALOG = load_catalog()
CONSTANTS = load_cost_constants()
TABLES = build_tables(CATALOG, CONSTANTS)
IDX = TABLES.index()
PARAMS = Params(*(np.asarray(CONSTANTS.initial_params[n].initial) for n in PARAM_NAMES))


def cand(model: str, gpu: str, *, wd: str = "bf16", kv: str = "auto", tp: int = 1, pp: int = 1, replicas: int = 1,
         seqs: float = 256, tokens: float = 8192, frac: float = 0.9, budget: int = BUDGET_SHARE_OF_TOTAL,
         reserve_full: bool = False, isl: float = 1024, osl: float = 256, mode: str = "concurrency", load: Any = 1.0,
         ctx: float | None = None) -> Candidates:
    """Candidates for one deployment; ``load`` may be an array (one candidate per value)."""
    loads = np.atleast_1d(np.asarray(load, dtype=np.float64))
    n = len(loads)

    def full(v: float) -> np.ndarray:
        return np.full(n, float(v))

    def ints(v: int) -> np.ndarray:
        return np.full(n, v, dtype=np.int64)

    return Candidates(
        model=ints(IDX["model"][CATALOG.resolve_model(model).id]), gpu=ints(IDX["gpu"][gpu]),
        wdtype=ints(IDX["wdtype"][wd]), kvdtype=ints(IDX["kvdtype"][kv]), budget=ints(budget), tp=full(tp),
        pp=full(pp), ep=full(1), replicas=full(replicas), max_num_seqs=full(seqs), max_batched_tok=full(tokens),
        mem_fraction=full(frac), reserve_full=full(1.0 if reserve_full else 0.0), input_tok=full(isl),
        output_tok=full(osl), mode=ints(MODES[mode]), load=loads,
        context_tok=full(ctx if ctx is not None else isl + osl),
        first_wave_share=full(1.0 if mode == "offline" else 0.0))


def run(c: Candidates, tables: Tables = TABLES, params: Params = PARAMS) -> Result:
    return evaluate(tables, c, params)


# Llama-3.1-8B: 8.03e9 parameters (catalog total_params_b), of which the untied embedding and LM head are
# 2 x 128,256 x 4,096 = 1,050,673,152 elements, kept in 16 bits by every recipe; the other 6,979,326,848
# take the dtype's bits per weight (fp8: 8; int4-awq: 4 + 16-bit scale and zero per 128 = 4.15625).
EMBED = 2 * 128_256 * 4_096
LINEAR = 8.03e9 - EMBED


MODELS = ["meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "mistralai/Mixtral-8x7B-v0.1",
          "Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V3"]
GPUS = ["l4", "a100-80gb-sxm", "h100-sxm", "h200-sxm", "b200", "mi300x"]
deployments = st.fixed_dictionaries({
    "model": st.sampled_from(MODELS), "gpu": st.sampled_from(GPUS), "tp": st.sampled_from([1, 2, 4, 8]),
    "wd": st.sampled_from(["bf16", "fp8", "int4-awq"]), "isl": st.integers(16, 8192), "osl": st.integers(2, 2048),
    "seqs": st.sampled_from([8, 64, 256, 1024]), "tokens": st.sampled_from([512, 2048, 8192]),
})



def kernel(mode: int, moe: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """The compiled solve of every candidate in ``rows``: batch, TTFT, TPOT, requests/s, compute share, overloaded."""
    out, over = serve_kernel.serve_kernel(mode, moe, rows)
    return (*out, over)
