"""Engine flag vocabularies: flags with their bounds and spellings, TRT-LLM YAML keys, read once per process."""

from __future__ import annotations

from typing import Any

import pytest

from gpu_catalog.loader import Catalog, load_catalog, load_cost_constants
from service.engines import vocabulary as vocab
from service.engines.defaults import resolve
from service.engines.errors import LaunchError


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def test_vocabulary_exposes_flags_bounds_and_yaml_keys() -> None:
    new = vocab.vocabulary("vllm", "0.34.0")
    gmu = new.flag("--gpu-memory-utilization")
    assert gmu is not None and gmu.type == "float" and gmu.max_value == 1 and gmu.min_exclusive
    assert new.flag("-tp") is new.flag("--tensor-parallel-size")
    assert new.flag("--disable-chunked-prefill") is new.flag("--enable-chunked-prefill")
    assert new.flag("--swap-space") is None                     # removed in 0.34.0
    old = vocab.vocabulary("vllm", "0.11.0")
    assert old.flag_default("--gpu-memory-utilization") == 0.9
    kv = old.flag("--kv-cache-dtype")
    assert kv is not None and kv.choices is not None and "float16" not in kv.choices
    trt = vocab.vocabulary("trtllm", "1.2")
    assert trt.flag("--tp_size") is trt.flag("--tensor_parallel_size")
    assert trt.flag("--kv_cache_free_gpu_memory_fraction") is trt.flag("--free_gpu_memory_fraction")
    assert "kv_cache_config.dtype" in trt.yaml_keys and trt.yaml_keys["kv_cache_config"].type == "object"
    assert trt.yaml_default("kv_cache_config.enable_block_reuse") is True
    assert trt.executable == ("trtllm-serve",) and new.executable == ("vllm", "serve")
    with pytest.raises(LaunchError, match="no flag vocabulary"):
        vocab.vocabulary("vllm", "0.1.0")



def test_start_up_reads_every_engine_vocabulary_a_request_would_read(monkeypatch: pytest.MonkeyPatch,
                                                                    catalog: Catalog) -> None:
    # warm_up (called by start-up) reads each engine file once, for the launch renderer and the engine
    # defaults alike: after it, rendering a launch and resolving defaults for every engine version read no file
    vocab._load_vocabulary.cache_clear()
    vocab.read_engine_file.cache_clear()
    parsed: list[Any] = []
    parse = vocab.parse_yaml

    def counted(stream: Any) -> Any:
        parsed.append(stream)
        return parse(stream)

    monkeypatch.setattr(vocab, "parse_yaml", counted)
    read = vocab.warm_up()
    versions = [(e, v) for e in ("vllm", "trtllm") for v in vocab.known_versions(e)]
    assert read == len(versions) >= 3
    assert len(parsed) == read                  # each file parsed once, for the renderer and the defaults

    def no_file(_stream: Any) -> Any:
        raise AssertionError("a vocabulary file was read after start-up")

    monkeypatch.setattr(vocab, "parse_yaml", no_file)
    constants, gpu = load_cost_constants(), next(g for g in catalog.gpus if g.id == "h100-sxm")
    for engine, version in versions:
        assert vocab.vocabulary(engine, version).flags
        assert resolve(engine, version, gpu, constants).max_num_seqs > 0
