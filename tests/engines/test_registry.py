"""The engine registry: one engine per catalog engine id with a flag vocabulary, and a clear error otherwise."""

from __future__ import annotations

import pytest

from gpu_catalog.loader import load_catalog
from service.engines.base import LaunchSpec
from service.engines.errors import LaunchError
from service.engines.registry import ENGINES, engine_for, foreign_memory_setting
from service.engines.vocabulary import known_versions


def test_every_catalog_engine_with_a_vocabulary_is_registered() -> None:
    with_vocabulary = {e.id for e in load_catalog().engines if known_versions(e.id)}
    assert with_vocabulary == set(ENGINES)
    assert all(engine_for(engine_id).id == engine_id for engine_id in ENGINES)


def test_unknown_engine_names_the_known_ones() -> None:
    with pytest.raises(LaunchError, match=r"unknown engine 'sglang' \(known: trtllm, vllm\)"):
        engine_for("sglang")


def test_a_memory_fraction_of_the_other_engine_is_refused_by_name() -> None:
    def spec(engine: str, **kw: float) -> LaunchSpec:
        return LaunchSpec(model_id="m", gpu_id="h100-sxm", tp=1, pp=1, replicas=1, weight_dtype="bf16",
                          kv_dtype="auto", engine=engine, **kw)

    assert foreign_memory_setting("vllm", spec("vllm", kv_cache_free_gpu_memory_fraction=0.8)) == (
        "kv_cache_free_gpu_memory_fraction", "is a TensorRT-LLM setting; vLLM takes gpu_memory_utilization")
    assert foreign_memory_setting("trtllm", spec("trtllm", gpu_memory_utilization=0.8)) == (
        "gpu_memory_utilization", "is a vLLM setting; TensorRT-LLM takes kv_cache_free_gpu_memory_fraction")
    assert foreign_memory_setting("vllm", spec("vllm", gpu_memory_utilization=0.8)) is None
