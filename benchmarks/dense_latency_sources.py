"""Rebuild gpu_catalog/data/benchmarks/dense_latency.csv from the public sources it was copied from.

Each source below reads one fetched public repository snapshot (a bare git directory, read with ``git show``
at the pinned commit named in SOURCES.md) and returns rows in the columns of published.csv. Numbers are copied
as the source prints them (only exact s -> ms scaling); nothing is estimated. Rows whose configuration is partly
inferred are ``quality=weak`` with the reasons first in ``notes``. Rows whose TTFT and TPOT equal a row already
in published.csv are dropped (the same run published twice).

    python benchmarks/dense_latency_sources.py --mirror /work/.mirror            # rewrite the CSV
    python benchmarks/dense_latency_sources.py --mirror /work/.mirror --check    # compare with the CSV
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from gpu_catalog.loader import DENSE_LATENCY_CSV, PUBLISHED_CSV, load_catalog, parse_measurement_rows
from gpu_catalog.schema import MEASUREMENT_COLUMNS

Row = dict[str, str]


def git_show(git_dir: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def _num(text: str) -> str:
    """A number as printed, without thousands separators."""
    return text.replace(",", "").strip()


def _positive(text: str) -> str:
    """The value, or empty where the source printed 0 (a rounded rate: the schema stores only positive rates)."""
    return text if text and float(text) > 0 else ""


# ---------------------------------------------------------------------------------------------------------------
# vllm bench serve / benchmark_serving.py console summaries ("============ Serving Benchmark Result ============")

_SUMMARY_FIELDS = {
    "Successful requests": "requests",
    "Maximum request concurrency": "concurrency",
    "Request rate configured (RPS)": "rate",
    "Benchmark duration (s)": "duration_s",
    "Total input tokens": "input_total",
    "Total generated tokens": "output_total",
    "Request throughput (req/s)": "requests_per_s",
    "Output token throughput (tok/s)": "output_tok_s",
    "Total Token throughput (tok/s)": "total_tok_s",
    "Total token throughput (tok/s)": "total_tok_s",
    "Mean TTFT (ms)": "ttft_mean",
    "Median TTFT (ms)": "ttft_median",
    "P99 TTFT (ms)": "ttft_p99",
    "Mean TPOT (ms)": "tpot_mean",
    "Median TPOT (ms)": "tpot_median",
    "Mean ITL (ms)": "itl_mean",
    "Median ITL (ms)": "itl_median",
    "Mean E2EL (ms)": "e2e_mean",
}


def parse_summary(lines: list[str]) -> dict[str, str]:
    """The fields of one console summary (the lines between its header and its closing rule)."""
    out: dict[str, str] = {}
    for line in lines:
        key, sep, value = line.strip().partition(":")
        if sep and key.strip() in _SUMMARY_FIELDS and value.strip():
            out[_SUMMARY_FIELDS[key.strip()]] = _num(value)
    return out


def split_summaries(block: list[str]) -> Iterator[tuple[str, dict[str, str]]]:
    """(label, fields) for each summary in a code block; the label is the last ``# ...`` comment before it."""
    label = ""
    current: list[str] | None = None
    for line in block:
        s = line.strip()
        if "Serving Benchmark Result" in s:
            current = []
        elif current is not None and s.startswith("=====") and current:
            yield label, parse_summary(current)
            current = None
        elif current is not None:
            current.append(s)
        elif s.startswith("#"):
            label = s.lstrip("#").strip()


# ---------------------------------------------------------------------------------------------------------------
# GPUStack performance lab (docs/performance-lab/<model>/<gpu>.md): vllm bench serve runs of vLLM, SGLang and
# TensorRT-LLM on one GPU. Throughput docs: ShareGPT 1000 prompts and random datasets sent all at once (offline);
# latency doc: ShareGPT 100 prompts at --max-concurrency 1-8.

GPUSTACK_COMMIT = "47277d79f4a5bae12a2d25e9ecbed2a2177a5f2d"
GPUSTACK_DOCS = {  # doc path -> (catalog gpu, weak reason or "")
    "docs/performance-lab/qwen3-8b/h100-latency.md": ("h100-sxm", ""),
    "docs/performance-lab/qwen3-14b/a100.md": ("a100-80gb-sxm", "A100 memory size not stated (80 GB assumed)"),
    "docs/performance-lab/qwen3-14b/h100.md": ("h100-sxm", ""),
    "docs/performance-lab/qwen3-32b/a100.md": ("a100-80gb-sxm", ""),
    "docs/performance-lab/qwen3-32b/h100.md": ("h100-sxm", ""),
}
# The random-dataset cases as each throughput doc's "Benchmark Dataset" section defines them (input, output).
GPUSTACK_RANDOM = {"random 32K input": (32000, 100), "random 4K input": (4000, 200),
                   "random 2K input": (2000, 100), "random 128 input": (128, 4)}
# Total ShareGPT input tokens of the runs (Qwen3 tokenizer): 1000 prompts, and the latency doc's 100 prompts.
GPUSTACK_SHAREGPT_INPUT = {"217393", "23260"}
_GPUSTACK_VERSION = re.compile(r"^- (vLLM|SGLang|TensorRT-LLM): v?(\S+)")
_ENGINES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}


@dataclass
class Serve:
    """A serving command of a doc: engine, model repo and the flags beyond the model."""

    engine: str
    model: str
    flags: str


def parse_serve(cmd: str) -> Serve | None:
    words = cmd.replace("\\", " ").split()
    if words[:2] == ["vllm", "serve"]:
        engine, model, rest = "vllm", words[2], words[3:]
    elif "sglang.launch_server" in words:
        i = next(i for i, w in enumerate(words) if w in ("--model-path", "--model"))
        start = words.index("sglang.launch_server")
        engine, model = "sglang", words[i + 1]
        rest = [w for j, w in enumerate(words) if j > start and j not in (i, i + 1)]
    elif words[:1] == ["trtllm-serve"]:
        engine, model, rest = "trtllm", words[1], words[2:]
    else:
        return None
    return Serve(engine, model, " ".join(rest))


def _code_blocks(text: str) -> Iterator[tuple[str, str, list[str]]]:
    """(section heading, the '??? info' title, code lines) for each collapsible code block of a GPUStack doc."""
    heading, title, lines, inside = "", "", [], False
    for line in text.splitlines():
        if line.startswith("#") and not inside:
            heading = line.lstrip("#").strip()
        elif line.startswith("??? info"):
            title = line.split('"')[1] if '"' in line else line
        elif line.strip().startswith("```"):
            if inside:
                yield heading, title, lines
                lines, inside = [], False
            else:
                inside = True
        elif inside:
            lines.append(line)


def gpustack_rows(git_dir: Path) -> list[Row]:
    rows: list[Row] = []
    for path, (gpu, gpu_weak) in GPUSTACK_DOCS.items():
        text = git_show(git_dir, GPUSTACK_COMMIT, path)
        lines = text.splitlines()
        matches = (_GPUSTACK_VERSION.match(line) for line in lines)
        versions = dict(m.groups() for m in matches if m)
        doc_model = lines[lines.index("### Model") + 2].strip().split("/")[-1]
        hardware = lines[lines.index("### Hardware") + 2].strip()
        serve: Serve | None = None
        for heading, title, block in _code_blocks(text):
            if "serving script" in title.lower():
                serve = parse_serve(" ".join(block))
                continue
            if "benchmark result" not in title.lower() or serve is None:
                continue
            for label, f in split_summaries(block):
                if re.sub(r"-(FP8|AWQ)$", "", serve.model).split("/")[-1] != doc_model:
                    continue  # a serving script naming another model than the doc's (a copy-paste slip)
                row = _gpustack_row(path, heading, serve, label, f, gpu, gpu_weak, versions)
                if row:
                    row["orig_gpu"] = hardware
                    rows.append(row)
    return rows


def _gpustack_row(path: str, heading: str, serve: Serve, label: str, f: dict[str, str], gpu: str, gpu_weak: str,
                  versions: dict[str, str]) -> Row | None:
    if "speculative" in f"{serve.flags} {label}" or "ttft_mean" not in f:
        return None  # speculative decoding is outside what the cost model represents
    weak = [gpu_weak] if gpu_weak else []
    named = [e for e in _ENGINES.values() if e in heading]
    if named and _ENGINES[serve.engine] not in named:
        weak.append(f"section '{heading}' names {', '.join(named)} but its serving script is "
                    f"{_ENGINES[serve.engine]}'s (engine taken from the script)")
    norm = []
    n = int(f["requests"])
    if label in GPUSTACK_RANDOM:
        isl, osl = GPUSTACK_RANDOM[label]
        norm.append(f"random dataset --random-input-len {isl} --random-output-len {osl}; published totals "
                    f"{f['input_total']} input / {f['output_total']} generated tokens over {n} requests")
        if int(f["output_total"]) < 0.98 * n * osl:
            weak.append(f"requests stopped early: {f['output_total']} of {n * osl} output tokens generated")
        lengths = (str(isl), str(osl))
    elif f["input_total"] in GPUSTACK_SHAREGPT_INPUT:
        norm.append(f"input_tokens: ShareGPT ({f['input_total']} tokens / {n} req); output_tokens: ShareGPT "
                    f"({f['output_total']} tokens / {n} req)")
        lengths = ("", "")
    else:
        return None
    model = serve.model
    dtype = "fp8" if model.endswith("-FP8") else "int4-awq" if model.endswith("-AWQ") else "bf16"
    base = re.sub(r"-(FP8|AWQ)$", "", model)
    flags = serve.flags or "none (engine defaults)"
    if label and label not in GPUSTACK_RANDOM and not label.startswith("BS="):
        flags = f"{flags}; result labelled '{label}'"
    if "concurrency" in f:
        mode, conc = "concurrency", f["concurrency"]
        norm.append(f"closed loop: {n} requests at max concurrency {conc}")
    else:
        mode, conc = "offline", ""
        norm.append(f"all-at-once ({n} prompts, request rate inf)")
    notes = ([f"[weak: {'; '.join(weak)}]"] if weak else []) + [f"[norm: {'; '.join(norm)}]"] + [
        f"[source notes: section '{heading}'; serving script flags: {flags}; "
        f"median TTFT {f.get('ttft_median', '-')} ms, median TPOT {f.get('tpot_median', '-')} ms; "
        f"duration {f.get('duration_s', '-')} s; vllm bench serve]"]
    engine_label = _ENGINES[serve.engine]
    return {
        "quality": "weak" if weak else "good", "source_id": "gpustack_performance_lab",
        "source": f"github gpustack/gpustack {path} @{GPUSTACK_COMMIT[:10]}",
        "engine": serve.engine, "engine_version": versions.get(engine_label, ""), "gpu": gpu, "gpu_count": "1",
        "model": base, "model_family": base.split("/")[1].lower(), "weight_dtype": dtype, "kv_dtype": "auto",
        "tp": "1", "pp": "1", "dp": "1", "mode": mode, "input_tokens": lengths[0], "output_tokens": lengths[1],
        "concurrency": conc, "output_tok_s": f["output_tok_s"], "total_tok_s": f["total_tok_s"],
        "requests_per_s": f["requests_per_s"], "ttft_ms": f["ttft_mean"], "ttft_stat": "mean",
        "tpot_ms": f["tpot_mean"], "tpot_stat": "mean", "itl_ms": f.get("itl_mean", ""),
        "itl_stat": "mean" if f.get("itl_mean") else "", "orig_gpu": "",
        "orig_model": model, "orig_engine": engine_label, "notes": " ".join(notes),
    }


# ---------------------------------------------------------------------------------------------------------------
# TensorRT-LLM docs/source/performance.md, releases 0.8.0 and 0.9.0: the "Low Latency" tables (batch size 1,
# gptSessionBenchmark, "benchmark with a single output token in order to find the time to first token latency";
# FP8 weights and FP8 KV cache on H200/H100/L40S, FP16 on A100). Read through the search index (file-version ids
# below); the table rows are transcribed here as published: (table GPU, model label, TP, input length, ms).

TRTLLM_PERF_MD = {
    "0.8.0": ("5675739753", [
        ("H200", "GPT-J 6B", 1, 2048, "23.6"),
        ("H200", "Mistral 7B", 1, 128, "6.0"), ("H200", "Mistral 7B", 1, 2048, "31.8"),
        ("H200", "LLaMA 7B", 1, 128, "5.8"), ("H200", "LLaMA 7B", 1, 2048, "30.1"),
        ("H200", "LLaMA 70B", 8, 128, "16.0"), ("H200", "LLaMA 70B", 8, 2048, "78.8"),
        ("H200", "Falcon 180B", 8, 128, "37.2"), ("H200", "Falcon 180B", 8, 2048, "120.8"),
        ("H100", "GPT-J 6B", 1, 128, "5.7"), ("H100", "GPT-J 6B", 1, 2048, "23.8"),
        ("H100", "Mistral 7B", 1, 128, "6.6"), ("H100", "Mistral 7B", 1, 2048, "32.6"),
        ("H100", "LLaMA 7B", 1, 128, "6.4"), ("H100", "LLaMA 7B", 1, 2048, "31.0"),
        ("H100", "LLaMA 70B", 8, 128, "17.0"), ("H100", "LLaMA 70B", 8, 2048, "84.4"),
        ("H100", "Falcon 180B", 8, 128, "39.7"), ("H100", "Falcon 180B", 8, 2048, "128.0"),
        ("L40S", "GPT-J 6B", 1, 128, "12.6"), ("L40S", "GPT-J 6B", 1, 2048, "61.2"),
        ("L40S", "Mistral 7B", 1, 128, "15.5"), ("L40S", "Mistral 7B", 1, 2048, "84.3"),
        ("L40S", "LLaMA 7B", 1, 128, "14.3"), ("L40S", "LLaMA 7B", 1, 2048, "79.0"),
        ("L40S", "LLaMA 70B", 8, 128, "70.9"), ("L40S", "LLaMA 70B", 8, 2048, "708.7"),
        ("L40S", "Falcon 180B", 8, 128, "93.4"), ("L40S", "Falcon 180B", 8, 2048, "769.8"),
        ("A100", "GPT-J 6B", 1, 128, "14.1"), ("A100", "GPT-J 6B", 1, 2048, "102.8"),
        ("A100", "Mistral 7B", 1, 128, "16.4"), ("A100", "Mistral 7B", 1, 2048, "128.7"),
        ("A100", "LLaMA 7B", 1, 128, "16.1"), ("A100", "LLaMA 7B", 1, 2048, "120.5"),
        ("A100", "LLaMA 70B", 8, 128, "35.6"), ("A100", "LLaMA 70B", 8, 2048, "235.1"),
        ("A100", "Falcon 180B", 8, 128, "76.5"), ("A100", "Falcon 180B", 8, 2048, "463.0"),
    ]),
    "0.9.0": ("5995251461", [
        ("H200", "GPT-J 6B", 1, 128, "5.0"), ("H200", "GPT-J 6B", 1, 2048, "23.5"),
        ("H200", "Mistral 7B", 1, 128, "5.9"), ("H200", "Mistral 7B", 1, 2048, "31.7"),
        ("H200", "LLaMA 7B", 1, 128, "5.7"), ("H200", "LLaMA 7B", 1, 2048, "30.2"),
        ("H200", "LLaMA 70B", 4, 128, "17.8"), ("H200", "LLaMA 70B", 4, 2048, "103.0"),
        ("H200", "Falcon 180B", 4, 128, "36.4"), ("H200", "Falcon 180B", 4, 2048, "194.4"),
        ("H100", "GPT-J 6B", 1, 128, "5.5"), ("H100", "GPT-J 6B", 1, 2048, "23.8"),
        ("H100", "Mistral 7B", 1, 128, "6.5"), ("H100", "Mistral 7B", 1, 2048, "32.4"),
        ("H100", "LLaMA 7B", 1, 128, "6.3"), ("H100", "LLaMA 7B", 1, 2048, "30.8"),
        ("H100", "LLaMA 70B", 4, 128, "19.6"), ("H100", "LLaMA 70B", 8, 2048, "85.1"),
        ("H100", "Falcon 180B", 4, 128, "41.1"), ("H100", "Falcon 180B", 8, 2048, "129.9"),
        ("L40S", "GPT-J 6B", 1, 128, "12.4"), ("L40S", "GPT-J 6B", 1, 2048, "61.7"),
        ("L40S", "Mistral 7B", 1, 128, "15.4"), ("L40S", "Mistral 7B", 1, 2048, "87.3"),
        ("L40S", "LLaMA 7B", 1, 128, "14.1"), ("L40S", "LLaMA 7B", 1, 2048, "80.1"),
        ("L40S", "LLaMA 70B", 8, 128, "70.4"), ("L40S", "LLaMA 70B", 4, 2048, "673.3"),
        ("L40S", "Falcon 180B", 8, 128, "91.0"), ("L40S", "Falcon 180B", 8, 2048, "768.8"),
        ("A100", "GPT-J 6B", 1, 128, "14.8"), ("A100", "GPT-J 6B", 1, 2048, "136.4"),
        ("A100", "Mistral 7B", 1, 128, "16.3"), ("A100", "Mistral 7B", 1, 2048, "139.6"),
        ("A100", "LLaMA 7B", 1, 128, "16.2"), ("A100", "LLaMA 7B", 1, 2048, "132.4"),
        ("A100", "LLaMA 70B", 4, 128, "45.6"), ("A100", "LLaMA 70B", 8, 2048, "249.2"),
        ("A100", "Falcon 180B", 8, 128, "76.5"), ("A100", "Falcon 180B", 8, 2048, "456.0"),
    ]),
}
# The doc's model labels -> catalog ids; its build sections name the checkpoints Llama2-7b and Llama2-70b.
_TRTLLM_MODELS = {"GPT-J 6B": "EleutherAI/gpt-j-6b", "LLaMA 7B": "meta-llama/Llama-2-7b-hf",
                  "LLaMA 70B": "meta-llama/Llama-2-70b-hf", "Falcon 180B": "tiiuae/falcon-180B",
                  "Mistral 7B": "mistralai/Mistral-7B-v0.1"}
_TRTLLM_GPUS = {"H200": "h200-sxm", "H100": "h100-sxm", "L40S": "l40s", "A100": "a100-80gb-sxm"}


def trtllm_perf_md_rows(_: Path) -> list[Row]:
    rows: list[Row] = []
    for version, (file_id, table) in TRTLLM_PERF_MD.items():
        for gpu_label, label, tp, isl, ttft in table:
            weak = []
            if label == "Mistral 7B":
                weak.append("the doc names 'Mistral 7B' without a version (v0.1, current at the release, assumed)")
            if gpu_label == "A100":
                weak.append("A100 memory size and form factor not stated (80 GB SXM assumed)")
            fp8 = gpu_label != "A100"
            rows.append({
                "quality": "weak" if weak else "good", "source_id": f"trtllm_performance_md_v{version}_low_latency",
                "source": f"NVIDIA/TensorRT-LLM docs/source/performance.md, release {version} ('All data was generated "
                          f"using version {version}'), indexed file-version id {file_id}, 'Low Latency' tables",
                "engine": "trtllm", "engine_version": version, "gpu": _TRTLLM_GPUS[gpu_label], "gpu_count": str(tp),
                "model": _TRTLLM_MODELS[label], "model_family": _TRTLLM_MODELS[label].split("/")[1].lower(),
                "weight_dtype": "fp8" if fp8 else "fp16", "kv_dtype": "fp8" if fp8 else "fp16",
                "tp": str(tp), "pp": "1", "dp": "1", "mode": "static_batch", "input_tokens": str(isl),
                "output_tokens": "1", "concurrency": "1", "ttft_ms": ttft, "ttft_stat": "single",
                "orig_gpu": f"{gpu_label} GPUs ({'FP8' if fp8 else 'FP16'})", "orig_model": label,
                "orig_engine": "TensorRT-LLM (gptSessionBenchmark)",
                "notes": (f"[weak: {'; '.join(weak)}] " if weak else "") +
                         "[norm: output_tokens 1: the doc measures first-token latency by benchmarking 'with a single "
                         "output token'; batch size 1] [source notes: 'Low Latency' table, '1st Token Latency (ms)'; "
                         "FP8 rows use quant_algo FP8 with kv_cache_quant_algo FP8; engines built per the doc's "
                         "trtllm-build commands]",
            })
    return rows

# ---------------------------------------------------------------------------------------------------------------
# Lambda's vLLM report (LambdaLabsML/vllm-benchmark benchmark_v0.md): the TP-scaling table, "throughput/latency"
# per model and system at --num-prompts 320, request rate inf, vLLM v0.5.4; the metrics it monitors are output token
# throughput and inter-token latency. Read through the search index; cells transcribed as published
# (system, model column, cell). Mixtral (MoE) and Mistral-Large (not in the catalog) columns are left out.

LAMBDA_COMMIT = "0e8fc5d0f9865a326666cb82aeb2d8dc74c82c5e"
LAMBDA_TABLE = [
    ("1xA100-80GB-SXM", "Meta-Llama-3.1-8B-FP8", "1517.54/42.85"),
    ("1xA100-80GB-SXM", "Meta-Llama-3.1-70B-Instruct-FP8", "208.79/58.26"),
    ("1xA100-80GB-SXM", "Mistral-7B-Instruct-v0.3", "1591.4/56.51"),
    ("1xA100-80GB-SXM", "Mistral-Nemo-Instruct-2407", "1277.85/61.48"),
    ("2xA100-80GB-SXM", "Meta-Llama-3.1-8B-FP8", "1854.27/38.21"),
    ("2xA100-80GB-SXM", "Meta-Llama-3.1-70B-Instruct-FP8", "662.64/120.32"),
    ("2xA100-80GB-SXM", "Mistral-7B-Instruct-v0.3", "1861.61/53.52"),
    ("2xA100-80GB-SXM", "Mistral-Nemo-Instruct-2407", "1593.97/51.39"),
    ("4xA100-80GB-SXM", "Meta-Llama-3.1-8B-FP8", "1899.76/40.02"),
    ("4xA100-80GB-SXM", "Meta-Llama-3.1-70B-Instruct-FP8", "956.53/88.25"),
    ("4xA100-80GB-SXM", "Mistral-7B-Instruct-v0.3", "2228.35/44.66"),
    ("4xA100-80GB-SXM", "Mistral-Nemo-Instruct-2407", "1919.13/44.7"),
    ("8xA100-80GB-SXM", "Meta-Llama-3.1-8B-FP8", "1972.26/40.47"),
    ("8xA100-80GB-SXM", "Meta-Llama-3.1-70B-Instruct-FP8", "1162.78/74.12"),
    ("8xA100-80GB-SXM", "Hermes-3-Llama-3.1-405B-FP8", "467.85/180.74"),
    ("8xA100-80GB-SXM", "Mistral-7B-Instruct-v0.3", "2381.43/39.89"),
    ("8xA100-80GB-SXM", "Mistral-Nemo-Instruct-2407", "2035.34/40.7"),
    ("1xH100-80GB-SXM", "Meta-Llama-3.1-8B-FP8", "3400.4/19.75"),
    ("1xH100-80GB-SXM", "Meta-Llama-3.1-70B-Instruct-FP8", "418.92/35.84"),
    ("1xH100-80GB-SXM", "Mistral-7B-Instruct-v0.3", "3281.19/27.23"),
    ("1xH100-80GB-SXM", "Mistral-Nemo-Instruct-2407", "2414.81/31.16"),
    ("2xH100-80GB-SXM", "Meta-Llama-3.1-8B-FP8", "3688.64/18.83"),
    ("2xH100-80GB-SXM", "Meta-Llama-3.1-70B-Instruct-FP8", "1727.69/49.33"),
    ("2xH100-80GB-SXM", "Mistral-7B-Instruct-v0.3", "3758.54/24.26"),
    ("2xH100-80GB-SXM", "Mistral-Nemo-Instruct-2407", "3064.06/24.44"),
    ("4xH100-80GB-SXM", "Meta-Llama-3.1-8B-FP8", "3475.27/20.26"),
    ("4xH100-80GB-SXM", "Meta-Llama-3.1-70B-Instruct-FP8", "2242.99/38.26"),
    ("4xH100-80GB-SXM", "Mistral-7B-Instruct-v0.3", "4133.32/21.79"),
    ("4xH100-80GB-SXM", "Mistral-Nemo-Instruct-2407", "3509.24/22.1"),
    ("8xH100-80GB-SXM", "Meta-Llama-3.1-8B-FP8", "3931.83/17.61"),
    ("8xH100-80GB-SXM", "Meta-Llama-3.1-70B-Instruct-FP8", "2572.8/33.71"),
    ("8xH100-80GB-SXM", "Hermes-3-Llama-3.1-405B-FP8", "1230.74/73.54"),
    ("8xH100-80GB-SXM", "Mistral-7B-Instruct-v0.3", "4397.11/21.56"),
    ("8xH100-80GB-SXM", "Mistral-Nemo-Instruct-2407", "3686.29/22.85"),
]
_LAMBDA_MODELS = {  # column -> (catalog model, weight dtype)
    "Meta-Llama-3.1-8B-FP8": ("meta-llama/Llama-3.1-8B", "fp8"),
    "Meta-Llama-3.1-70B-Instruct-FP8": ("meta-llama/Llama-3.1-70B-Instruct", "fp8"),
    "Hermes-3-Llama-3.1-405B-FP8": ("meta-llama/Llama-3.1-405B", "fp8"),
    "Mistral-7B-Instruct-v0.3": ("mistralai/Mistral-7B-Instruct-v0.3", "bf16"),
    "Mistral-Nemo-Instruct-2407": ("mistralai/Mistral-Nemo-Instruct-2407", "bf16"),
}


def lambda_rows(_: Path) -> list[Row]:
    rows: list[Row] = []
    for system, column, cell in LAMBDA_TABLE:
        n = int(system.split("x")[0])
        gpu = "a100-80gb-sxm" if "A100" in system else "h100-sxm"
        model, dtype = _LAMBDA_MODELS[column]
        thr, itl = cell.split("/")
        weak = [f"tensor parallelism over all {n} GPUs inferred from the text ('overly tensor parallelized "
                "systems')" if n > 1 else "", "latency statistic not stated (the report monitors inter-token "
                "latency)", "dataset not named in the report (the repository's runs use ShareGPT prompts)"]
        if dtype == "bf16":
            weak.append("dtype not stated (vLLM default: the checkpoint's bfloat16)")
        if dtype == "fp8" and gpu.startswith("a100"):
            weak.append("FP8 checkpoint on A100 (vLLM runs it weight-only)")
        rows.append({
            "quality": "weak", "source_id": "lambda_vllm_benchmark_report",
            "source": f"github LambdaLabsML/vllm-benchmark benchmark_v0.md @{LAMBDA_COMMIT[:10]} "
                      "(tensor-parallel scaling table)",
            "engine": "vllm", "engine_version": "0.5.4", "gpu": gpu, "gpu_count": str(n), "model": model,
            "model_family": model.split("/")[1].lower(), "weight_dtype": dtype, "tp": str(n), "pp": "1",
            "dp": "1", "mode": "offline", "output_tok_s": thr, "itl_ms": itl,
            "itl_stat": "not stated (mean or median)", "orig_gpu": system, "orig_model": column,
            "orig_engine": "vLLM", "notes": f"[weak: {'; '.join(w for w in weak if w)}] [norm: all-at-once (320 "
            "prompts, request rate inf); cell published as 'throughput/latency' = output tokens/s / ms] "
            "[source notes: benchmark_serving.py; --num-prompts fixed at 320 'to ensure a large batch size']",
        })
    return rows

# ---------------------------------------------------------------------------------------------------------------
# dstack's vLLM serving benchmarks of Llama-3.1-405B FP8 (github dstackai/benchmarks): benchmark_serving.py on
# ShareGPT, 1000 prompts at request rates 16, 32 and 1000, as CSV summaries of the raw result JSONs:
# comparison/h100sxm5_vs_mi300x/csv_data/qps_comparison.csv (8x H100 SXM5 vs 8x/4x MI300X) and
# nvidia/8xh100/charts/qps_output.csv (8x H100 SXM5 across vLLM scheduler settings).

DSTACK_COMMIT = "06c957ab51572ca18db9c1f4bb254a9eb86df4d7"
DSTACK_QPS_FILES = ("comparison/h100sxm5_vs_mi300x/csv_data/qps_comparison.csv", "nvidia/8xh100/charts/qps_output.csv")
# The comparison's system labels: (gpu, gpu count, tp, dp, checkpoint, kv dtype, engine version, weak reason)
_H100_VLLM = "nightly wheel vllm-1.0.0.dev (Nov 2024)"
_ROCM_VLLM = "ghcr.io/embeddedllm/vllm-rocm:cb3b2b9"
DSTACK_SYSTEMS = {
    "8xH100 1FP8-meta": ("h100-sxm", 8, 8, 1, "meta-llama/Llama-3.1-405B-FP8", "auto", _H100_VLLM, ""),
    "8xMi300x 1FP8-meta": ("mi300x", 8, 8, 1, "meta-llama/Llama-3.1-405B-FP8", "auto", _ROCM_VLLM, ""),
    "8xMi300x 1FP8-amd": ("mi300x", 8, 8, 1, "amd/Llama-3.1-405B-Instruct-FP8-KV", "fp8", _ROCM_VLLM, ""),
    "4xMi300x 1FP8-amd": ("mi300x", 4, 4, 1, "amd/Llama-3.1-405B-Instruct-FP8-KV", "fp8", _ROCM_VLLM,
                          "tensor parallelism over the 4 GPUs inferred from the run name '1fp8-4-gpu'"),
    "8xMi300x 2FP8-amd": ("mi300x", 8, 4, 2, "amd/Llama-3.1-405B-Instruct-FP8-KV", "fp8", _ROCM_VLLM,
                          "two 4-GPU instances inferred from the label '2FP8' and the note that the 8x MI300X "
                          "'2fp8' throughput aggregates the 4x MI300X data"),
}


def dstack_qps_rows(git_dir: Path) -> list[Row]:
    rows: list[Row] = []
    for path in DSTACK_QPS_FILES:
        text = git_show(git_dir, DSTACK_COMMIT, path).lstrip("\ufeff")
        for r in csv.DictReader(text.splitlines()):
            label = " ".join(r.get("gpu", "8xH100 1FP8-meta").split())
            gpu, n, tp, dp, ckpt, kv, version, weak = DSTACK_SYSTEMS[label]
            config = {k: r[k] for k in ("num-scheduler-step", "enable-chunked-prefill", "max-num-batched-tokens",
                                        "max-num-seqs", "max-seq-len-to-capture", "enable-prefix-caching")}
            rate = r["request_rate"]
            burst = "; 1000 req/s is effectively all at once" if rate == "1000" else ""
            settings = ", ".join(f"{k}={v}" for k, v in config.items())
            rows.append({
                "quality": "weak" if weak else "good", "source_id": "dstack_llama405b_serving",
                "source": f"github dstackai/benchmarks {path} @{DSTACK_COMMIT[:10]}", "engine": "vllm",
                "engine_version": version, "gpu": gpu, "gpu_count": str(n), "model": "meta-llama/Llama-3.1-405B",
                "weight_dtype": "fp8", "kv_dtype": kv, "tp": str(tp), "pp": "1", "dp": str(dp),
                "mode": "request_rate", "request_rate": rate,
                "max_batch": config["max-num-seqs"] if config["max-num-seqs"].isdigit() else "",
                "output_tok_s": r["output_throughput"], "total_tok_s": r["total_token_throughput"],
                "requests_per_s": r["request_throughput"], "ttft_ms": r["mean_ttft_ms"], "ttft_stat": "mean",
                "tpot_ms": r["mean_tpot_ms"], "tpot_stat": "mean", "itl_ms": r["mean_itl_ms"], "itl_stat": "mean",
                "orig_gpu": label, "orig_model": ckpt, "orig_engine": "vLLM",
                "notes": (f"[weak: {weak}] " if weak else "") +
                f"[norm: input_tokens: ShareGPT ({r['total_input_tokens']} tokens / {r['completed']} req); "
                f"output_tokens: ShareGPT ({r['total_output_tokens']} tokens / {r['completed']} req); open loop at "
                f"{rate} req/s ({r['num_prompts']} prompts{burst})] [source notes: benchmark_serving.py; server "
                f"settings {settings}; median TTFT {r['median_ttft_ms']} ms, median TPOT {r['median_tpot_ms']} ms; "
                f"duration {r['duration']} s]",
            })
    return rows

# dstack's TGI-vs-vLLM study on 8x MI300X (amd/tgi_vs_vllm): vLLM 0.6.3.dev116+g151ef4ef serving
# meta-llama/Llama-3.1-405B-Instruct with --tensor-parallel-size=8; benchmark_serving.py on the sonnet dataset with
# --num-prompt = batch size (no request rate: all at once). The README fixes the prompts at 80 tokens (short) and
# 10000 tokens (long) and runs single prompts of 16000 to 128000 tokens; the output length is not stated.
DSTACK_VLLM_FILES = {  # file -> input tokens per prompt (None: per row, from the README's single-prompt list)
    "amd/tgi_vs_vllm/vllm/data/result_vllm_short.csv": 80,
    "amd/tgi_vs_vllm/vllm/data/result_vllm_long.csv": 10000,
    "amd/tgi_vs_vllm/vllm/data/result_vllm_single_prompt.csv": None,
}


def dstack_tgi_vs_vllm_rows(git_dir: Path) -> list[Row]:
    rows: list[Row] = []
    for path, isl in DSTACK_VLLM_FILES.items():
        for r in csv.DictReader(git_show(git_dir, DSTACK_COMMIT, path).splitlines()):
            n = r["Successful requests"]
            prompt_len = isl or int(r["Total input tokens"])  # single prompts: the one prompt's length
            rows.append({
                "quality": "good", "source_id": "dstack_mi300x_tgi_vs_vllm",
                "source": f"github dstackai/benchmarks {path} @{DSTACK_COMMIT[:10]} (amd/tgi_vs_vllm/README.md)",
                "engine": "vllm", "engine_version": "0.6.3.dev116+g151ef4ef (ROCm 6.1)", "gpu": "mi300x",
                "gpu_count": "8", "model": "meta-llama/Llama-3.1-405B-Instruct", "weight_dtype": "bf16",
                "kv_dtype": "auto", "tp": "8", "pp": "1", "dp": "1", "mode": "offline",
                "input_tokens": str(prompt_len), "output_tok_s": _positive(r["Output token throughput (tok/s)"]),
                "total_tok_s": r["Total Token throughput (tok/s)"],
                "requests_per_s": _positive(r["Request throughput (req/s)"]),
                "ttft_ms": r["Mean TTFT (ms)"], "ttft_stat": "mean", "tpot_ms": r["Mean TPOT (ms)"],
                "tpot_stat": "mean", "itl_ms": r["Mean ITL (ms)"], "itl_stat": "mean",
                "orig_gpu": "8 x AMD Instinct MI300X", "orig_model": "meta-llama/Llama-3.1-405B-Instruct",
                "orig_engine": "vLLM",
                "notes": f"[norm: all-at-once ({n} prompts, no request rate); sonnet prompts of {prompt_len} tokens "
                         f"(published total {r['Total input tokens']}); output_tokens not stated (published total "
                         f"{r['Total generated tokens']} generated over {n} requests)] [source notes: "
                         f"benchmark_serving.py --dataset-name sonnet --num-prompt {n}; median TTFT "
                         f"{r['Median TTFT (ms)']} ms, median TPOT {r['Median TPOT (ms)']} ms; duration "
                         f"{r['Benchmark duration (s)']} s; request throughput as published "
                         f"{r['Request throughput (req/s)']} req/s (0.00 left empty); weights bf16 as the "
                         "checkpoint (no --dtype or quantization flag in the serve command)]",
            })
    return rows

# GPUStack's reference "The Impact of Quantization on vLLM Inference Performance": Qwen3-8B under vLLM v0.9.2,
# vllm bench serve on ShareGPT (1000 prompts, all at once), one table per GPU of throughput, mean TTFT and mean
# TPOT per quantization method.
GPUSTACK_QUANT_DOC = "docs/performance-lab/references/the-impact-of-quantization-on-vllm-inference-performance.md"
_QUANT_GPUS = {"RTX 4090": ("rtx-4090", ""),
               "A100 80GB": ("a100-80gb-sxm", "A100 80GB form factor not stated (SXM assumed)"),
               "H100 80GB": ("h100-sxm", "H100 80GB form factor not stated (SXM assumed)"),
               "KV Cache Quantization": ("h100-sxm", "H100 80GB form factor not stated (SXM assumed); GPU of the "
                                         "KV-cache table not named (its BF16 baseline is the H100 table's)")}
_QUANT_METHODS = {  # method label -> (weight dtype, kv dtype); labels not listed (bitsandbytes, GGUF) are left out
    "BF16": ("bf16", "auto"), "BF16 (Baseline)": ("bf16", "auto"), "BF16 + KV Cache FP8 (E4M3)": ("bf16", "fp8"),
    "AWQ": ("int4-awq", "auto"), "AWQ Marlin": ("int4-awq", "auto"),
    "GPTQ (Int4)": ("int4-gptq", "auto"), "GPTQ-Marlin (Int4)": ("int4-gptq", "auto"),
    "GPTQ (Int8)": ("int8-wo", "auto"), "GPTQ Marlin (Int8)": ("int8-wo", "auto"), "GPTQ Marlin": ("int8-wo", "auto"),
    "FP8 Static": ("fp8", "auto"), "FP8 Dynamic": ("fp8", "auto"), "Int4-W4A16": ("int4-wo", "auto"),
}


def gpustack_quantization_rows(git_dir: Path) -> list[Row]:
    rows: list[Row] = []
    table = ""
    for line in git_show(git_dir, GPUSTACK_COMMIT, GPUSTACK_QUANT_DOC).splitlines():
        if line.startswith("### "):
            table = line[4:].strip()
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if table not in _QUANT_GPUS or len(cells) != 4 or cells[0] not in _QUANT_METHODS:
            continue
        method, thr, ttft, tpot = (cells[0], *(c.split(" ")[0] for c in cells[1:]))
        if ttft == "N/A":
            continue
        gpu, gpu_weak = _QUANT_GPUS[table]
        dtype, kv = _QUANT_METHODS[method]
        weak = [w for w in (gpu_weak, "quantized checkpoint not named" if dtype != "bf16" else "",
                            "GPTQ label without bit width: int8 inferred from the RTX 4090 table's order"
                            if method == "GPTQ Marlin" else "") if w]
        rows.append({
            "quality": "weak" if weak else "good", "source_id": "gpustack_quantization_reference",
            "source": f"github gpustack/gpustack {GPUSTACK_QUANT_DOC} @{GPUSTACK_COMMIT[:10]}", "engine": "vllm",
            "engine_version": "0.9.2", "gpu": gpu, "gpu_count": "1", "model": "Qwen/Qwen3-8B", "weight_dtype": dtype,
            "kv_dtype": kv, "tp": "1", "pp": "1", "dp": "1", "mode": "offline", "ttft_ms": ttft, "ttft_stat": "mean",
            "tpot_ms": tpot, "tpot_stat": "mean", "orig_gpu": table, "orig_model": f"Qwen3-8B ({method})",
            "orig_engine": "vLLM",
            "notes": (f"[weak: {'; '.join(weak)}] " if weak else "") + "[norm: ShareGPT, 1000 prompts all at once "
                     "(vllm bench serve --num-prompts 1000, no rate); lengths not fixed] [source notes: table "
                     f"'{table}', method '{method}'; published 'Throughput (tok/s)' {thr} (which throughput is not "
                     "stated, so not copied into a throughput column)]",
        })
    return rows

# ---------------------------------------------------------------------------------------------------------------
# Tenstorrent's GPU reference runs, posted in tt-inference-server issues: their benchmark sweep (vLLM's
# benchmark_serving-based client, random prompts of fixed ISL/OSL, closed loop at the stated concurrency, N requests;
# "all metrics are means across benchmark run") run against a vLLM server on NVIDIA GPUs. Read as search-index
# excerpts of the comments (the first rows of each table), transcribed as published:
# (ISL, OSL, concurrency, N requests, TTFT ms, TPOT ms, E2EL ms or "", request/s or "").
TT_GPU_RUNS = [
    ("143", "2025-04-01", "Qwen/Qwen2.5-72B-Instruct", "h100-sxm", 2, "Qwen2.5-72B-Instruct on 2xH100",
     "H100 form factor not stated (SXM assumed); TP over the 2 GPUs, dtype and vLLM version not stated", [
         (128, 128, 1, 8, "41.1", "30.9", "3964.6", "0.252"), (128, 1024, 1, 4, "35.0", "30.9", "31664.4", "0.032"),
         (1024, 128, 1, 8, "129.2", "31.0", "4062.2", "0.246"), (2048, 128, 1, 8, "149.5", "31.0", "4088.9", "0.245"),
         (3072, 128, 1, 8, "270.9", "31.1", "4221.5", "0.237"), (4096, 128, 1, 8, "505.1", "31.1", "4456.0", "0.224"),
         (8192, 128, 1, 8, "1063.8", "31.3", "", ""),
     ]),
    ("125", "2025-03-28", "Qwen/Qwen2.5-7B-Instruct", "rtx-4090", 1, "Qwen2.5-7B-Instruct on 4090",
     "the report's metadata names device n300 while its title says 4090 (GPU taken from the title); dtype and "
     "vLLM version not stated", [
         (128, 128, 1, 8, "30.8", "17.1", "2199.0", "0.454"), (128, 1024, 1, 4, "28.2", "17.2", "17590.2", "0.057"),
         (1024, 128, 1, 8, "99.6", "17.2", "2278.4", "0.439"), (2048, 128, 1, 8, "116.4", "17.2", "2302.2", "0.434"),
         (3072, 128, 1, 8, "128.1", "17.3", "", ""),
     ]),
]


def tenstorrent_gpu_rows(_: Path) -> list[Row]:
    rows: list[Row] = []
    for issue, date, model, gpu, n, title, weak, table in TT_GPU_RUNS:
        for isl, osl, conc, nreq, ttft, tpot, e2e, rps in table:
            rows.append({
                "quality": "weak", "source_id": "tenstorrent_gpu_reference_runs",
                "source": f"github tenstorrent/tt-inference-server issue #{issue} (comment {date}, "
                          f"'Performance Benchmarks for {title}')",
                "engine": "vllm", "gpu": gpu, "gpu_count": str(n), "model": model, "tp": str(n), "pp": "1",
                "dp": "1", "mode": "concurrency", "input_tokens": str(isl), "output_tokens": str(osl),
                "concurrency": str(conc), "requests_per_s": rps, "ttft_ms": ttft, "ttft_stat": "mean",
                "tpot_ms": tpot, "tpot_stat": "mean", "e2e_ms": e2e, "e2e_stat": "mean" if e2e else "",
                "orig_gpu": title.split(" on ")[1], "orig_model": title.split(" on ")[0], "orig_engine": "vLLM",
                "notes": f"[weak: {weak}] [norm: closed loop: {nreq} requests at concurrency {conc}; fixed "
                         f"ISL/OSL {isl}/{osl}] [source notes: tt-inference-server benchmark sweep table (means); "
                         "transcribed from the search index's excerpt of the comment, which ends mid-table]",
            })
    return rows

# ---------------------------------------------------------------------------------------------------------------
# Markdown write-ups that paste each benchmark_serving.py / vllm bench serve command next to its console summary:
# (heading, the command's flags, the summary's fields) for each summary, in document order.

_FLAG = re.compile(r"--([a-z][a-z0-9-]*)(?:[ =]+(?!--)(\S+))?")


def command_summaries(text: str) -> Iterator[tuple[str, dict[str, str], dict[str, str]]]:
    heading, flags, current = "", {}, None
    cmd: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        title = s.lstrip("#").strip()
        if s.startswith("#") and current is None and not s.startswith("#!") and not title.startswith(
                ("Traffic", "Burstiness", "Maximum")):  # console lines commented out in shell scripts
            heading = title
        if "benchmark_serving.py" in s or s.startswith(("vllm bench serve", "python3 -m vllm.entrypoints.cli")):
            cmd = [s]
        elif cmd and cmd[-1].endswith("\\"):
            cmd.append(s)
        if cmd and not cmd[-1].endswith("\\"):
            words = " ".join(cmd).replace("\\", " ")
            flags = {m.group(1): (m.group(2) or "").strip("'\"") for m in _FLAG.finditer(words)}
            cmd = []
        if "Serving Benchmark Result" in s:
            current = []
        elif current is not None and s.startswith("=====") and current:
            yield heading, dict(flags), parse_summary(current)
            current = None
        elif current is not None:
            current.append(s)


def _load_fields(f: dict[str, str], flags: dict[str, str]) -> tuple[str, str, str, list[str]]:
    """mode, concurrency, request rate and normalisation notes of one run, from its flags and summary."""
    n = f["requests"]
    conc = flags.get("max-concurrency", "")
    rate = flags.get("request-rate", "inf")
    if conc:
        return "concurrency", conc, "", [f"closed loop: {n} requests at max concurrency {conc}"]
    if rate not in ("", "inf"):
        return "request_rate", "", rate, [f"open loop at {rate} req/s ({n} prompts)"]
    if n == "1":
        return "concurrency", "1", "", ["a single request (num-prompts 1, nothing else in flight): concurrency 1"]
    return "offline", "", "", [f"all-at-once ({n} prompts, request rate inf, no max concurrency)"]


# dennislee22/vLLM-benchmarking README: vLLM 0.10.1.1 (startup logs) serving Qwen2-7B-Instruct, Qwen2.5-32B and
# Qwen2-72B on A100 GPUs of a Cloudera AI cluster, benchmark_serving.py on random prompts. Per test section:
# (gpu, gpu count, tp, weak reasons). Test 9 (gpt-oss-120b, MoE) is left out.
DENNISLEE_COMMIT = "b474d1e053c35c9aef8c02aae4efbc0d8675f033"
_DL_A100 = "A100 form factor not stated (SXM assumed)"
DENNISLEE_TESTS = {
    "Test 1": ("a100-40gb-sxm", 2, 2, [_DL_A100, "A100 memory: the article says 80GB, the test's startup log is "
                                       "named 2gpuA10040GB (40 GB taken); the 2 GPUs are on 2 nodes (Ray)"]),
    "Test 2": ("a100-80gb-sxm", 2, 2, [_DL_A100]),
    "Test 3": ("a100-80gb-sxm", 2, 2, [_DL_A100,
                                       "TP 2 inferred from '2 GPU pods' (the startup log does not print it)"]),
    "Test 4": ("a100-80gb-sxm", 1, 1, [_DL_A100]),
    "Test 5": ("a100-80gb-sxm", 1, 1, [_DL_A100]),
    "Test 6": ("a100-80gb-sxm", 2, 2, [_DL_A100, "TP 2 inferred from '2 GPU pods' (no startup log)"]),
    "Test 7": ("a100-80gb-sxm", 1, 1, [_DL_A100]),
    "Test 8": ("a100-80gb-sxm", 2, 2, [_DL_A100, "TP 2 inferred from '2 GPU pods' (no startup log)"]),
}
_DL_MODELS = {"Qwen2-7B-Instruct": "Qwen/Qwen2-7B-Instruct", "Qwen2.5-32B": "Qwen/Qwen2.5-32B",
              "Qwen2-72B": "Qwen/Qwen2-72B"}


def dennislee_rows(git_dir: Path) -> list[Row]:
    rows: list[Row] = []
    for heading, flags, f in command_summaries(git_show(git_dir, DENNISLEE_COMMIT, "README.md")):
        test = re.search(r"Test \d+", heading)
        model = _DL_MODELS.get(flags.get("model", ""))
        if not test or test.group(0) not in DENNISLEE_TESTS or model is None or "ttft_mean" not in f:
            continue
        gpu, n, tp, weak = DENNISLEE_TESTS[test.group(0)]
        isl, osl = flags["random-input-len"], flags["random-output-len"]
        mode, conc, rate, norm = _load_fields(f, flags)
        weak = [*weak, "prefix caching on (vLLM default) while the same seeded random prompts were sent run after run: "
                       "the logs show prefix-cache hits, so TTFT may skip part of the prefill"]
        if int(f["output_total"]) < 0.98 * int(f["requests"]) * int(osl):
            weak.append(f"requests stopped early: {f['output_total']} of {int(f['requests']) * int(osl)} output "
                        "tokens generated")
        rows.append({
            "quality": "weak", "source_id": "dennislee_vllm_benchmarking",
            "source": f"github dennislee22/vLLM-benchmarking README.md @{DENNISLEE_COMMIT[:10]}",
            "engine": "vllm", "engine_version": "0.10.1.1", "gpu": gpu, "gpu_count": str(n), "model": model,
            "weight_dtype": "bf16", "kv_dtype": "auto", "tp": str(tp), "pp": "1", "dp": "1", "mode": mode,
            "input_tokens": isl, "output_tokens": osl, "concurrency": conc, "request_rate": rate,
            "output_tok_s": f["output_tok_s"], "total_tok_s": f["total_tok_s"],
            "requests_per_s": _positive(f["requests_per_s"]), "ttft_ms": f["ttft_mean"], "ttft_stat": "mean",
            "tpot_ms": f["tpot_mean"], "tpot_stat": "mean", "itl_ms": f.get("itl_mean", ""),
            "itl_stat": "mean" if f.get("itl_mean") else "", "orig_gpu": heading.split("Test", 1)[-1][3:].strip(),
            "orig_model": flags["model"], "orig_engine": "vLLM",
            "notes": f"[weak: {'; '.join(weak)}] [norm: {'; '.join(norm)}; random dataset --random-input-len {isl} "
                     f"--random-output-len {osl}; published totals {f['input_total']} input / {f['output_total']} "
                     f"generated tokens] [source notes: section '{test.group(0)}'; dtype bfloat16 and vLLM version "
                     f"from the startup logs; median TTFT {f.get('ttft_median', '-')} ms, median TPOT "
                     f"{f.get('tpot_median', '-')} ms; duration {f.get('duration_s', '-')} s; benchmark_serving.py]",
        })
    return rows

# surajssd/llm-k8s results_serving_meta-llama-Llama-3.3-70B-Instruct/ (commit "Add results"): vLLM's
# benchmark_serving.py result JSONs of Llama-3.3-70B-Instruct on Azure Standard_ND96asr_v4 VMs, ShareGPT 200 prompts
# at 1, 4, 16 req/s and all at once, single node TP8 and two nodes TP4 x PP2 (with and without InfiniBand).
SURAJ_COMMIT = "58b61c59450e06073120a8ad166c1e9c333851a7"
SURAJ_DIR = "results_serving_meta-llama-Llama-3.3-70B-Instruct"
SURAJ_RUNS = {  # run directory -> (tp, pp, file stem, vLLM version or "", setup note)
    "01_tp8_pp1": (8, 1, "tp8_pp1", "", "one VM, TP8"),
    "02_tp4_pp2_no_IB": (4, 2, "tp4_pp2", "0.8.3", "two VMs, TP4 x PP2 (8 GPUs) without InfiniBand"),
    "03_tp4_pp2_IB": (4, 2, "tp4_pp2", "0.8.3", "two VMs, TP4 x PP2 (8 GPUs) over InfiniBand, trial 1"),
    "04_tp4_pp2_IB": (4, 2, "tp4_pp2", "0.8.3", "two VMs, TP4 x PP2 (8 GPUs) over InfiniBand, trial 2"),
}
SURAJ_SERVER = ("server (lws-run-1.sh/lws-run-2.sh logs): vLLM 0.8.3 api_server --tensor-parallel-size 4 "
                "--pipeline-parallel-size 2 --enable-prefix-caching, dtype torch.bfloat16")
_SURAJ_GPU = ("GPU from the Azure VM size Standard_ND96asr_v4 (8x A100 40GB SXM4 in Azure's VM documentation); "
              "the source names only the VM size")


def suraj_llm_k8s_rows(git_dir: Path) -> list[Row]:
    rows: list[Row] = []
    for run, (tp, pp, stem, version, setup) in SURAJ_RUNS.items():
        for qps in ("01", "04", "16", "inf"):
            path = f"{SURAJ_DIR}/{run}/serving_meta-llama-Llama-3.3-70B-Instruct_{stem}_sharegpt_qps_{qps}.json"
            r = json.loads(git_show(git_dir, SURAJ_COMMIT, path))
            meta = json.loads(git_show(git_dir, SURAJ_COMMIT, path.replace(".json", ".commands")))
            weak = [_SURAJ_GPU] + ([] if version else ["vLLM version, dtype and server flags not stated for this run "
                                                         "(bf16 taken: the checkpoint's dtype)"])
            n, rate = r["completed"], r["request_rate"]
            if rate == "inf" or rate == float("inf"):
                mode, norm = "offline", f"all-at-once ({n} prompts, request rate inf)"
            else:
                mode, norm = "request_rate", f"open loop at {rate} req/s ({n} prompts, Poisson arrivals)"
            rows.append({
                "quality": "weak", "source_id": "surajssd_llm_k8s_llama33_70b",
                "source": f"github surajssd/llm-k8s {path} @{SURAJ_COMMIT[:10]}", "engine": "vllm",
                "engine_version": version, "gpu": "a100-40gb-sxm", "gpu_count": str(tp * pp),
                "model": "meta-llama/Llama-3.3-70B-Instruct", "weight_dtype": "bf16", "kv_dtype": "auto",
                "tp": str(tp), "pp": str(pp), "dp": "1", "mode": mode,
                "request_rate": "" if mode == "offline" else str(rate),
                "output_tok_s": str(r["output_throughput"]), "total_tok_s": str(r["total_token_throughput"]),
                "requests_per_s": str(r["request_throughput"]), "ttft_ms": str(r["mean_ttft_ms"]),
                "ttft_stat": "mean", "tpot_ms": str(r["mean_tpot_ms"]), "tpot_stat": "mean",
                "itl_ms": str(r["mean_itl_ms"]), "itl_stat": "mean", "orig_gpu": meta["gpu_type"],
                "orig_model": r["model_id"], "orig_engine": "vLLM",
                "notes": f"[weak: {'; '.join(weak)}] [norm: {norm}; input_tokens: ShareGPT ({r['total_input_tokens']} "
                         f"tokens / {n} req); output_tokens: ShareGPT ({r['total_output_tokens']} tokens / {n} req)] "
                         f"[source notes: {setup}; {SURAJ_SERVER if version else 'server command not published'}; "
                         f"median TTFT {r['median_ttft_ms']} ms, median TPOT "
                         f"{r['median_tpot_ms']} ms; duration {r['duration']} s; benchmark_serving.py]",
            })
    return rows

# ---------------------------------------------------------------------------------------------------------------
# IOG-Foundation/llm-inference-benchmarks results/: vLLM 0.8.5's benchmark_serving.py result JSONs (one JSON object
# per line; a file may hold a repeated run) of ShareGPT 200 prompts at 1/4/8/16/32 req/s (Poisson, no max
# concurrency) on io.net H100 PCIe and RTX 4090 machines, tensor parallelism over all GPUs (README: "The tensor
# parallelism was set to the maximum available GPUs"). The serve command of each run is not published.

IOG_COMMIT = "4990a807c6f1971edda635c18d98550059782eb8"
IOG_GPUS = {"NVIDIA-H100-PCIe": "h100-pcie", "NVIDIA-GeForce-RTX-4090": "rtx-4090"}
# The source's model -> (catalog architecture, weight dtype, weak reason or ""). DeepSeek-R1-Distill and QwQ are
# fine-tunes of the base named in their model cards; AceMath-7B and R1-Distill-Qwen-7B start from Qwen2.5-Math-7B
# (mapped to Qwen2.5-7B, weak). phi-4 and R1-Distill-Qwen-1.5B are left out (not in the catalog).
_IOG_MATH7B = ("a fine-tune of Qwen2.5-Math-7B (per its model card), mapped to the Qwen2.5-7B architecture: its own "
               "config.json was not read")
IOG_MODELS = {
    "meta-llama/Meta-Llama-3-8B-Instruct": ("meta-llama/Meta-Llama-3-8B-Instruct", "bf16", ""),
    "meta-llama/Meta-Llama-3-70B-Instruct": ("meta-llama/Meta-Llama-3-70B-Instruct", "bf16", ""),
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": ("meta-llama/Llama-3.1-8B", "bf16", ""),
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B": ("meta-llama/Llama-3.3-70B-Instruct", "bf16", ""),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": ("Qwen/Qwen2.5-7B", "bf16", _IOG_MATH7B),
    "nvidia/AceMath-7B-Instruct": ("Qwen/Qwen2.5-7B", "bf16", _IOG_MATH7B),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": ("Qwen/Qwen2.5-14B", "bf16", ""),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": ("Qwen/Qwen2.5-32B", "bf16", ""),
    "Qwen/QwQ-32B-Preview": ("Qwen/Qwen2.5-32B-Instruct", "bf16", ""),
    "google/gemma-2-9b-it": ("google/gemma-2-9b-it", "bf16", ""),
    "neuralmagic/Llama-3.1-Nemotron-70B-Instruct-HF-FP8-dynamic": ("meta-llama/Llama-3.1-70B", "fp8", ""),
}
_IOG_WEAK = ("serve command of the run not published: dtype not stated (the README's serve example passes --dtype "
             "float16 for an R1-Distill model; the checkpoint's dtype taken) and vLLM version taken from the README "
             "(its benchmark scripts and suggested image are vLLM 0.8.5)")


def iog_rows(git_dir: Path) -> list[Row]:
    rows: list[Row] = []
    names = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "--name-only", IOG_COMMIT, "results/"],
                           check=True, capture_output=True, text=True).stdout.split()
    for path in sorted(n for n in names if n.endswith(".json")):
        for line in git_show(git_dir, IOG_COMMIT, path).splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            if r["model_id"] not in IOG_MODELS or "_sharegpt_" not in path:
                continue
            model, dtype, arch_weak = IOG_MODELS[r["model_id"]]
            n, gpus = r["completed"], int(r["gpu_count"])
            weak = [_IOG_WEAK] + ([arch_weak] if arch_weak else [])
            rows.append({
                "quality": "weak", "source_id": "iog_llm_inference_benchmarks",
                "source": f"github IOG-Foundation/llm-inference-benchmarks {path} @{IOG_COMMIT[:10]}",
                "engine": "vllm", "engine_version": "0.8.5", "gpu": IOG_GPUS[r["gpu_name"]], "gpu_count": str(gpus),
                "model": model, "weight_dtype": dtype, "kv_dtype": "auto", "tp": str(gpus), "pp": "1", "dp": "1",
                "mode": "request_rate", "request_rate": str(r["request_rate"]),
                "output_tok_s": str(r["output_throughput"]), "total_tok_s": str(r["total_token_throughput"]),
                "requests_per_s": str(r["request_throughput"]), "ttft_ms": str(r["mean_ttft_ms"]),
                "ttft_stat": "mean", "tpot_ms": str(r["mean_tpot_ms"]), "tpot_stat": "mean",
                "itl_ms": str(r["mean_itl_ms"]), "itl_stat": "mean", "orig_gpu": f"{gpus}x{r['gpu_name']}",
                "orig_model": r["model_id"], "orig_engine": "vLLM",
                "notes": f"[weak: {'; '.join(weak)}] [norm: open loop at {r['request_rate']} req/s ({n} prompts, "
                         f"Poisson arrivals, burstiness {r['burstiness']}); input_tokens: ShareGPT "
                         f"({r['total_input_tokens']} tokens / {n} req); output_tokens: ShareGPT "
                         f"({r['total_output_tokens']} tokens / {n} req); tp = gpu_count per the README] "
                         f"[source notes: run {r['date']}; median TTFT {r['median_ttft_ms']} ms, median TPOT "
                         f"{r['median_tpot_ms']} ms; duration {r['duration']} s; benchmark_serving.py]",
            })
    return rows

# ---------------------------------------------------------------------------------------------------------------
# Neural Magic's nm-vllm nightly serving benchmarks (github neuralmagic/nm-vllm, branch nm-gh-pages): the data files
# of github-action-benchmark, one entry per nightly run, each bench a metric of benchmark_serving.py with its
# configuration in "extra" (model, GPU, server args, "nr-qps-pair" = number of ShareGPT prompts and request rate).
# dev/bench/data.js-a12f1e7e-20240628.gz archives the runs of nm-vllm 0.2.0-0.5.0 on one A10G (2024-04 to 06);
# dev/bench/data.js holds the later runs on one L4 and one H100. Sparse checkpoints (not modelled) and models outside
# the catalog (facebook/opt-350m) are left out.

NM_VLLM_COMMIT = "9b22428b209493d23636ccc1f471bddfef85ee98"
NM_VLLM_FILES = ("dev/bench/data.js-a12f1e7e-20240628.gz", "dev/bench/data.js")
NM_VLLM_GPUS = {"NVIDIA A10G x 1": "a10g", "NVIDIA L4 x 1": "l4", "NVIDIA H100 80GB HBM3 x 1": "h100-sxm"}
# The benchmarked checkpoint -> (catalog architecture, weight dtype, checkpoint note). The dtype of the unquantized
# checkpoints is the torch_dtype of their config.json (the server passes no --dtype: vLLM's "auto").
NM_VLLM_MODELS = {
    "NousResearch/Llama-2-7b-chat-hf": ("meta-llama/Llama-2-7b-chat-hf", "fp16", "a copy of Llama-2-7b-chat-hf"),
    "teknium/OpenHermes-2.5-Mistral-7B": ("mistralai/Mistral-7B-v0.1", "bf16",
                                          "a fine-tune of Mistral-7B-v0.1 (2 added chat tokens)"),
    "TheBloke/OpenHermes-2.5-Mistral-7B-GPTQ": ("mistralai/Mistral-7B-v0.1", "int4-gptq",
                                                "4-bit GPTQ of OpenHermes-2.5-Mistral-7B"),
    "neuralmagic/OpenHermes-2.5-Mistral-7B-marlin": ("mistralai/Mistral-7B-v0.1", "int4-gptq",
                                                     "4-bit GPTQ of OpenHermes-2.5-Mistral-7B in Marlin format"),
    "meta-llama/Meta-Llama-3-8B-Instruct": ("meta-llama/Meta-Llama-3-8B-Instruct", "bf16", ""),
}
_NM_VLLM_WEAK = ("nightly build of nm-vllm, Neural Magic's fork of vLLM (engine_version is the fork's); dtype not "
                 "passed to the server (vLLM's auto: the checkpoint's dtype)")


def git_show_bytes(git_dir: Path, commit: str, path: str) -> bytes:
    return subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], check=True,
                          capture_output=True).stdout


def nm_vllm_rows(git_dir: Path) -> list[Row]:
    import gzip

    rows: list[Row] = []
    for path in NM_VLLM_FILES:
        raw = git_show_bytes(git_dir, NM_VLLM_COMMIT, path)
        text = (gzip.decompress(raw) if path.endswith(".gz") else raw).decode("utf-8")
        data = json.loads(text.split("=", 1)[1], parse_float=str)  # floats kept as printed
        for run in data["entries"]["smaller_is_better"]:
            metrics: dict[str, dict[str, str]] = {}
            extras: dict[str, dict] = {}
            for bench in run["benches"]:
                name = json.loads(bench["name"])
                extra = json.loads(bench["extra"])
                key = f"{name['gpu_description']}|{name['description']}"
                metrics.setdefault(key, {})[name["name"]] = bench["value"]
                extras[key] = extra | {"_gpu": name["gpu_description"], "_version": name["vllm_version"]}
            for key, m in metrics.items():
                row = _nm_vllm_row(path, run, m, extras[key])
                if row:
                    rows.append(row)
    return rows


def _nm_vllm_row(path: str, run: dict, m: dict[str, str], extra: dict) -> Row | None:
    args = extra["script_args"]
    if extra.get("model") not in NM_VLLM_MODELS or "Sparse" in extra["description"] or "mean_ttft_ms" not in m:
        return None
    model, dtype, ckpt = NM_VLLM_MODELS[extra["model"]]
    prompts, rate = args["nr_qps_pair_"]
    medians = (f"median TTFT {m['median_ttft_ms']} ms, median TPOT {m['median_tpot_ms']} ms; "
               if "median_ttft_ms" in m else "")
    commit = run["commit"]
    return {
        "quality": "weak", "source_id": "nm_vllm_nightly_benchmarks",
        "source": f"github neuralmagic/nm-vllm branch nm-gh-pages {path} @{NM_VLLM_COMMIT[:10]} (nightly run of "
                  f"commit {commit['id'][:10]}, {extra['date']})",
        "engine": "vllm", "engine_version": f"nm-vllm {extra['_version']}", "gpu": NM_VLLM_GPUS[extra["_gpu"]],
        "gpu_count": "1", "model": model, "weight_dtype": dtype, "kv_dtype": "auto",
        "tp": str(args["server_tensor_parallel_size"]), "pp": "1", "dp": "1", "mode": "request_rate",
        "request_rate": rate, "ttft_ms": m["mean_ttft_ms"], "ttft_stat": "mean",
        "tpot_ms": m["mean_tpot_ms"], "tpot_stat": "mean", "orig_gpu": extra["_gpu"],
        "orig_model": extra["model"], "orig_engine": f"nm-vllm {extra['_version']}",
        "notes": f"[weak: {_NM_VLLM_WEAK}] [norm: open loop at {rate} req/s ({prompts} ShareGPT prompts); "
                 f"input_tokens/output_tokens: ShareGPT (token totals not published)"
                 f"{'; checkpoint ' + ckpt if ckpt else ''}] [source notes: benchmark_serving.py; {medians}"
                 f"server args {args['server_args']}]",
    }

# ---------------------------------------------------------------------------------------------------------------
# vLLM's own per-commit CI benchmark, 2024-03-27..04-25 (github vllm-project/dashboard buildkite_benchmarks.xlsx, one
# sheet row per vLLM main commit): the "Benchmarks" step ran .buildkite/run-benchmarks.sh, which serves
# meta-llama/Llama-2-7b-chat-hf with default flags and runs benchmark_serving.py on 20 ShareGPT prompts at the
# default request rate (inf: all at once). The sheet names no GPU: the step ran on one GPU of the CI's Kubernetes
# queue, whose GKE node pools carry NVIDIA L4 GPUs (github vllm-project/buildkite-ci infra/main.tf @42f527a).

VLLM_DASHBOARD_COMMIT = "9d6e04aaf2f04a621df667f7e802c63bd87efb39"
_VLLM_DASHBOARD_WEAK = ("GPU not named in the sheet: L4 from the CI cluster's node pools (vllm-project/buildkite-ci "
                        "infra/main.tf @42f527a, nvidia-l4 only); dtype not passed (the checkpoint's float16); "
                        "per-commit dev builds of vLLM main")
_XLSX_NS = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main"}


def xlsx_rows(data: bytes) -> list[dict[str, str]]:
    """The first sheet of an .xlsx workbook as dicts keyed by the header row (cells as stored)."""
    import io
    import xml.etree.ElementTree as ET
    import zipfile

    root = ET.fromstring(zipfile.ZipFile(io.BytesIO(data)).read("xl/worksheets/sheet1.xml"))
    table: list[dict[str, str]] = []
    for row in root.iterfind(".//m:sheetData/m:row", _XLSX_NS):
        cells: dict[str, str] = {}
        for c in row.iterfind("m:c", _XLSX_NS):
            col = re.match(r"[A-Z]+", c.get("r", "")).group(0)  # type: ignore[union-attr]
            if c.get("t") == "inlineStr":
                cells[col] = "".join(t.text or "" for t in c.iterfind(".//m:t", _XLSX_NS))
            else:
                cells[col] = c.findtext("m:v", default="", namespaces=_XLSX_NS)
        table.append(cells)
    header = table[0]
    return [{header[k]: v for k, v in r.items() if k in header} for r in table[1:]]


def vllm_dashboard_rows(git_dir: Path) -> list[Row]:
    rows: list[Row] = []
    path = "buildkite_benchmarks.xlsx"
    for r in xlsx_rows(git_show_bytes(git_dir, VLLM_DASHBOARD_COMMIT, path)):
        if not r.get("Mean TTFT") or not r.get("Mean TPOT"):
            continue  # runs whose serving benchmark printed no TTFT/TPOT
        sha, date, n = r["commit"], r["build_datetime"], r["Successful Requests"]
        rows.append({
            "quality": "weak", "source_id": "vllm_ci_dashboard_2024",
            "source": f"github vllm-project/dashboard {path} @{VLLM_DASHBOARD_COMMIT[:10]} (vLLM commit {sha[:10]}, "
                      f"build {date})",
            "engine": "vllm", "engine_version": f"main @{sha[:10]}, {date[:10]} (between v0.3.3 and v0.4.1)",
            "gpu": "l4", "gpu_count": "1", "model": "meta-llama/Llama-2-7b-chat-hf", "weight_dtype": "fp16",
            "kv_dtype": "auto", "tp": "1", "pp": "1", "dp": "1", "mode": "offline",
            "output_tok_s": r["Output Token Throughput"], "requests_per_s": _positive(r["Request Throughput"]),
            "ttft_ms": r["Mean TTFT"], "ttft_stat": "mean", "tpot_ms": r["Mean TPOT"], "tpot_stat": "mean",
            "orig_gpu": "not named (CI Kubernetes queue, 1 GPU)", "orig_model": "meta-llama/Llama-2-7b-chat-hf",
            "orig_engine": "vLLM (CI benchmark step)",
            "notes": f"[weak: {_VLLM_DASHBOARD_WEAK}] [norm: all-at-once ({n} ShareGPT prompts, request rate inf); "
                     f"input_tokens: ShareGPT ({r['Total Input Tokens']} tokens / {n} req); output_tokens: ShareGPT "
                     f"({r['Total Generated Tokens']} tokens / {n} req)] [source notes: .buildkite/run-benchmarks.sh "
                     f"at the commit; benchmark_serving.py; median TTFT {r['Median TTFT']} ms, median TPOT "
                     f"{r['Median TPOT']} ms; duration {r['Benchmark Duration']} s]",
        })
    return rows

# ---------------------------------------------------------------------------------------------------------------
# vLLM recipes for Llama on AMD MI355 (github vllm-project/recipes Llama/Llama3.3-70B-ROCm.md and
# Llama3.1-405B-ROCm.md): one measured vllm bench serve summary per checkpoint, labelled
# "`<checkpoint>` TP1 8k/1k conc=64 performance on MI355", from run_performance.sh (random 8192 in / 1024 out,
# --ignore-eos, 128 prompts at --max-concurrency 64) against the doc's serve commands (rocm/vllm-dev:nightly image,
# --kv-cache-dtype fp8, --no-enable-prefix-caching). The 405B FP8 summary is left out: 405B FP8 weights (~405 GB)
# cannot fit the one 288 GB MI355 its label names.

RECIPES_COMMIT = "be7e1c5db0cdd126fbde248b04058d1ffc33d309"
RECIPES_DOCS = {"Llama/Llama3.3-70B-ROCm.md": "meta-llama/Llama-3.3-70B-Instruct",
                "Llama/Llama3.1-405B-ROCm.md": "meta-llama/Llama-3.1-405B-Instruct"}
_RECIPE_LABEL = re.compile(r"^`([^`]+)` TP(\d+) (\d+)k/(\d+)k conc=(\d+) performance on (MI\d+)")
_RECIPE_405B_FP8 = "amd/Llama-3.1-405B-Instruct-FP8-KV"


def recipes_rocm_rows(git_dir: Path) -> list[Row]:
    rows: list[Row] = []
    for path, model in RECIPES_DOCS.items():
        label: re.Match[str] | None = None
        current: list[str] | None = None
        for line in git_show(git_dir, RECIPES_COMMIT, path).splitlines():
            s = line.strip()
            if _RECIPE_LABEL.match(s):
                label = _RECIPE_LABEL.match(s)
            elif "Serving Benchmark Result" in s and label:
                current = []
            elif current is not None and s.startswith("=====") and current:
                row = _recipe_row(path, model, label, parse_summary(current))  # type: ignore[arg-type]
                if row:
                    rows.append(row)
                current, label = None, None
            elif current is not None:
                current.append(s)
    return rows


def _recipe_row(path: str, model: str, label: re.Match[str], f: dict[str, str]) -> Row | None:
    ckpt, tp, isl_k, osl_k, conc, gpu = label.groups()
    if ckpt == _RECIPE_405B_FP8:
        return None
    isl, osl = str(int(isl_k) * 1024), str(int(osl_k) * 1024)
    dtype = "mxfp4" if "MXFP4" in ckpt else "fp8"
    weak = [] if model.endswith("70B-Instruct") else [
        "the doc labels both 405B runs TP1, which its FP8 run cannot be (weights larger than one MI355); TP1 taken "
        "for the MXFP4 run as labelled"]
    n = f["requests"]
    norm = [f"closed loop: {n} requests at max concurrency {conc}",
            f"'{isl_k}k/{osl_k}k' = run_performance.sh input_tokens={isl} output_tokens={osl} with --ignore-eos; "
            f"published totals {f['input_total']} input / {f['output_total']} generated tokens"]
    return {
        "quality": "weak" if weak else "good", "source_id": "vllm_recipes_llama_rocm_mi355",
        "source": f"github vllm-project/recipes {path} @{RECIPES_COMMIT[:10]}", "engine": "vllm",
        "engine_version": "", "gpu": "mi355x", "gpu_count": tp, "model": model, "weight_dtype": dtype,
        "kv_dtype": "fp8", "tp": tp, "pp": "1", "dp": "1", "mode": "concurrency", "input_tokens": isl,
        "output_tokens": osl, "concurrency": conc, "output_tok_s": f["output_tok_s"], "total_tok_s": f["total_tok_s"],
        "requests_per_s": f["requests_per_s"], "ttft_ms": f["ttft_mean"], "ttft_stat": "mean",
        "tpot_ms": f["tpot_mean"], "tpot_stat": "mean", "itl_ms": f.get("itl_mean", ""),
        "itl_stat": "mean" if f.get("itl_mean") else "", "e2e_ms": f.get("e2e_mean", ""),
        "e2e_stat": "mean" if f.get("e2e_mean") else "", "orig_gpu": gpu, "orig_model": ckpt,
        "orig_engine": "vLLM (rocm/vllm-dev:nightly)",
        "notes": (f"[weak: {'; '.join(weak)}] " if weak else "") + f"[norm: {'; '.join(norm)}] [source notes: "
                 f"label '{label.group(0)}'; serve flags --kv-cache-dtype fp8 --async-scheduling "
                 f"--no-enable-prefix-caching --max-num-batched-tokens 32768; vLLM version not stated (nightly "
                 f"image); median TTFT {f.get('ttft_median', '-')} ms, median TPOT {f.get('tpot_median', '-')} ms; "
                 f"duration {f.get('duration_s', '-')} s; vllm bench serve]",
    }

# ---------------------------------------------------------------------------------------------------------------
# AUGMXNT/MI300-testing (Leonard Lin's tests on a Hot Aisle 8 x MI300X node, README): Jupyter notebooks replicating
# dstack's Llama 3.1 405B runs: vLLM serving at TP8, benchmark_serving.py with sonnet prompts of 80 tokens
# (--sonnet-prefix-len 50), 1-2048 prompts sent at once (request rate inf). Per notebook: the serve command of cell 2
# and the printed summaries of cell 4 (cells 14-15 repeat dstack's own results and are not read).
AUGMXNT_COMMIT = "032bd4da1080662667b9d5f77bacd6a579128c5f"
AUGMXNT_NOTEBOOKS = {  # notebook -> (served repo, catalog model, weight dtype note, serve flags, extra weak reasons)
    "inference-vllm-llama3-405b.ipynb": (
        "meta-llama/Llama-3.1-405B-Instruct", "meta-llama/Llama-3.1-405B-Instruct",
        "--tensor-parallel-size=8 --disable-log-requests", []),
    "inference-vllm-llama3-405b-1024.ipynb": (
        "meta-llama/Llama-3.1-405B-Instruct", "meta-llama/Llama-3.1-405B-Instruct",
        "--tensor-parallel-size=8 --disable-log-requests --max-num-seqs 1024 --max_num_batched_tokens 1024", []),
    "inference-vllm-llama3-405b-2048.ipynb": (
        "meta-llama/Llama-3.1-405B-Instruct", "meta-llama/Llama-3.1-405B-Instruct",
        "--tensor-parallel-size=8 --disable-log-requests --max-num-seqs 2048 --max_num_batched_tokens 2048", []),
    "inference-vllm-llama3-405b-2048.tuned.ipynb": (
        "NousResearch/Hermes-3-Llama-3.1-405B", "meta-llama/Llama-3.1-405B",
        "-tp=8 --disable-log-requests --num-scheduler-steps 15 --max-num-seqs 2048 --enable-chunked-prefill false",
        ["NousResearch/Hermes-3-Llama-3.1-405B is a fine-tune of Llama-3.1-405B, mapped to its architecture"]),
}
_AUGMXNT_WEAK = ("vLLM version not stated in the notebook (the repository's setup notebooks install several "
                 "0.6.x ROCm builds)")


def augmxnt_mi300x_rows(git_dir: Path) -> list[Row]:
    rows: list[Row] = []
    for path, (served, model, flags, extra_weak) in AUGMXNT_NOTEBOOKS.items():
        cells = json.loads(git_show(git_dir, AUGMXNT_COMMIT, path))["cells"]
        if served not in "".join(cells[2]["source"]) or "--sonnet-input-len 80" not in "".join(cells[4]["source"]):
            raise SystemExit(f"AUGMXNT/MI300-testing {path}: cells 2/4 are not the serve command and the sweep")
        out = "".join("".join(o.get("text", [])) for o in cells[4]["outputs"])
        summaries = [f for _, f in split_summaries(out.splitlines())]
        # The single-prompt run shows the prompt length the served tokenizer gives; where it is not the requested
        # 80 tokens (Hermes-3's run: 73) the prompt length is left empty rather than guessed.
        isl = "80" if summaries[0]["requests"] == "1" and summaries[0]["input_total"] == "80" else ""
        for f in summaries:
            mode, conc, rate, norm = _load_fields(f, {})
            n = int(f["requests"])
            rows.append({
                "quality": "weak", "source_id": "augmxnt_mi300x_testing",
                "source": f"github AUGMXNT/MI300-testing {path} @{AUGMXNT_COMMIT[:10]} (cell 4 output)",
                "engine": "vllm", "engine_version": "", "gpu": "mi300x", "gpu_count": "8", "model": model,
                "weight_dtype": "bf16", "kv_dtype": "auto", "tp": "8", "pp": "1", "dp": "1", "mode": mode,
                "input_tokens": isl, "concurrency": conc, "request_rate": rate,
                "output_tok_s": _positive(f["output_tok_s"]), "total_tok_s": f["total_tok_s"],
                "requests_per_s": _positive(f["requests_per_s"]), "ttft_ms": f["ttft_mean"], "ttft_stat": "mean",
                "tpot_ms": f["tpot_mean"], "tpot_stat": "mean", "itl_ms": f.get("itl_mean", ""),
                "itl_stat": "mean" if f.get("itl_mean") else "", "orig_gpu": "8 x MI300X (Hot Aisle node)",
                "orig_model": served, "orig_engine": "vLLM",
                "notes": f"[weak: {'; '.join([_AUGMXNT_WEAK, *extra_weak])}] [norm: {'; '.join(norm)}; sonnet "
                         f"prompts --sonnet-input-len 80 --sonnet-prefix-len 50 (published total {f['input_total']} "
                         f"input tokens over {n} requests); output_tokens not stated (published total "
                         f"{f['output_total']} generated over {n} requests)] [source notes: vllm serve {served} "
                         f"{flags} with VLLM_USE_TRITON_FLASH_ATTN=0; weights bf16 as the checkpoint (no --dtype or "
                         f"quantization flag); median TTFT {f.get('ttft_median', '-')} ms, median TPOT "
                         f"{f.get('tpot_median', '-')} ms; duration {f.get('duration_s', '-')} s; benchmark_serving.py "
                         "--backend vllm --dataset-name sonnet]",
            })
    return rows

# ---------------------------------------------------------------------------------------------------------------
# AUGMXNT/speed-benchmarking nvfp4/README.md (read through the search index: the repository snapshot predates the
# nvfp4/ folder): analyze-bench.py's table of `vllm bench serve` runs (nvfp4/vllm-bench.sh: ShareGPT
# Aeala/ShareGPT_Vicuna_unfiltered, 128 prompts, request rate inf, --max-concurrency 1/4/8/16/32) of
# Llama-3.1-8B-Instruct quantizations on one 600 W RTX PRO 6000 Workstation. The table rows of the engines we model
# are copied as published (columns: Req/s, Prefill Tok/s, Decode Tok/s, Total Tok/s, Max Out Tok/s, TTFT mean/med/p99,
# TPOT mean/med/p99); llama.cpp rows are left out.
APS_README = ("AUGMXNT/speed-benchmarking nvfp4/README.md @9fd8f1dbe5be37d8a3c75c4942a4ffd66e2eddbc "
              "(indexed file-version id 67005189713)")
APS_TABLE = {  # concurrency -> published rows
    1: """\
sglang.fp8-auto │ 1.15 │ 1173.85 │ 142.83 │ 1316.68 │ 146.00 │ 54.88 │ 55.31 │ 55.79 │ 6.61 │ 6.62 │ 6.62
sglang.fp8-dynamic │ 1.04 │ 1065.99 │ 130.29 │ 1196.28 │ 132.00 │ 55.91 │ 56.30 │ 57.13 │ 7.28 │ 7.29 │ 7.29
sglang.w4a16 │ 1.56 │ 1590.93 │ 194.85 │ 1785.78 │ 204.00 │ 53.69 │ 54.10 │ 54.79 │ 4.74 │ 4.75 │ 4.76
trt.fp8 │ 0.59 │ 605.67 │ 74.33 │ 680.01 │ 76.00 │ 39.94 │ 40.24 │ 40.76 │ 13.24 │ 13.24 │ 13.27
trt.nvfp4 │ 0.60 │ 608.22 │ 74.38 │ 682.61 │ 76.00 │ 30.91 │ 31.05 │ 31.31 │ 13.30 │ 13.30 │ 13.34
vllm.fp8-dynamic │ 0.77 │ 789.55 │ 94.90 │ 884.45 │ 98.00 │ 34.94 │ 35.12 │ 36.43 │ 10.34 │ 10.34 │ 10.36
vllm.w4a16 │ 1.52 │ 1549.83 │ 189.81 │ 1739.64 │ 196.00 │ 49.09 │ 49.39 │ 50.30 │ 4.92 │ 4.92 │ 4.96""",
    4: """\
sglang.fp8-auto │ 3.99 │ 4069.51 │ 501.77 │ 4571.29 │ 516.00 │ 23.94 │ 23.90 │ 45.97 │ 7.71 │ 7.72 │ 7.84
sglang.fp8-dynamic │ 4.04 │ 4119.66 │ 493.32 │ 4612.98 │ 512.00 │ 24.70 │ 24.40 │ 27.19 │ 7.89 │ 7.93 │ 8.01
sglang.w4a16 │ 5.86 │ 5977.68 │ 732.11 │ 6709.79 │ 764.00 │ 23.81 │ 16.98 │ 222.63 │ 5.22 │ 5.22 │ 5.30
trt.fp8 │ 1.09 │ 1111.39 │ 138.80 │ 1250.19 │ 144.00 │ 51.90 │ 54.39 │ 62.39 │ 28.56 │ 28.58 │ 28.81
trt.nvfp4 │ 1.11 │ 1135.33 │ 138.15 │ 1273.48 │ 145.00 │ 52.77 │ 62.15 │ 63.30 │ 28.49 │ 28.60 │ 28.91
vllm.fp8-dynamic │ 3.00 │ 3058.79 │ 367.81 │ 3426.60 │ 380.00 │ 21.26 │ 21.20 │ 28.21 │ 10.64 │ 10.64 │ 10.66
vllm.w4a16 │ 5.89 │ 6008.29 │ 735.86 │ 6744.15 │ 757.00 │ 17.14 │ 17.27 │ 21.75 │ 5.25 │ 5.25 │ 5.26""",
    8: """\
sglang.fp8-auto │ 7.46 │ 7618.19 │ 923.81 │ 8542.00 │ 981.00 │ 27.91 │ 29.62 │ 34.02 │ 8.25 │ 8.27 │ 8.92
sglang.fp8-dynamic │ 7.35 │ 7496.84 │ 908.12 │ 8404.96 │ 968.00 │ 28.32 │ 25.35 │ 34.77 │ 8.37 │ 8.42 │ 8.55
sglang.w4a16 │ 10.88 │ 11106.95 │ 1360.31 │ 12467.26 │ 1417.00 │ 20.89 │ 21.78 │ 26.29 │ 5.63 │ 5.66 │ 5.72
trt.fp8 │ 7.62 │ 7780.11 │ 943.09 │ 8723.21 │ 1144.00 │ 22.73 │ 22.18 │ 27.45 │ 7.52 │ 6.97 │ 23.89
trt.nvfp4 │ 8.00 │ 8169.26 │ 994.33 │ 9163.59 │ 1240.00 │ 26.85 │ 21.27 │ 45.61 │ 7.05 │ 6.42 │ 25.35
vllm.fp8-dynamic │ 5.71 │ 5829.43 │ 708.46 │ 6537.89 │ 736.00 │ 22.29 │ 22.17 │ 31.72 │ 10.86 │ 10.86 │ 10.90
vllm.w4a16 │ 10.85 │ 11070.41 │ 1355.84 │ 12426.24 │ 1401.00 │ 20.24 │ 20.78 │ 26.69 │ 5.64 │ 5.67 │ 5.69""",
    16: """\
sglang.fp8-auto │ 13.76 │ 14040.79 │ 1720.70 │ 15761.49 │ 1824.00 │ 37.20 │ 39.50 │ 42.83 │ 8.87 │ 8.89 │ 9.11
sglang.fp8-dynamic │ 13.42 │ 13699.42 │ 1686.21 │ 15385.63 │ 1736.00 │ 35.70 │ 35.24 │ 45.16 │ 9.10 │ 9.12 │ 9.38
sglang.w4a16 │ 18.60 │ 18983.13 │ 2324.94 │ 21308.06 │ 2402.00 │ 29.13 │ 31.65 │ 37.70 │ 6.57 │ 6.57 │ 7.75
trt.fp8 │ 17.04 │ 17392.52 │ 2150.50 │ 19543.02 │ 2192.00 │ 27.81 │ 27.00 │ 42.47 │ 7.17 │ 7.16 │ 7.23
trt.nvfp4 │ 18.35 │ 18724.64 │ 2290.70 │ 21015.34 │ 2368.00 │ 29.79 │ 27.53 │ 63.60 │ 6.64 │ 6.63 │ 6.72
vllm.fp8-dynamic │ 10.74 │ 10959.66 │ 1338.08 │ 12297.74 │ 1390.00 │ 34.05 │ 34.01 │ 53.60 │ 11.44 │ 11.48 │ 11.49
vllm.w4a16 │ 18.56 │ 18946.49 │ 2320.45 │ 21266.93 │ 2390.00 │ 31.36 │ 32.97 │ 51.27 │ 6.52 │ 6.56 │ 6.63""",
    32: """\
sglang.fp8-auto │ 21.96 │ 22409.88 │ 2705.51 │ 25115.40 │ 2932.00 │ 103.82 │ 42.84 │ 309.14 │ 10.35 │ 10.85 │ 11.19
sglang.fp8-dynamic │ 21.70 │ 22141.78 │ 2698.06 │ 24839.84 │ 2847.00 │ 107.47 │ 57.27 │ 316.26 │ 10.70 │ 10.80 │ 11.65
sglang.w4a16 │ 26.94 │ 27498.19 │ 3367.81 │ 30866.00 │ 3390.00 │ 95.33 │ 48.22 │ 270.54 │ 8.57 │ 8.98 │ 10.67
trt.fp8 │ 30.59 │ 31214.81 │ 3865.77 │ 35080.58 │ 3936.00 │ 37.04 │ 28.38 │ 86.05 │ 7.89 │ 7.94 │ 7.99
trt.nvfp4 │ 32.77 │ 33444.34 │ 4064.82 │ 37509.16 │ 4209.00 │ 39.75 │ 31.96 │ 84.06 │ 7.37 │ 7.36 │ 9.20
vllm.fp8-dynamic │ 19.72 │ 20129.64 │ 2466.74 │ 22596.38 │ 2560.00 │ 45.13 │ 47.92 │ 55.27 │ 12.38 │ 12.45 │ 12.56
vllm.w4a16 │ 26.43 │ 26970.73 │ 3303.21 │ 30273.94 │ 3332.00 │ 44.73 │ 46.55 │ 61.96 │ 9.15 │ 9.23 │ 9.40""",
}
APS_CONFIGS = {  # table config -> (engine, engine version, weight dtype, checkpoint / serve command per the README)
    "sglang.fp8-auto": ("sglang", "", "fp8", "meta-llama/Llama-3.1-8B-Instruct with --quantization fp8"),
    "sglang.fp8-dynamic": ("sglang", "", "fp8", "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic (patched SGLang)"),
    "sglang.w4a16": ("sglang", "", "int4-wo", "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16"),
    "trt.fp8": ("trtllm", "1.2.0rc0", "fp8", "nvidia/Llama-3.1-8B-Instruct-FP8, trtllm-serve in "
                "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc0"),
    "trt.nvfp4": ("trtllm", "1.2.0rc0", "nvfp4", "nvidia/Llama-3.1-8B-Instruct-FP4, trtllm-serve in "
                  "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc0"),
    "vllm.fp8-dynamic": ("vllm", "", "fp8", "vllm serve RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic"),
    "vllm.w4a16": ("vllm", "", "int4-wo", "vllm serve RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16"),
}
_APS_CHECKPOINT = re.compile(r"[\w.-]+/[\w.-]+")  # the checkpoint repo named in APS_CONFIGS
_APS_WEAK = ("the GPU is the 600 W RTX PRO 6000 Workstation edition, stored as the catalog's RTX PRO 6000 Server "
             "Edition (same GB202 chip and 96 GB)")


def aps_rtx_pro_rows(_: Path) -> list[Row]:
    rows: list[Row] = []
    for conc, table in APS_TABLE.items():
        for line in table.splitlines():
            config, *cells = (c.strip() for c in line.split("│"))
            req_s, _prefill, decode, total, _max_out, ttft, ttft_med, _ttft_p99, tpot, tpot_med, _tpot_p99 = cells
            engine, version, wdtype, ckpt = APS_CONFIGS[config]
            repo = _APS_CHECKPOINT.search(ckpt)
            if repo is None:
                raise SystemExit(f"APS_CONFIGS[{config!r}] names no checkpoint")
            weak = [_APS_WEAK] + ([] if version else [f"{engine} version not stated"])
            rows.append({
                "quality": "weak", "source_id": "augmxnt_speed_benchmarking_rtx_pro_6000",
                "source": f"github {APS_README}, 'Performance' table, concurrency {conc}, row {config}",
                "engine": engine, "engine_version": version, "gpu": "rtx-pro-6000", "gpu_count": "1",
                "model": "meta-llama/Llama-3.1-8B-Instruct", "weight_dtype": wdtype, "kv_dtype": "auto", "tp": "1",
                "pp": "1", "dp": "1", "mode": "concurrency", "concurrency": str(conc),
                "output_tok_s": decode, "total_tok_s": total, "requests_per_s": req_s,
                "ttft_ms": ttft, "ttft_stat": "mean", "tpot_ms": tpot, "tpot_stat": "mean",
                "orig_gpu": "RTX PRO 6000 Workstation (600W)", "orig_model": repo.group(0),
                "orig_engine": {"sglang": "SGLang", "trtllm": "TensorRT-LLM", "vllm": "vLLM"}[engine],
                "notes": f"[weak: {'; '.join(weak)}] [norm: closed loop: 128 ShareGPT prompts "
                         f"(Aeala/ShareGPT_Vicuna_unfiltered) at max concurrency {conc}, request rate inf; token "
                         f"totals not published; output_tok_s = the table's Decode Tok/s] [source notes: config "
                         f"{config}: {ckpt}; median TTFT {ttft_med} ms, median TPOT {tpot_med} ms; KV cache dtype "
                         "not stated (engine default); vllm bench serve via nvfp4/vllm-bench.sh]",
            })
    return rows

# ---------------------------------------------------------------------------------------------------------------

SOURCES: dict[str, tuple[str, str, Callable[[Path], list[Row]]]] = {
    # row-id prefix: (mirror directory name, short name, extractor)
    "dl-gps": ("gpustack+gpustack", "GPUStack performance lab", gpustack_rows),
    "dl-trt": ("", "TensorRT-LLM performance.md 0.8.0/0.9.0 (transcribed)", trtllm_perf_md_rows),
    "dl-lam": ("", "Lambda vLLM benchmark report (transcribed)", lambda_rows),
    "dl-dsq": ("dstackai+benchmarks", "dstack Llama-3.1-405B FP8 serving (H100, MI300X)", dstack_qps_rows),
    "dl-dsv": ("dstackai+benchmarks", "dstack TGI vs vLLM on 8x MI300X (vLLM rows)", dstack_tgi_vs_vllm_rows),
    "dl-gpq": ("gpustack+gpustack", "GPUStack quantization reference (Qwen3-8B)", gpustack_quantization_rows),
    "dl-ttg": ("", "Tenstorrent GPU reference runs (issue excerpts, transcribed)", tenstorrent_gpu_rows),
    "dl-dlb": ("dennislee22+vLLM-benchmarking", "dennislee22 vLLM benchmarking (Qwen2/2.5 on A100)", dennislee_rows),
    "dl-slk": ("surajssd+llm-k8s", "surajssd llm-k8s Llama-3.3-70B on Azure A100 (TP8, TP4 x PP2)", suraj_llm_k8s_rows),
    "dl-iog": ("IOG-Foundation+llm-inference-benchmarks", "IOG llm-inference-benchmarks (H100 PCIe, RTX 4090)",
               iog_rows),
    "dl-nmv": ("neuralmagic+nm-vllm", "nm-vllm nightly serving benchmarks (A10G, L4, H100)", nm_vllm_rows),
    "dl-vrr": ("vllm-project+recipes", "vLLM recipes: Llama 3.3 70B / 3.1 405B on MI355", recipes_rocm_rows),
    "dl-vcd": ("vllm-project+dashboard", "vLLM per-commit CI benchmark 2024 (Llama-2-7b-chat on L4)",
               vllm_dashboard_rows),
    "dl-amx": ("AUGMXNT+MI300-testing", "AUGMXNT MI300-testing Llama-3.1-405B on 8x MI300X (vLLM, sonnet bursts)",
               augmxnt_mi300x_rows),
    "dl-aps": ("", "AUGMXNT speed-benchmarking Llama-3.1-8B quantizations on RTX PRO 6000 (transcribed)",
               aps_rtx_pro_rows),
}


def latency_key(r: Row) -> tuple[str, ...]:
    """Two rows with this key equal publish the same measurement (TTFT and TPOT; TTFT alone is too coarse)."""
    if r["ttft_ms"] and r["tpot_ms"]:
        return (r["ttft_ms"], r["tpot_ms"])
    return (r["gpu"], r["model"].lower(), r["tp"], r["input_tokens"], r["ttft_ms"], r["tpot_ms"], r["itl_ms"])


def published_latency_keys() -> set[tuple[str, ...]]:
    with PUBLISHED_CSV.open(encoding="utf-8", newline="") as fh:
        return {latency_key(r) for r in csv.DictReader(fh) if r["ttft_ms"] or r["tpot_ms"] or r["itl_ms"]}


BURST_REASON = ("all-at-once burst: its TTFT/TPOT are dominated by the queue of the requests sent together, a count "
                "no column records, so the calibration cannot represent them")


def flag_burst(row: Row) -> Row:
    """Rows of a burst (mode offline) that publish latencies are weak: see BURST_REASON."""
    if row["mode"] != "offline" or not (row["ttft_ms"] or row["tpot_ms"] or row["itl_ms"]):
        return row
    notes = row["notes"]
    if notes.startswith("[weak: "):
        notes = f"[weak: {BURST_REASON}; {notes[len('[weak: '):]}"
    else:
        notes = f"[weak: {BURST_REASON}] {notes}"
    return row | {"quality": "weak", "notes": notes}


def build(mirror: Path) -> list[Row]:
    seen = published_latency_keys()
    catalog = load_catalog()
    out: list[Row] = []
    for prefix, (mirror_name, _, extract) in SOURCES.items():
        for i, row in enumerate(extract(mirror / mirror_name / "repo"), start=1):
            row = flag_burst({c: row.get(c, "") for c in MEASUREMENT_COLUMNS})
            spec = catalog.resolve_model(row["model"])
            if spec is None:
                raise SystemExit(f"{prefix}: model {row['model']} is not in the catalog")
            row["model_family"] = spec.family
            key = latency_key(row)
            if key in seen:
                continue
            seen.add(key)
            out.append(row | {"row_id": f"{prefix}-{i:04d}"})
    parse_measurement_rows(out, "dense_latency (rebuilt)")  # the loader's schema: fails loudly on a bad row
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirror", type=Path, required=True, help="directory holding <owner>+<repo>/repo snapshots")
    ap.add_argument("--out", type=Path, default=DENSE_LATENCY_CSV)
    ap.add_argument("--check", action="store_true", help="only compare with --out; exit 1 when they differ")
    args = ap.parse_args(argv)
    rows = build(args.mirror)
    if args.check:
        with args.out.open(encoding="utf-8", newline="") as fh:
            same = list(csv.DictReader(fh)) == rows
        print(f"{len(rows)} rows rebuilt; {'identical to' if same else 'DIFFERENT from'} {args.out}")
        return 0 if same else 1
    with args.out.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=MEASUREMENT_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} rows written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
