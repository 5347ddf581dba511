"""The candidate space: the lazily indexed layout table, the bound on the layout tables a worker keeps, and the
checks of the request's id lists."""

from __future__ import annotations

import itertools

import pytest
from fastapi.testclient import TestClient

from service.errors import InvalidRequest
from service.recommendation.space import LAYOUT_TABLES_KEPT, Layouts, check_list


def test_layouts_index_as_the_blocks_product() -> None:
    # the search's layout table is made lazily: index i must name the i-th of each block's weight dtype x
    # KV dtype x TP/PP product, blocks in order
    blocks = [("vllm", "0.11.0", "h100-sxm", ["bf16", "fp8"], ["auto", "fp8"],
               [(1, 1, 1), (2, 1, 1), (8, 2, 1), (1, 1, 8)]),
              ("trtllm", "1.0", "l4", ["int4-awq"], ["auto"], [(1, 1, 1)]),
              ("vllm", "0.11.0", "a10", ["bf16", "fp8", "int8-sq"], ["fp8"], [(1, 1, 1), (4, 1, 1)])]
    table = Layouts()
    want = []
    for e, v, g, wds, kvs, pairs in blocks:
        table.add(e, v, g, wds, kvs, pairs)
        want += [(e, v, g, w, k, t, p, d) for w, k, (t, p, d) in itertools.product(wds, kvs, pairs)]
    assert len(table) == len(want) and [table[i] for i in range(len(table))] == want
    with pytest.raises(IndexError):
        table[len(want)]


def test_id_lists_are_checked_deduplicated_and_default_to_all() -> None:
    known = {"a10": 1, "l4": 2, "h100-sxm": 3}
    assert check_list(None, known, "gpus") == ["a10", "l4", "h100-sxm"]
    assert check_list(["l4", "a10", "l4"], known, "gpus") == ["l4", "a10"]
    with pytest.raises(InvalidRequest) as err:
        check_list(["l4", "h100"], known, "gpus")
    assert err.value.field == ["constraints", "gpus", 1] and err.value.valid == ["a10", "h100-sxm", "l4"]


def test_layout_tables_kept_stay_bounded_over_many_distinct_requests(client: TestClient) -> None:
    # the tables are kept by request content (allowed GPUs, GPU count, ...): more distinct requests than the bound
    # must not keep more tables than the bound
    gpus = ["a10", "l4", "l40s", "a100-80gb-sxm"]
    subsets = [list(c) for n in range(1, len(gpus) + 1) for c in itertools.combinations(gpus, n)]
    asked = list(itertools.product(subsets, (1, 2, 4, 8, 16)))[: LAYOUT_TABLES_KEPT + 6]
    assert len(asked) > LAYOUT_TABLES_KEPT
    state = client.app.state.app_state  # type: ignore[attr-defined]
    sizes = []
    for allowed, max_gpus in asked:
        r = client.post("/v1/recommendations", json={
            "model": "meta-llama/Llama-3.1-8B-Instruct", "workload": {"input_tokens": 256, "output_tokens": 64,
                                                                      "concurrency": 2},
            "constraints": {"gpus": allowed, "max_gpus": max_gpus}})
        assert r.status_code == 200, r.text
        sizes.append(len(state.current().recommender.layouts.held[1]))
    assert max(sizes) <= LAYOUT_TABLES_KEPT
    assert max(sizes) > 1                  # tables were kept at all
