"""Row ids: the same measurement posted twice gets the same id; any change to the run, deployment or hint
changes it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from service.ingest.formats import (
    WorkloadHint,
)
from tests.ingest.formats.bench import DEPS, FILES, NO_HINT, PARSE, SOURCE, load


@pytest.mark.parametrize("tool", ["vllm", "gap", "trt"])
def test_row_id_is_deterministic(tool: str) -> None:
    parse, dep = PARSE[tool], DEPS[tool]
    first = parse(load(FILES[tool]), dep, NO_HINT, SOURCE)
    again = parse(load(FILES[tool]), dep, NO_HINT, SOURCE)
    assert first == again
    # the source text is provenance, not content: the same measurement keeps its id
    assert parse(load(FILES[tool]), dep, NO_HINT, "another label")[0]["row_id"] == first[0]["row_id"]
    changed = load(FILES[tool])
    key = {"vllm": "mean_ttft_ms", "gap": "time_to_first_token.avg", "trt": "streaming_metrics.avg_ttft_ms"}[tool]
    *parents, last = key.split(".")
    target = changed
    for p in parents:
        target = target[p]
    target[last] = target[last] * 1.01
    assert parse(changed, dep, NO_HINT, SOURCE)[0]["row_id"] != first[0]["row_id"]
    assert parse(load(FILES[tool]), replace(dep, gpu="h200-sxm"), NO_HINT, SOURCE)[0]["row_id"] != first[0]["row_id"]
    hint = WorkloadHint(concurrency=64) if tool == "trt" else WorkloadHint(output_tokens=999)
    assert parse(load(FILES[tool]), dep, hint, SOURCE)[0]["row_id"] != first[0]["row_id"]
