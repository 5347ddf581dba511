"""Parsers of benchmark tools' result files into measurement rows (the columns of ``MeasurementRow``).

A tool's file does not record the whole deployment (GPU, layout, dtypes, engine), so the caller sends a
``DeploymentInfo`` with it, and a ``WorkloadHint`` for workload facts the file lacks. A hint only fills what the
file does not state: a concurrency or request rate that contradicts the file is an error, while token counts
measured by the tool always win over the hinted (configured) ones.

Every rejected input raises ``FormatError`` whose ``field`` is a dotted path into the posted body: the tool's file
under ``result`` (``result.mean_ttft_ms``, ``result.2.completed`` for the third run of a multi-run file), the
deployment under ``deployment`` and the hint under ``hint``.

Formats, one parser module each, named by the format (each verified against the tool's source; see
tests/fixtures/bench/README.md): ``vllm_bench_serve`` (``vllm bench serve --save-result``), ``genai_perf``
(``genai-perf profile``) and ``trtllm_bench`` (``trtllm-bench ... throughput --report_json``).

Rows are ``quality`` "good", ``source_id`` "user", and ``row_id`` "user-" + the first 16 hex digits of the SHA-256
of the canonical JSON of (format, the run, the deployment, the hint): the same measurement posted twice gets the same
id whatever ``source`` text comes with it. Statistics the row cannot hold (medians, percentiles, std) are kept in
``notes``, a JSON object that also names the tool and format.

What the parsers share: ``checks.py`` (the posted deployment and hint, ``FormatError``, value checks) and
``rows.py`` (row assembly).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from service.ingest.formats.checks import DeploymentInfo, FormatError, WorkloadHint
from service.ingest.formats.genai_perf import parse_genai_perf
from service.ingest.formats.trtllm_bench import parse_trtllm_bench
from service.ingest.formats.vllm_bench_serve import parse_vllm_bench_serve

Parser = Callable[..., list[dict[str, Any]]]

PARSERS: dict[str, Parser] = {
    "vllm_bench_serve": parse_vllm_bench_serve,
    "genai_perf": parse_genai_perf,
    "trtllm_bench": parse_trtllm_bench,
}

__all__ = ["PARSERS", "DeploymentInfo", "FormatError", "Parser", "WorkloadHint", "parse_genai_perf",
           "parse_trtllm_bench", "parse_vllm_bench_serve"]
