"""Launch renderer: what it emits exists in the targeted engine version, typed and in range; reference
deployments match their golden files; defaults are not restated; impossible input raises LaunchError.

The vocabulary checks read the engine YAML files directly (not through service.engines), so they
check the renderer against the extracted flag lists rather than against itself.
Regenerate the golden files with `UPDATE_GOLDEN=1 python -m pytest tests/engines/test_launch.py`.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_catalog.loader import DATA_DIR, Catalog, load_catalog
from service.engines.base import LaunchSpec, SpeculativeLaunch
from service.engines.errors import CheckpointError, LaunchError
from service.engines.launch import render_launch

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden" / "launch"
ENGINE_VERSIONS = [("vllm", "0.34.0"), ("vllm", "0.11.0"), ("trtllm", "1.2")]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


# --------------------------------------------------------------------------------------------------
# Independent vocabulary checks (raw YAML)


@functools.cache
def _raw_vocab(engine: str, version: str) -> dict[str, Any]:
    """The vocabulary file as parsed YAML (cached: the grid test checks ~20,000 renders; do not mutate)."""
    with (DATA_DIR / "engines" / f"{engine}-{version}.yaml").open(encoding="utf-8") as fh:
        loaded: dict[str, Any] = yaml.safe_load(fh)
    return loaded


def _lookup_flag(raw: dict[str, Any], token: str) -> tuple[str, dict[str, Any]]:
    for name, entry in raw["flags"].items():
        spellings = {name, *(entry.get("aliases") or []), *(entry.get("hidden_aliases") or [])}
        if entry.get("negative"):
            spellings.add(entry["negative"])
        if token in spellings:
            return name, entry
    raise AssertionError(f"{token} is not a flag of {raw['engine']} {raw['version']}")


def _check_typed(where: str, kind: str, entry: dict[str, Any], value: Any) -> None:
    if kind == "int":
        assert isinstance(value, int) and not isinstance(value, bool), f"{where}: {value!r} is not an int"
    elif kind == "float":
        assert isinstance(value, int | float) and not isinstance(value, bool), f"{where}: {value!r} is not a number"
    elif kind == "bool":
        assert isinstance(value, bool), f"{where}: {value!r} is not a bool"
    elif kind == "str":
        assert isinstance(value, str), f"{where}: {value!r} is not a string"
    elif kind.startswith("list"):
        assert isinstance(value, list), f"{where}: {value!r} is not a list"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if entry.get("min") is not None:
            assert value > entry["min"] if entry.get("min_exclusive") else value >= entry["min"], where
        if entry.get("max") is not None:
            assert value < entry["max"] if entry.get("max_exclusive") else value <= entry["max"], where
    if entry.get("choices") and isinstance(value, str):
        assert value in [str(c) for c in entry["choices"]], f"{where}: {value!r} not in {entry['choices']}"


def check_args(args: list[str], engine: str, version: str) -> list[str]:
    """Assert every flag of an argv (after the positional model) exists in the version, with a value of
    the right type in range. Returns the canonical flag names in order."""
    raw = _raw_vocab(engine, version)
    assert args and not args[0].startswith("-"), "argv must start with the model"
    seen: list[str] = []
    i = 1
    while i < len(args):
        token = args[i]
        assert token.startswith("--"), f"unexpected bare value {token!r} in {args}"
        name, entry = _lookup_flag(raw, token)
        kind = entry.get("type", "str")
        if kind in ("bool", "bool-optional"):
            i += 1
        else:
            assert i + 1 < len(args), f"{token} lacks its value"
            text = args[i + 1]
            value: Any = text
            if kind == "int":
                value = int(text)
                assert str(value) == text, f"{token} {text!r} is not a plain integer"
            elif kind == "float":
                value = float(text)
            _check_typed(f"{engine} {version} {token}", kind, entry, value)
            i += 2
        assert name not in seen, f"{name} given twice"
        seen.append(name)
    return seen


def check_yaml_keys(tree: dict[str, Any], keys: dict[str, Any], prefix: str = "") -> list[str]:
    """Assert every (nested) key of the YAML is in the vocab's yaml_keys with a value of its type."""
    paths = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        assert key in keys, f"--extra_llm_api_options key {path} is not in yaml_keys"
        entry = keys[key]
        paths.append(path)
        if entry.get("type") == "object":
            assert isinstance(value, dict), f"{path} must be a mapping"
            tag = entry.get("discriminator")
            if tag is not None:     # the object's kind, one of its listed choices (not a key of its own)
                assert value.get(tag) in entry[f"{tag}_choices"], f"{path}.{tag} {value.get(tag)!r} is not a choice"
                value = {k: v for k, v in value.items() if k != tag}
            paths += check_yaml_keys(value, entry.get("keys") or {}, prefix=f"{path}.")
        else:
            _check_typed(path, entry.get("type", "str"), entry, value)
    return paths


def check_render(out: dict[str, Any]) -> None:
    engine, version = out["engine"], out["engine_version"]
    check_args(out["args"], engine, version)
    assert shlex.split(out["command"]) == [*out["executable"], *out["args"]]
    assert out["container"].endswith(shlex.join(out["args"]))
    for server in out["replicas"].get("servers", []):
        argv = shlex.split(server["command"])
        assert argv[0].endswith(f"VISIBLE_DEVICES={server['gpus']}")
        check_args(argv[1 + len(out["executable"]):], engine, version)
    if engine == "trtllm":
        options = yaml.safe_load(out["files"]["extra_llm_api_options.yaml"])
        check_yaml_keys(options, _raw_vocab(engine, version)["yaml_keys"])
        assert out["args"][out["args"].index("--extra_llm_api_options") + 1] == "extra_llm_api_options.yaml"
    for step in out["steps"]:
        assert step["what"] and step["command"]
        shlex.split(step["command"])
    assert out["replicas"]["count"] >= 1 and out["replicas"]["how"]


# --------------------------------------------------------------------------------------------------
# Grid: every render either validates or raises LaunchError


_MODELS = ["meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen3-30B-A3B",
           "mistralai/Mixtral-8x7B-Instruct-v0.1", "openai/gpt-oss-20b"]
_GPUS = ["t4", "a10g", "l4", "a100-80gb-sxm", "h100-sxm", "h200-sxm", "b200", "mi300x"]
_LAYOUTS = [(1, 1, 1), (2, 1, 3), (4, 2, 1), (8, 1, 2)]   # tp, pp, replicas
_KNOBS: list[dict[str, Any]] = [
    {},
    {"max_num_seqs": 128, "max_num_batched_tokens": 4096, "max_model_len": 8192},
    {"gpu_memory_utilization": 0.85, "kv_cache_free_gpu_memory_fraction": 0.8, "enable_prefix_caching": False},
    {"enable_chunked_prefill": False, "max_model_len": 4096, "max_num_batched_tokens": 4096, "port": 9000},
    {"enable_chunked_prefill": True, "max_num_seqs": 1024, "gpu_memory_utilization": 1.0},
]


def test_grid_emits_only_vocabulary_flags(catalog: Catalog) -> None:
    weight_ids = [w.id for w in catalog.weight_dtypes]
    rendered: dict[tuple[str, str], int] = {}
    errors = 0
    combos = itertools.product(ENGINE_VERSIONS, _MODELS, _GPUS, weight_ids, ["auto", "fp8", "fp16"], _LAYOUTS)
    for n, ((engine, version), model, gpu, weight, kv, (tp, pp, replicas)) in enumerate(combos):
        spec = LaunchSpec(model_id=model, gpu_id=gpu, tp=tp, pp=pp, replicas=replicas, weight_dtype=weight,
                          kv_dtype=kv, engine=engine, engine_version=version, **_KNOBS[n % len(_KNOBS)])
        try:
            out = render_launch(spec, catalog)
        except LaunchError as exc:
            assert str(exc)
            errors += 1
            continue
        check_render(out)
        rendered[(engine, version)] = rendered.get((engine, version), 0) + 1
    assert set(rendered) == set(ENGINE_VERSIONS)
    assert min(rendered.values()) >= 150, rendered
    assert errors > 0


# --------------------------------------------------------------------------------------------------
# Golden files


GOLDEN_CASES: dict[str, LaunchSpec] = {
    "vllm-llama31-8b-bf16-l4": LaunchSpec(
        "meta-llama/Llama-3.1-8B-Instruct", "l4", tp=1, pp=1, replicas=1, weight_dtype="bf16", kv_dtype="auto",
        engine="vllm", max_model_len=8192, max_num_seqs=64, gpu_memory_utilization=0.9),
    "trtllm-llama31-70b-fp8-h100sxm-tp4": LaunchSpec(
        "meta-llama/Llama-3.1-70B-Instruct", "h100-sxm", tp=4, pp=1, replicas=1, weight_dtype="fp8",
        kv_dtype="fp8", engine="trtllm", max_num_seqs=256, max_num_batched_tokens=8192, max_model_len=32768,
        kv_cache_free_gpu_memory_fraction=0.9, enable_chunked_prefill=True),
    "vllm-llama31-70b-awq-a100-80gb-sxm-tp2": LaunchSpec(
        "meta-llama/Llama-3.1-70B-Instruct", "a100-80gb-sxm", tp=2, pp=1, replicas=1, weight_dtype="int4-awq",
        kv_dtype="auto", engine="vllm", max_model_len=16384, max_num_seqs=128),
    "vllm-qwen3-30b-a3b-fp8-h200-tp2": LaunchSpec(
        "Qwen/Qwen3-30B-A3B", "h200-sxm", tp=2, pp=1, replicas=1, weight_dtype="fp8", kv_dtype="fp8",
        engine="vllm", max_model_len=32768, max_num_seqs=512, max_num_batched_tokens=8192),
    "vllm-llama31-8b-bf16-a10g-x4": LaunchSpec(
        "meta-llama/Llama-3.1-8B-Instruct", "a10g", tp=1, pp=1, replicas=4, weight_dtype="bf16", kv_dtype="auto",
        engine="vllm", max_model_len=8192),
    "vllm-llama31-8b-fp16-t4-tp2": LaunchSpec(
        "meta-llama/Llama-3.1-8B-Instruct", "t4", tp=2, pp=1, replicas=1, weight_dtype="fp16", kv_dtype="auto",
        engine="vllm", max_model_len=4096, max_num_seqs=32),
    "vllm0110-llama31-70b-fp8-mi300x-x2": LaunchSpec(
        "meta-llama/Llama-3.1-70B-Instruct", "mi300x", tp=1, pp=1, replicas=2, weight_dtype="fp8", kv_dtype="fp8",
        engine="vllm", engine_version="0.11.0", gpu_memory_utilization=0.9, max_num_seqs=256),
    "trtllm-qwen3-30b-a3b-bf16-h100sxm-tp2-x2": LaunchSpec(
        "Qwen/Qwen3-30B-A3B", "h100-sxm", tp=2, pp=1, replicas=2, weight_dtype="bf16", kv_dtype="auto",
        engine="trtllm", max_num_seqs=128, enable_prefix_caching=False),
    "vllm-llama31-8b-bf16-h100sxm-eagle3-offload": LaunchSpec(
        "meta-llama/Llama-3.1-8B-Instruct", "h100-sxm", tp=1, pp=1, replicas=1, weight_dtype="bf16",
        kv_dtype="auto", engine="vllm", engine_version="0.34.0", max_model_len=8192, enable_prefix_caching=True,
        speculative=SpeculativeLaunch("eagle3", 3, "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"),
        cpu_offload_gb=4.0),
    "vllm0110-llama31-8b-bf16-h100sxm-ngram": LaunchSpec(
        "meta-llama/Llama-3.1-8B-Instruct", "h100-sxm", tp=1, pp=1, replicas=1, weight_dtype="bf16",
        kv_dtype="auto", engine="vllm", engine_version="0.11.0", max_model_len=8192, enable_prefix_caching=True,
        speculative=SpeculativeLaunch("ngram", 4)),
    "trtllm-deepseek-r1-fp8-h200-tp8-mtp": LaunchSpec(
        "deepseek-ai/DeepSeek-R1", "h200-sxm", tp=8, pp=1, replicas=1, weight_dtype="fp8", kv_dtype="auto",
        engine="trtllm", max_model_len=16384, enable_prefix_caching=True, speculative=SpeculativeLaunch("mtp", 1)),
    # a host KV tier (kv_offload_gb, GB per GPU) on vLLM 0.34.0 at TP 2 and on TensorRT-LLM 1.2
    "vllm-llama31-70b-fp8-h100sxm-tp2-kvoffload": LaunchSpec(
        "meta-llama/Llama-3.1-70B-Instruct", "h100-sxm", tp=2, pp=1, replicas=1, weight_dtype="fp8", kv_dtype="fp8",
        engine="vllm", engine_version="0.34.0", max_model_len=16384, kv_offload_gb=100.0),
    "trtllm-llama31-8b-bf16-h100sxm-kvoffload": LaunchSpec(
        "meta-llama/Llama-3.1-8B-Instruct", "h100-sxm", tp=1, pp=1, replicas=1, weight_dtype="bf16", kv_dtype="auto",
        engine="trtllm", max_model_len=8192, kv_offload_gb=64.0),
    # attention data parallelism + expert parallelism: DeepSeek-R1 (FP8 as released) on 8 x H200, tp 1 dp 8 ep 8
    "vllm-deepseek-r1-fp8-h200-dp8-ep8": LaunchSpec(
        "deepseek-ai/DeepSeek-R1", "h200-sxm", tp=1, pp=1, replicas=1, weight_dtype="fp8", kv_dtype="fp8",
        engine="vllm", max_model_len=8192, max_num_seqs=256, dp=8, ep=8),
    "trtllm-deepseek-r1-fp8-h200-dp8-ep8": LaunchSpec(
        "deepseek-ai/DeepSeek-R1", "h200-sxm", tp=1, pp=1, replicas=1, weight_dtype="fp8", kv_dtype="fp8",
        engine="trtllm", max_model_len=8192, max_num_seqs=256, dp=8, ep=8),
}


def test_levers_render_as_the_engines_spell_them(catalog: Catalog) -> None:
    vllm = render_launch(GOLDEN_CASES["vllm-llama31-8b-bf16-h100sxm-eagle3-offload"], catalog)["args"]
    # 4 GB = 4e9 / 2^30 GiB: vLLM's --cpu-offload-gb is in GiB
    assert vllm[vllm.index("--cpu-offload-gb") + 1] == "3.725"
    config = json.loads(vllm[vllm.index("--speculative-config") + 1])
    assert config == {"method": "eagle3", "num_speculative_tokens": 3,
                      "model": "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"}
    # prefix caching is on by default for generate models (vllm-0.11.0.yaml defaults_by_device.adjustments)
    assert "--enable-prefix-caching" not in vllm
    trt = yaml.safe_load(render_launch(GOLDEN_CASES["trtllm-deepseek-r1-fp8-h200-tp8-mtp"], catalog)["files"][
        "extra_llm_api_options.yaml"])
    assert trt["speculative_config"] == {"decoding_type": "MTP", "num_nextn_predict_layers": 1}
    assert "kv_cache_config" not in trt          # block reuse is on by default in 1.2


def test_kv_offload_renders_as_the_engines_spell_it(catalog: Catalog) -> None:
    vllm = render_launch(GOLDEN_CASES["vllm-llama31-70b-fp8-h100sxm-tp2-kvoffload"], catalog)["args"]
    # --kv-offloading-size is the instance's total over its TP ranks, in GiB: 100 GB x 2 GPUs = 2e11 / 2^30
    assert vllm[vllm.index("--kv-offloading-size") + 1] == "186.265"
    assert vllm[vllm.index("--kv-offloading-backend") + 1] == "native"
    trt = yaml.safe_load(render_launch(GOLDEN_CASES["trtllm-llama31-8b-bf16-h100sxm-kvoffload"], catalog)["files"][
        "extra_llm_api_options.yaml"])
    # host_cache_size is bytes, per rank: 64 GB
    assert trt["kv_cache_config"] == {"host_cache_size": 64_000_000_000}


@pytest.mark.parametrize(("kw", "message"), [
    ({"engine": "trtllm", "cpu_offload_gb": 4.0}, "no weight offload"),
    ({"engine_version": "0.11.0", "kv_offload_gb": 10.0}, "kv-offloading-size"),
    ({"speculative": SpeculativeLaunch("eagle3", 3)}, "draft repository"),
])
def test_levers_that_cannot_render_raise(kw: dict[str, Any], message: str, catalog: Catalog) -> None:
    spec = LaunchSpec("meta-llama/Llama-3.1-8B-Instruct", "h100-sxm", tp=1, pp=1, replicas=1, weight_dtype="bf16",
                      kv_dtype="auto", **{"engine": "vllm", **kw})
    with pytest.raises(LaunchError, match=message):
        render_launch(spec, catalog)


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_golden(name: str, catalog: Catalog) -> None:
    out = render_launch(GOLDEN_CASES[name], catalog)
    check_render(out)
    text = json.dumps(out, indent=2, sort_keys=True) + "\n"
    path = GOLDEN_DIR / f"{name}.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} missing: run with UPDATE_GOLDEN=1"
    assert json.loads(path.read_text(encoding="utf-8")) == json.loads(text), f"{name} differs from {path}"


def test_golden_cases_say_what_the_issue_asks(catalog: Catalog) -> None:
    def render(name: str) -> dict[str, Any]:
        return render_launch(GOLDEN_CASES[name], catalog)

    l4 = render("vllm-llama31-8b-bf16-l4")
    assert l4["args"][0] == "meta-llama/Llama-3.1-8B-Instruct" and "--tensor-parallel-size" not in l4["args"]
    t4 = render("vllm-llama31-8b-fp16-t4-tp2")
    assert t4["args"][t4["args"].index("--dtype") + 1] == "half"
    awq = render("vllm-llama31-70b-awq-a100-80gb-sxm-tp2")
    assert awq["model"] == "./Llama-3.1-70B-Instruct-awq-int4" and "--quantization" not in awq["args"]
    assert awq["steps"] and "AWQModifier" in awq["files"]["quantize_awq_int4.py"]
    moe = render("vllm-qwen3-30b-a3b-fp8-h200-tp2")
    assert "--enable-expert-parallel" in moe["args"]
    assert moe["args"][moe["args"].index("--quantization") + 1] == "fp8"
    assert "--max-num-batched-tokens" not in moe["args"]            # 8192 = the H200 device-class default
    trt = render("trtllm-llama31-70b-fp8-h100sxm-tp4")
    assert trt["args"][:3] == ["./Llama-3.1-70B-Instruct-fp8", "--tp_size", "4"]
    assert "--backend" not in trt["args"] and "--max_num_tokens" not in trt["args"]
    assert "--kv_cache_free_gpu_memory_fraction" not in trt["args"]   # 0.9 = default
    options = yaml.safe_load(trt["files"]["extra_llm_api_options.yaml"])
    assert options["kv_cache_config"]["dtype"] == "fp8" and options["enable_chunked_prefill"] is True
    assert options["cuda_graph_config"] == {"enable_padding": True, "max_batch_size": 256}
    assert "--qformat fp8" in trt["steps"][-1]["command"]
    x4 = render("vllm-llama31-8b-bf16-a10g-x4")
    assert x4["replicas"]["mode"] == "data-parallel" and "--data-parallel-size" in x4["args"]
    trt_x2 = render("trtllm-qwen3-30b-a3b-bf16-h100sxm-tp2-x2")
    assert trt_x2["replicas"]["mode"] == "separate-servers" and len(trt_x2["replicas"]["servers"]) == 2
    dp_vllm = render("vllm-deepseek-r1-fp8-h200-dp8-ep8")
    assert dp_vllm["args"][:5] == ["deepseek-ai/DeepSeek-R1", "--kv-cache-dtype", "fp8", "--data-parallel-size", "8"]
    assert "--enable-expert-parallel" in dp_vllm["args"] and "--tensor-parallel-size" not in dp_vllm["args"]
    assert not dp_vllm["steps"] and dp_vllm["replicas"]["mode"] == "single"
    dp_trt = render("trtllm-deepseek-r1-fp8-h200-dp8-ep8")
    assert dp_trt["args"][dp_trt["args"].index("--tp_size") + 1] == "8" and "--ep_size" not in dp_trt["args"]
    dp_options = yaml.safe_load(dp_trt["files"]["extra_llm_api_options.yaml"])
    assert dp_options["enable_attention_dp"] is True
    assert (dp_options["moe_expert_parallel_size"], dp_options["moe_tensor_parallel_size"]) == (8, 1)
    amd = render("vllm0110-llama31-70b-fp8-mi300x-x2")
    assert "rocm" in amd["image"] and "/dev/kfd" in amd["container"] and "--gpus" not in amd["container"]


# --------------------------------------------------------------------------------------------------
# Defaults are not restated


def _spec(**kw: Any) -> LaunchSpec:
    base: dict[str, Any] = {"model_id": "meta-llama/Llama-3.1-8B-Instruct", "gpu_id": "h100-sxm", "tp": 1, "pp": 1,
                            "replicas": 1, "weight_dtype": "bf16", "kv_dtype": "auto", "engine": "vllm"}
    base.update(kw)
    return LaunchSpec(**base)


@pytest.mark.parametrize(("kw", "flag"), [
    ({"engine_version": "0.11.0", "gpu_memory_utilization": 0.9}, "--gpu-memory-utilization"),
    ({"engine_version": "0.34.0", "gpu_memory_utilization": 1.0}, "--gpu-memory-utilization"),
    ({"gpu_id": "l4", "max_num_seqs": 256, "max_num_batched_tokens": 2048}, "--max-num-seqs"),
    ({"gpu_id": "l4", "max_num_seqs": 256, "max_num_batched_tokens": 2048}, "--max-num-batched-tokens"),
    ({"gpu_id": "h100-sxm", "max_num_seqs": 1024, "max_num_batched_tokens": 8192}, "--max-num-seqs"),
    ({"gpu_id": "a100-80gb-sxm", "max_num_batched_tokens": 2048}, "--max-num-batched-tokens"),
    ({"gpu_id": "b200", "engine_version": "0.34.0", "max_num_batched_tokens": 16384}, "--max-num-batched-tokens"),
    ({"enable_chunked_prefill": True}, "--enable-chunked-prefill"),
    ({"enable_prefix_caching": True}, "--enable-prefix-caching"),
    ({"max_model_len": 131072}, "--max-model-len"),
    ({"tp": 1}, "--tensor-parallel-size"),
    ({"pp": 1}, "--pipeline-parallel-size"),
    ({"port": 8000}, "--port"),
    ({"kv_dtype": "bf16"}, "--kv-cache-dtype"),
    ({"engine": "trtllm", "kv_cache_free_gpu_memory_fraction": 0.9}, "--kv_cache_free_gpu_memory_fraction"),
    ({"engine": "trtllm", "max_num_seqs": 2048}, "--max_batch_size"),
    ({"engine": "trtllm", "max_num_batched_tokens": 8192}, "--max_num_tokens"),
    ({"engine": "trtllm"}, "--backend"),
    ({"engine": "trtllm", "port": 8000}, "--port"),
])
def test_default_is_not_restated(kw: dict[str, Any], flag: str, catalog: Catalog) -> None:
    out = render_launch(_spec(**kw), catalog)
    assert flag not in out["args"]
    assert not any(a.startswith(flag.replace("--enable-", "--no-enable-")) for a in out["args"][1:])


@pytest.mark.parametrize(("kw", "flag", "value"), [
    ({"engine_version": "0.34.0", "gpu_memory_utilization": 0.9}, "--gpu-memory-utilization", "0.9"),
    ({"engine_version": "0.11.0", "gpu_memory_utilization": 0.95}, "--gpu-memory-utilization", "0.95"),
    ({"gpu_id": "l4", "max_num_seqs": 1024}, "--max-num-seqs", "1024"),
    ({"gpu_id": "a100-80gb-sxm", "max_num_batched_tokens": 8192}, "--max-num-batched-tokens", "8192"),
    ({"engine_version": "0.11.0", "gpu_id": "b200", "max_num_batched_tokens": 16384},
     "--max-num-batched-tokens", "16384"),   # 0.11.0 has no >= 160 GiB class: B200's default is 8192 there
    ({"max_model_len": 8192}, "--max-model-len", "8192"),
    ({"port": 9000}, "--port", "9000"),
    ({"engine": "trtllm", "kv_cache_free_gpu_memory_fraction": 0.8}, "--kv_cache_free_gpu_memory_fraction", "0.8"),
    ({"engine": "trtllm", "max_num_seqs": 64}, "--max_batch_size", "64"),
    ({"engine": "trtllm"}, "--host", "0.0.0.0"),
])
def test_non_default_is_emitted(kw: dict[str, Any], flag: str, value: str, catalog: Catalog) -> None:
    args = render_launch(_spec(**kw), catalog)["args"]
    assert args[args.index(flag) + 1] == value


def test_bool_flags_use_the_versions_negative_form(catalog: Catalog) -> None:
    new = render_launch(_spec(engine_version="0.34.0", enable_chunked_prefill=False, enable_prefix_caching=False),
                        catalog)["args"]
    old = render_launch(_spec(engine_version="0.11.0", enable_chunked_prefill=False, enable_prefix_caching=False),
                        catalog)["args"]
    assert "--disable-chunked-prefill" in new and "--disable-prefix-caching" in new
    assert "--no-enable-chunked-prefill" in old and "--no-enable-prefix-caching" in old


def test_trtllm_yaml_only_differences_from_defaults(catalog: Catalog) -> None:
    plain_spec = _spec(engine="trtllm", enable_chunked_prefill=False, enable_prefix_caching=True)
    plain = yaml.safe_load(render_launch(plain_spec, catalog)["files"]["extra_llm_api_options.yaml"])
    assert "enable_chunked_prefill" not in plain and "kv_cache_config" not in plain
    changed = yaml.safe_load(render_launch(_spec(engine="trtllm", enable_chunked_prefill=True,
                                                 enable_prefix_caching=False, kv_dtype="fp8"),
                                           catalog)["files"]["extra_llm_api_options.yaml"])
    assert changed["enable_chunked_prefill"] is True
    assert changed["kv_cache_config"] == {"dtype": "fp8", "enable_block_reuse": False}
    paths = check_yaml_keys(changed, _raw_vocab("trtllm", "1.2")["yaml_keys"])
    assert "kv_cache_config.enable_block_reuse" in paths and "cuda_graph_config.max_batch_size" in paths


# --------------------------------------------------------------------------------------------------
# Checkpoints and quantisation steps


@pytest.mark.parametrize(("weight", "modifier", "scheme"), [
    ("int4-awq", "AWQModifier", "W4A16_ASYM"),
    ("int4-gptq", "GPTQModifier", "W4A16"),
    ("int8-sq", "SmoothQuantModifier", "W8A8"),
    ("nvfp4", "QuantizationModifier", "NVFP4"),
])
def test_vllm_quantisation_step_serves_its_output(weight: str, modifier: str, scheme: str, catalog: Catalog) -> None:
    gpu = "b200" if weight == "nvfp4" else "h100-sxm"
    out = render_launch(_spec(weight_dtype=weight, gpu_id=gpu), catalog)
    (script_name, script), = out["files"].items()
    compile(script, script_name, "exec")
    assert "from llmcompressor import oneshot" in script and modifier in script and f'"{scheme}"' in script
    assert f'SAVE_DIR = "{out["model"]}"' in script and out["model"].startswith("./Llama-3.1-8B-Instruct-")
    assert out["args"][0] == out["model"] and "--quantization" not in out["args"]
    assert out["args"][out["args"].index("--served-model-name") + 1] == "meta-llama/Llama-3.1-8B-Instruct"
    assert [s["command"] for s in out["steps"]] == ["pip install llmcompressor", f"python {script_name}"]
    assert '"$PWD":/workspace' in out["container"]


def test_moe_awq_is_symmetric_and_keeps_router_gates(catalog: Catalog) -> None:
    out = render_launch(_spec(model_id="Qwen/Qwen3-30B-A3B", weight_dtype="int4-awq", tp=2), catalog)
    script = next(iter(out["files"].values()))
    assert 'scheme="W4A16"' in script and "mlp.gate$" in script


def test_prequantised_checkpoints_are_served_as_they_are(catalog: Catalog) -> None:
    fp8 = render_launch(_spec(model_id="Qwen/Qwen3-30B-A3B-FP8", weight_dtype="fp8", tp=2), catalog)
    assert fp8["args"][0] == "Qwen/Qwen3-30B-A3B-FP8" and "--quantization" not in fp8["args"] and not fp8["steps"]
    given = render_launch(_spec(model_id="meta-llama/Llama-3.1-70B-Instruct", weight_dtype="int4-awq", tp=2,
                                checkpoint="hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4"), catalog)
    assert given["args"][0] == "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4" and not given["steps"]
    gpt_oss = render_launch(_spec(model_id="openai/gpt-oss-20b", weight_dtype="mxfp4"), catalog)
    assert not gpt_oss["steps"] and "--quantization" not in gpt_oss["args"]
    trt = render_launch(_spec(engine="trtllm", model_id="nvidia/Llama-3.1-8B-Instruct-FP8", weight_dtype="fp8"),
                        catalog)
    assert trt["args"][0] == "nvidia/Llama-3.1-8B-Instruct-FP8" and not trt["steps"]


def test_a_release_that_ships_fp8_serves_its_published_dtypes_only(catalog: Catalog) -> None:
    # checkpoints.yaml: DeepSeek-R1 ships FP8, NVIDIA publishes NVFP4 checkpoints of it; DeepSeek-V3 has none
    fp8 = render_launch(_spec(model_id="deepseek-ai/DeepSeek-R1", gpu_id="h200-sxm", tp=8, weight_dtype="fp8"), catalog)
    assert fp8["args"][0] == "deepseek-ai/DeepSeek-R1" and not fp8["steps"] and "--quantization" not in fp8["args"]
    fp4 = render_launch(_spec(model_id="deepseek-ai/DeepSeek-R1", gpu_id="b200", tp=8, weight_dtype="nvfp4"),
                        catalog)
    assert fp4["args"][0] == "nvidia/DeepSeek-R1-FP4" and not fp4["steps"]
    with pytest.raises(CheckpointError, match=r"weight_dtype one of fp8$"):
        render_launch(_spec(model_id="deepseek-ai/DeepSeek-V3", gpu_id="b200", tp=8, weight_dtype="nvfp4"), catalog)
    with pytest.raises(CheckpointError, match="holds nvfp4 weights, not fp8"):
        render_launch(_spec(model_id="deepseek-ai/DeepSeek-R1", gpu_id="h200-sxm", tp=8, weight_dtype="fp8",
                            checkpoint="nvidia/DeepSeek-R1-FP4"), catalog)


def test_trtllm_modelopt_step(catalog: Catalog) -> None:
    out = render_launch(_spec(engine="trtllm", weight_dtype="int4-awq", gpu_id="a100-80gb-sxm"), catalog)
    ptq = shlex.split(out["steps"][-1]["command"])
    assert ptq[:2] == ["python", "Model-Optimizer/examples/llm_ptq/hf_ptq.py"]
    opts = dict(zip(ptq[2::2], ptq[3::2], strict=True))
    assert opts["--qformat"] == "int4_awq" and opts["--kv_cache_qformat"] == "none"
    assert opts["--export_path"] == out["model"] == "./Llama-3.1-8B-Instruct-awq-int4"
    assert opts["--qformat"] in _raw_vocab("trtllm", "1.2")["quantize"]["modelopt_hf_ptq"]["qformat"]["choices"]


def test_dynamic_fp8_and_fp8_kv_mapping(catalog: Catalog) -> None:
    args = render_launch(_spec(weight_dtype="fp8", kv_dtype="fp8"), catalog)["args"]
    assert args[args.index("--quantization") + 1] == "fp8" and args[args.index("--kv-cache-dtype") + 1] == "fp8"
    fp16_kv = render_launch(_spec(kv_dtype="fp16"), catalog)["args"]
    assert fp16_kv[fp16_kv.index("--kv-cache-dtype") + 1] == "float16"


def test_render_is_deterministic(catalog: Catalog) -> None:
    spec = GOLDEN_CASES["trtllm-qwen3-30b-a3b-bf16-h100sxm-tp2-x2"]
    assert render_launch(spec, catalog) == render_launch(spec, catalog)


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_separate_servers_over_many_nodes_each_name_their_own_gpus_and_port(engine: str, catalog: Catalog) -> None:
    # 20 TP2 servers on 8-GPU H100 nodes: 4 per node over 5 nodes; each server's command and container line
    # pin its own GPUs and publish its own port (a node's slots repeat on every node)
    out = render_launch(_spec(engine=engine, model_id="Qwen/Qwen3-30B-A3B", tp=2, replicas=20), catalog)
    servers = out["replicas"]["servers"]
    assert len(servers) == 20 and {s["node"] for s in servers} == set(range(5))
    for s in servers:
        first = 2 * (s["replica"] % 4)
        assert s["gpus"] == f"{first},{first + 1}"
        assert s["command"].startswith(f"CUDA_VISIBLE_DEVICES={s['gpus']} ")
        assert f"--port {s['host_port']}" in s["command"] or s["host_port"] == 8000
        assert f'device={s["gpus"]}' in s["container"] and f"-p {s['host_port']}:" in s["container"]
    assert len({s["host_port"] for s in servers}) == 4


def test_shell_quoting_of_odd_names(catalog: Catalog) -> None:
    out = render_launch(_spec(checkpoint="/models/my ckpt's dir"), catalog)
    assert shlex.split(out["command"])[2] == "/models/my ckpt's dir"


# --------------------------------------------------------------------------------------------------
# Impossible input


@pytest.mark.parametrize(("kw", "message"), [
    ({"engine_version": "0.9.0"}, "unknown vllm version"),
    ({"engine": "trtllm", "engine_version": "0.21"}, "unknown trtllm version"),
    ({"engine": "sglang"}, "unknown engine"),
    ({"gpu_id": "h1000"}, "unknown GPU"),
    ({"engine": "trtllm", "gpu_id": "mi300x"}, "does not run on AMD"),
    ({"gpu_id": "gaudi3"}, "does not run on INTEL"),
    ({"engine": "trtllm", "gpu_id": "t4", "weight_dtype": "fp16"}, "turing"),
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
    ({"gpu_memory_utilization": 0.0}, "gpu_memory_utilization"),
    ({"engine": "trtllm", "kv_cache_free_gpu_memory_fraction": 1.2}, "kv_cache_free_gpu_memory_fraction"),
    ({"tp": 0}, "tp must be"),
    ({"tp": 3}, "does not divide"),
    ({"max_model_len": 1_000_000}, "exceeds"),
    ({"gpu_id": "t4", "weight_dtype": "fp16"}, "GB per GPU"),
    ({"max_num_seqs": 512, "max_num_batched_tokens": 256}, "max_num_batched_tokens"),
    ({"enable_chunked_prefill": False, "max_model_len": 8192, "max_num_batched_tokens": 4096}, "chunked prefill"),
    ({"port": 70000}, "port"),
    ({"engine_version": "0.11.0", "gpu_id": "l4", "kv_dtype": "fp16"}, "--kv-cache-dtype"),
    ({"model_id": "deepseek-ai/DeepSeek-R1", "gpu_id": "h200-sxm", "tp": 8, "weight_dtype": "bf16"}, "ships fp8"),
    ({"weight_dtype": "mxfp4"}, "mxfp4"),
    ({"engine": "trtllm", "weight_dtype": "int4-gptq"}, "no ModelOpt recipe"),
    ({"model_id": "Qwen/Qwen3-30B-A3B-FP8", "weight_dtype": "int4-awq"}, "already ships fp8"),
])
def test_impossible_input_raises(kw: dict[str, Any], message: str, catalog: Catalog) -> None:
    with pytest.raises(LaunchError, match=message.replace("(", r"\(")):
        render_launch(_spec(**kw), catalog)


# --------------------------------------------------------------------------------------------------
# A vocabulary directory given by the caller


def test_vocab_dir_override(tmp_path: Path, catalog: Catalog) -> None:
    with pytest.raises(LaunchError, match="no flag vocabulary"):
        render_launch(_spec(), catalog, vocab_dir=tmp_path)
    raw = _raw_vocab("vllm", "0.34.0")
    del raw["flags"]["--max-model-len"]
    (tmp_path / "vllm-0.34.0.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert render_launch(_spec(), catalog, vocab_dir=tmp_path)["args"][0] == "meta-llama/Llama-3.1-8B-Instruct"
    with pytest.raises(LaunchError, match="has no flag --max-model-len"):
        render_launch(_spec(max_model_len=8192), catalog, vocab_dir=tmp_path)


@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B-Instruct", "deepseek-ai/DeepSeek-V3", "openai/gpt-oss-20b"])
def test_no_checkpoint_plan_fails_alike_on_every_gpu_and_layout(model: str, catalog: Catalog) -> None:
    # the recommender renders a CheckpointError once per engine version, weight dtype and KV dtype and passes
    # over that combination's other layouts unrendered: such a combination must fail, with the same message,
    # whatever the GPU, parallelism, replicas and settings
    layouts = [{"gpu_id": g, "tp": tp, "replicas": r, "max_num_seqs": seqs}
               for g, tp, r, seqs in itertools.product(["l4", "h100-sxm", "b200", "mi300x"], [1, 8], [1, 3],
                                                       [None, 64])]
    failing = 0
    for engine, version in (("vllm", None), ("vllm", "0.11.0"), ("trtllm", None)):
        for wd, kv in itertools.product([d.id for d in catalog.weight_dtypes], ["auto", "fp8"]):
            messages: set[str] = set()
            rendered = 0
            for lay in layouts:
                if engine == "trtllm" and lay["gpu_id"] == "mi300x":
                    continue
                try:
                    render_launch(_spec(model_id=model, engine=engine, engine_version=version, weight_dtype=wd,
                                        kv_dtype=kv, **lay), catalog)
                    rendered += 1
                except CheckpointError as exc:
                    messages.add(str(exc))
                except LaunchError:
                    pass
            if messages:
                failing += 1
                assert rendered == 0 and len(messages) == 1, (engine, version, wd, kv)
    assert failing
