"""What an engine does when a setting is left out: read from the flag vocabularies in gpu_catalog/data/engines.

vLLM picks ``max_num_seqs`` and ``max_num_batched_tokens`` by device class
(``defaults_by_device`` in ``engines/vllm-<version>.yaml``, from ``EngineArgs.get_batch_defaults``);
its ``gpu_memory_utilization`` default is in the same file. TensorRT-LLM's defaults are the
``trtllm-serve`` option defaults in ``engines/trtllm-<version>.yaml``. Releases older than the
generation the service targets (``current_from_version`` in costmodel.yaml) use the ``legacy_*``
values there; they matter only to read old measurements.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpu_catalog.loader import DATA_DIR, parse_yaml
from gpu_catalog.schema import CostConstants, GpuSpec
from service.core.costmodel import BUDGET_SHARE_OF_FREE, BUDGET_SHARE_OF_TOTAL, GB_BYTES, GIB_BYTES

_VERSION_RE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")
_CLASS_MEM_RE = re.compile(r"device_memory >= (\d+) GiB")


@dataclass(frozen=True)
class EngineDefaults:
    max_num_seqs: int
    max_num_batched_tokens: int
    mem_fraction: float          # vLLM gpu_memory_utilization / TensorRT-LLM kv free fraction
    budget: int                  # BUDGET_SHARE_OF_TOTAL | BUDGET_SHARE_OF_FREE
    source: str


def version_tuple(version: str | None) -> tuple[int, int, int] | None:
    """(major, minor, patch) of the first version number in a free-text version string, or None."""
    if not version:
        return None
    match = _VERSION_RE.search(version)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def is_current(engine: str, version: str | None, constants: CostConstants) -> bool:
    """Whether a release belongs to the engine generation the service targets (unstated: assume it does)."""
    budget = constants.engines[engine]
    v = version_tuple(version)
    if v is None:
        return not version or ("not stated" in version and "2024" not in version)
    first = version_tuple(budget.current_from_version) or (0, 0, 0)
    return v >= first


@cache
def read_engine_file(path: Path) -> Any:
    """An engine vocabulary file as parsed, once per process: the engine defaults here and the launch renderer
    (core/launch.py) read the same files. Callers do not change what it returns."""
    with path.open(encoding="utf-8") as fh:
        return parse_yaml(fh)


def _vocab(engine: str, version: str, data_dir: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = read_engine_file(data_dir / "engines" / f"{engine}-{version}.yaml")
    return loaded


def known_versions(engine: str, data_dir: Path = DATA_DIR) -> list[str]:
    return sorted((p.stem.split("-", 1)[1] for p in (data_dir / "engines").glob(f"{engine}-*.yaml")),
                  key=lambda v: version_tuple(v) or (0, 0, 0))


def vocab_version_for(engine: str, version: str | None, data_dir: Path = DATA_DIR) -> str:
    """The newest vocabulary not newer than ``version`` (the oldest if all are newer; newest if unstated)."""
    versions = known_versions(engine, data_dir)
    v = version_tuple(version)
    if v is None:
        return versions[-1]
    older = [k for k in versions if (version_tuple(k) or (0, 0, 0)) <= v]
    return older[-1] if older else versions[0]


def _vllm_device_defaults(vocab: dict[str, Any], gpu: GpuSpec) -> tuple[int, int]:
    mem_gib = gpu.memory_gb * GB_BYTES / GIB_BYTES
    for cls in vocab["defaults_by_device"]["classes"]:
        text = str(cls["class"])
        match = _CLASS_MEM_RE.search(text)
        serve = cls.get("vllm_serve", {})
        if match:
            if mem_gib < float(match.group(1)):
                continue
            if "'a100' not in" in text and "a100" in gpu.id:
                continue
            return int(serve["max_num_seqs"]), int(serve["max_num_batched_tokens"])
        if text.startswith("other GPUs"):
            return int(serve["max_num_seqs"]), int(serve["max_num_batched_tokens"])
    fallback = vocab["defaults_by_device"]["fallback"]
    return int(fallback["max_num_seqs"]), int(fallback["max_num_batched_tokens"])


def resolve(engine: str, version: str | None, gpu: GpuSpec, constants: CostConstants,
            data_dir: Path = DATA_DIR) -> EngineDefaults:
    """The settings ``engine`` at ``version`` would use on ``gpu`` when the operator gives none."""
    budget = constants.engines[engine]
    kind = BUDGET_SHARE_OF_TOTAL if budget.memory_budget == "share_of_total" else BUDGET_SHARE_OF_FREE
    if not is_current(engine, version, constants):
        return EngineDefaults(budget.legacy_max_num_seqs, budget.legacy_max_num_batched_tokens,
                              budget.legacy_gpu_memory_utilization, kind, f"costmodel.yaml engines.{engine}.legacy_*")
    vv = vocab_version_for(engine, version, data_dir)
    vocab = _vocab(engine, vv, data_dir)
    flags = vocab["flags"]
    if engine == "vllm":
        seqs, tokens = _vllm_device_defaults(vocab, gpu)
        util = flags["--gpu-memory-utilization"].get("default")
        if util is None:
            util = vocab["gpu_memory_utilization_default"]["resolved"]["extensible_kv_cache"]
        return EngineDefaults(seqs, tokens, float(util), kind, f"engines/vllm-{vv}.yaml defaults_by_device")
    fraction = vocab["yaml_keys"]["kv_cache_config"]["keys"]["free_gpu_memory_fraction"]["default"]
    return EngineDefaults(int(flags["--max_batch_size"]["default"]), int(flags["--max_num_tokens"]["default"]),
                          float(fraction), kind, f"engines/trtllm-{vv}.yaml option defaults")
