"""The format registry: one parser per tool, importable from service.ingest.formats."""

from __future__ import annotations

from service.ingest.formats import (
    PARSERS,
    parse_genai_perf,
    parse_trtllm_bench,
    parse_vllm_bench_serve,
)


def test_parsers_registry() -> None:
    assert set(PARSERS) == {"vllm_bench_serve", "genai_perf", "trtllm_bench"}
    assert PARSERS["vllm_bench_serve"] is parse_vllm_bench_serve
    assert PARSERS["genai_perf"] is parse_genai_perf
    assert PARSERS["trtllm_bench"] is parse_trtllm_bench
