"""Engine defaults: a prediction and the launch rendered for it assume the same settings (one reader of the
vocabularies), and releases before the targeted generation use the legacy values."""

from __future__ import annotations

import pytest

from gpu_catalog.loader import Catalog, load_catalog, load_cost_constants
from gpu_catalog.schema import CostConstants
from service.engines.base import LaunchSpec
from service.engines.defaults import is_current, resolve
from service.engines.errors import LaunchError
from service.engines.launch import render_launch
from service.engines.vocabulary import known_versions

# flags a launch would emit if its batch and memory settings differed from the engine's own defaults
_RESTATED = {"vllm": ("--max-num-seqs", "--max-num-batched-tokens", "--gpu-memory-utilization"),
             "trtllm": ("--max_batch_size", "--max_num_tokens", "--kv_cache_free_gpu_memory_fraction",
                        "--free_gpu_memory_fraction")}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def constants() -> CostConstants:
    return load_cost_constants()


@pytest.mark.parametrize(("engine", "version"), [(e, v) for e in ("vllm", "trtllm") for v in known_versions(e)])
def test_a_launch_at_the_predicted_defaults_restates_none_of_them(engine: str, version: str, catalog: Catalog,
                                                                  constants: CostConstants) -> None:
    rendered = 0
    for gpu in catalog.gpus:
        d = resolve(engine, version, gpu, constants)
        fraction = {"gpu_memory_utilization" if engine == "vllm" else "kv_cache_free_gpu_memory_fraction":
                    d.mem_fraction}
        spec = LaunchSpec(model_id="meta-llama/Llama-3.2-1B", gpu_id=gpu.id, tp=1, pp=1, replicas=1,
                          weight_dtype="fp16", kv_dtype="auto", engine=engine, engine_version=version,
                          max_num_seqs=d.max_num_seqs, max_num_batched_tokens=d.max_num_batched_tokens, **fraction)
        try:
            args = render_launch(spec, catalog)["args"]
        except LaunchError:
            continue                    # an engine that does not run on this GPU
        assert not set(_RESTATED[engine]) & set(args), (gpu.id, args)
        rendered += 1
    assert rendered >= 20


def test_vllm_device_classes(catalog: Catalog, constants: CostConstants) -> None:
    gpus = {g.id: g for g in catalog.gpus}
    # >= 70 GiB but an A100: the 'other GPUs' class
    assert resolve("vllm", "0.34.0", gpus["a100-80gb-sxm"], constants).max_num_seqs == 256
    assert resolve("vllm", "0.34.0", gpus["h100-sxm"], constants).max_num_batched_tokens == 8192
    assert resolve("vllm", "0.34.0", gpus["b200"], constants).max_num_batched_tokens == 16384
    assert resolve("vllm", "0.11.0", gpus["b200"], constants).max_num_batched_tokens == 8192
    assert resolve("vllm", "0.34.0", gpus["l4"], constants).max_num_seqs == 256


def test_memory_fraction_defaults(catalog: Catalog, constants: CostConstants) -> None:
    gpu = next(g for g in catalog.gpus if g.id == "h100-sxm")
    assert resolve("vllm", "0.34.0", gpu, constants).mem_fraction == 1.0    # extensible KV cache
    assert resolve("vllm", "0.11.0", gpu, constants).mem_fraction == 0.9
    assert resolve("trtllm", "1.2", gpu, constants).mem_fraction == 0.9


def test_legacy_releases_use_the_legacy_values(catalog: Catalog, constants: CostConstants) -> None:
    gpu = next(g for g in catalog.gpus if g.id == "h100-sxm")
    assert not is_current("vllm", "0.6.3", constants) and is_current("vllm", None, constants)
    legacy = resolve("vllm", "0.6.3", gpu, constants)
    assert legacy.max_num_seqs == constants.engines["vllm"].legacy_max_num_seqs
    assert legacy.source == "costmodel.yaml engines.vllm.legacy_*"
