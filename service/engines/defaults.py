"""What an engine does when a setting is left out: the one place predictions and launches read it from.

The current generation's defaults come from each engine's vocabulary (``gpu_catalog/data/engines``), read by
the engine's own module (``vllm.py``: per device class; ``trtllm.py``: option defaults). Releases older than
the generation the service targets (``current_from_version`` in ``gpu_catalog/data/costmodel.yaml``) use the
``legacy_*`` values there; they matter only to read old measurements.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpu_catalog.loader import DATA_DIR
from gpu_catalog.schema import CostConstants, GpuSpec
from service.core.candidates import BUDGET_SHARE_OF_FREE, BUDGET_SHARE_OF_TOTAL
from service.engines.registry import engine_for
from service.engines.vocabulary import version_tuple, vocab_version_for, vocabulary


@dataclass(frozen=True)
class EngineDefaults:
    max_num_seqs: int
    max_num_batched_tokens: int
    mem_fraction: float          # vLLM gpu_memory_utilization / TensorRT-LLM kv free fraction
    budget: int                  # BUDGET_SHARE_OF_TOTAL | BUDGET_SHARE_OF_FREE
    source: str
    reserve_full: bool           # KV for prompt + output is reserved when a request is admitted


def is_current(engine: str, version: str | None, constants: CostConstants) -> bool:
    """Whether a release belongs to the engine generation the service targets (unstated: assume it does)."""
    budget = constants.engines[engine]
    v = version_tuple(version)
    if v is None:
        return not version or ("not stated" in version and "2024" not in version)
    first = version_tuple(budget.current_from_version) or (0, 0, 0)
    return v >= first


def resolve(engine: str, version: str | None, gpu: GpuSpec, constants: CostConstants,
            data_dir: Path = DATA_DIR) -> EngineDefaults:
    """The settings ``engine`` at ``version`` would use on ``gpu`` when the operator gives none."""
    budget = constants.engines[engine]
    kind = BUDGET_SHARE_OF_TOTAL if budget.memory_budget == "share_of_total" else BUDGET_SHARE_OF_FREE
    family = engine_for(engine)
    if not is_current(engine, version, constants):
        return EngineDefaults(budget.legacy_max_num_seqs, budget.legacy_max_num_batched_tokens,
                              budget.legacy_gpu_memory_utilization, kind, f"costmodel.yaml engines.{engine}.legacy_*",
                              family.reserves_whole_sequences)
    vv = vocab_version_for(engine, version, data_dir)
    vocab = vocabulary(engine, vv, data_dir / "engines")
    seqs, tokens = family.batch_defaults(vocab, gpu)
    return EngineDefaults(seqs, tokens, family.memory_fraction_default(vocab), kind,
                          f"engines/{engine}-{vv}.yaml {family.defaults_source}", family.reserves_whole_sequences)
