"""What the calibration fits (service/core/calibration/measurements.prepare) on real shipped rows: duplicates
once, layouts the model does not represent out of the latency fit, the KV dtype a checkpoint decides, and runs
whose stated load the modelled memory cannot hold without a queue the measurement does not show."""

from __future__ import annotations

import csv
from typing import Any

import numpy as np
import pytest

from gpu_catalog.loader import PUBLISHED_CSV, load_catalog, load_cost_constants
from service.core.calibration import DUPLICATE, DUPLICATE_CONFLICT, PAST_CONTEXT, UNQUEUED_OVERLOAD, prepare
from service.core.costmodel import build_tables

CATALOG = load_catalog()
CONSTANTS = load_cost_constants()
TABLES = build_tables(CATALOG, CONSTANTS)


@pytest.fixture(scope="module")
def row() -> dict[str, Any]:
    """A shipped closed-loop run of dense Qwen3-32B FP8 on one H100 (TensorRT-LLM, 8 clients;
    TTFT and TPOT, no throughput)."""
    with PUBLISHED_CSV.open(encoding="utf-8", newline="") as fh:
        for r in csv.DictReader(fh):
            if (r["model_family"] == "qwen3-32b" and r["gpu"] == "h100-sxm" and r["engine"] == "trtllm"
                    and r["tp"] == "1" and r["mode"] == "concurrency" and r["concurrency"] == "8"
                    and r["ttft_ms"] and r["tpot_ms"] and not r["output_tok_s"]):
                return dict(r)
    raise AssertionError("no such shipped row")


def _copy(r: dict[str, Any], row_id: str, **changes: Any) -> dict[str, Any]:
    return {**r, "row_id": row_id, **changes}


def test_duplicates_are_fitted_once(row: dict[str, Any]) -> None:
    same = prepare([_copy(row, "a"), _copy(row, "b")], CATALOG, TABLES, CONSTANTS)
    assert same.row_ids == ["a"] and same.skipped == {DUPLICATE: 1}
    # the same figures stated for two layouts: which one ran is unknown, neither is fitted
    other = prepare([_copy(row, "a"), _copy(row, "b", tp="2", gpu_count="2")], CATALOG, TABLES, CONSTANTS)
    assert len(other) == 0 and other.skipped == {DUPLICATE_CONFLICT: 2}
    # independent sources may agree to the digit (a user's run on another GPU): both are fitted
    sources = prepare([_copy(row, "a"), _copy(row, "b", tp="2", gpu_count="2", source_id="user:1")],
                      CATALOG, TABLES, CONSTANTS)
    assert sources.row_ids == ["a", "b"] and not sources.skipped
    distinct = prepare([_copy(row, "a"), _copy(row, "b", ttft_ms="1.5")], CATALOG, TABLES, CONSTANTS)
    assert distinct.row_ids == ["a", "b"] and not distinct.skipped


def test_unmodelled_layouts_leave_the_latency_fit(row: dict[str, Any]) -> None:
    adp = _copy(row, "adp", notes="attention_dp=4; moe_tp=1")
    ep = _copy(row, "ep", ep="2", ttft_ms="99", output_tok_s="1000")
    ms = prepare([adp, ep, _copy(row, "plain", ttft_ms="1.5")], CATALOG, TABLES, CONSTANTS)
    # a dense model has no experts to share: the attention-DP row had only latencies (nothing is left of
    # it), the EP row is not a layout that runs (ep must be 1)
    assert ms.row_ids == ["plain"] and np.isfinite(ms.y[0]).sum() == 2
    assert sum(v for k, v in ms.skipped.items() if k.startswith("latency not fitted")) == 1
    assert sum(v for k, v in ms.skipped.items() if k.startswith("layout not runnable")) == 1


def _shipped(**want: str) -> dict[str, Any]:
    with PUBLISHED_CSV.open(encoding="utf-8", newline="") as fh:
        for r in csv.DictReader(fh):
            if all(r[k] == v for k, v in want.items()) and r["ttft_ms"] and r["tpot_ms"]:
                return dict(r)
    raise AssertionError(f"no shipped row {want}")


def test_attention_dp_and_ep_rows_are_fitted_as_their_layout() -> None:
    # DeepSeek-R1 on 8 B200s at tp 1 / dp 8 / ep 8 (aiconfigurator silicon data): one replica whose 8 attention
    # DP ranks share the experts, not 8 replicas; 64 DP ranks span nodes and are left out with the reason
    r1 = _shipped(model="deepseek-ai/DeepSeek-R1", engine="trtllm", tp="1", dp="8", ep="8", gpu_count="8")
    wide = _shipped(model="deepseek-ai/DeepSeek-R1", engine="trtllm", tp="1", dp="64", ep="8", gpu_count="64")
    ms = prepare([_copy(r1, "dp8"), _copy(wide, "dp64")], CATALOG, TABLES, CONSTANTS)
    assert ms.row_ids == ["dp8"] and np.isfinite(ms.y[0, 1:]).all()
    assert ms.cand.dp is not None
    assert (ms.cand.tp[0], ms.cand.dp[0], ms.cand.ep[0], ms.cand.replicas[0]) == (1.0, 8.0, 8.0, 1.0)
    if wide["gpu"] not in ("gb200", "gb300"):
        assert any("across nodes" in k for k in ms.skipped)


def test_modelopt_checkpoints_run_an_fp8_kv_cache(row: dict[str, Any]) -> None:
    fp8 = TABLES.kvdtype_ids.index("fp8")
    ms = prepare([_copy(row, "nv", orig_model="nvidia/Qwen3-32B-FP8", weight_dtype="fp8"),
                  _copy(row, "hf", orig_model="Qwen/Qwen3-32B-FP8", weight_dtype="fp8", ttft_ms="1.5")],
                 CATALOG, TABLES, CONSTANTS)
    assert ms.row_ids == ["hf", "nv"]
    assert ms.cand.kvdtype.tolist() == [TABLES.kvdtype_ids.index("auto"), fp8]
    # a stated KV dtype is kept as stated
    stated = prepare([_copy(row, "nv", orig_model="nvidia/Qwen3-32B-FP8", weight_dtype="fp8", kv_dtype="bf16")],
                     CATALOG, TABLES, CONSTANTS)
    assert stated.cand.kvdtype.tolist() == [TABLES.kvdtype_ids.index("bf16")]


def test_overloads_without_a_queue_are_left_out(row: dict[str, Any]) -> None:
    # 64 clients on a max batch of 8: each client waits ~7 whole requests unless the run held more than 8
    tpot_s = float(row["tpot_ms"]) / 1e3
    wait_ms = 7 * float(row["output_tokens"]) * tpot_s * 1e3
    fast = _copy(row, "fast", concurrency="64", max_batch="8")
    queued = _copy(row, "queued", concurrency="64", max_batch="8", ttft_ms=str(wait_ms))
    ms = prepare([fast, queued, _copy(row, "within", ttft_ms="1.5")], CATALOG, TABLES, CONSTANTS)
    assert ms.row_ids == ["queued", "within"] and ms.skipped == {UNQUEUED_OVERLOAD: 1}


def test_vllm_runs_past_the_context_window_are_left_out(row: dict[str, Any]) -> None:
    # Qwen3-32B's context window (config.json max_position_embeddings); vLLM ends a sequence there
    window = CATALOG.resolve_model(row["model"]).max_position_embeddings
    one = {**row, "concurrency": "1"}        # one sequence of a window's length fits in its KV cache
    vllm = {**one, "engine": "vllm", "engine_version": "0.19.0"}
    # (distinct latencies: rows repeating one another's TTFT and TPOT are duplicates)
    inside = _copy(vllm, "inside", input_tokens=str(window // 2), output_tokens=str(window // 2), ttft_ms="900")
    past = _copy(vllm, "past", input_tokens=str(window), output_tokens=str(window), ttft_ms="1900")
    trtllm = _copy(one, "trtllm", input_tokens=str(window), output_tokens=str(window), ttft_ms="1800")
    ms = prepare([inside, past, trtllm], CATALOG, TABLES, CONSTANTS)
    # TensorRT-LLM's engines are built for a stated max_seq_len: its row is kept
    assert ms.row_ids == ["inside", "trtllm"] and ms.skipped == {PAST_CONTEXT: 1}
    # the rule is the engine's catalog entry (costmodel.yaml), not its id: say TensorRT-LLM ends sequences there too
    engines = {**CONSTANTS.engines,
               "trtllm": CONSTANTS.engines["trtllm"].model_copy(update={"ends_sequences_at_context_window": True})}
    capped = prepare([inside, past, trtllm], CATALOG, TABLES, CONSTANTS.model_copy(update={"engines": engines}))
    assert capped.row_ids == ["inside"] and capped.skipped == {PAST_CONTEXT: 2}
