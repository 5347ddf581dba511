"""All-reduces per forward pass under tensor parallelism (service/core/memory.py ``ar_count``): two per layer
(attention, MLP), one where the catalog says the layer runs them in parallel on the same input (Falcon)."""

from __future__ import annotations

import numpy as np

from gpu_catalog.schema import ModelSpec
from service.core.costmodel import build_tables, static_terms
from tests.core.support import CATALOG, CONSTANTS, PARAMS, TABLES, cand, run

FALCON = "tiiuae/falcon-180B"


def _sequential_twin() -> tuple[ModelSpec, str]:
    """Falcon-180B as if attention and MLP ran one after the other (the same weights and shapes)."""
    spec = CATALOG.resolve_model(FALCON)
    assert spec is not None and spec.parallel_attention
    twin = spec.model_copy(update={"id": "test/falcon-180b-sequential", "family": "test-falcon-sequential",
                                   "aliases": [], "parallel_attention": False})
    return twin, twin.id


def test_parallel_attention_all_reduces_once_per_layer() -> None:
    c = cand(FALCON, "h100-sxm", wd="fp8", tp=8)
    assert static_terms(TABLES, c).ar_count[0] == CATALOG.resolve_model(FALCON).num_layers
    llama = cand("meta-llama/Llama-3.1-70B", "h100-sxm", wd="fp8", tp=8)
    assert static_terms(TABLES, llama).ar_count[0] == 2 * 80


def test_one_all_reduce_per_layer_shortens_a_tp_prefill_by_the_saved_traffic() -> None:
    twin, twin_id = _sequential_twin()
    tables = build_tables(CATALOG, CONSTANTS, extra_models=[twin])
    idx = tables.index()["model"]
    par = cand(FALCON, "h100-sxm", wd="fp8", tp=8, isl=2048, osl=2)
    seq = cand(FALCON, "h100-sxm", wd="fp8", tp=8, isl=2048, osl=2)
    seq.model[:] = idx[twin_id]
    s_par, s_seq = static_terms(tables, par), static_terms(tables, seq)
    assert s_seq.ar_count[0] == 2 * s_par.ar_count[0]
    assert np.isclose(s_par.weights[0], s_seq.weights[0])
    r_par, r_seq = run(par, tables, PARAMS), run(seq, tables, PARAMS)
    assert r_par.prefill_s[0] < r_seq.prefill_s[0]
    assert r_par.tpot_s[0] < r_seq.tpot_s[0]
    # without TP there is nothing to reduce: the two are the same deployment
    par1 = cand(FALCON, "h100-sxm", wd="fp8", tp=1, isl=2048, osl=2)
    seq1 = cand(FALCON, "h100-sxm", wd="fp8", tp=1, isl=2048, osl=2)
    seq1.model[:] = idx[twin_id]
    assert run(par1, tables, PARAMS).prefill_s[0] == run(seq1, tables, PARAMS).prefill_s[0]
