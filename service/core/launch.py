"""Launch commands for a deployment: the exact `vllm serve` / `trtllm-serve` line an operator runs.

Pure Python: reads the catalog (``gpu_catalog.loader.Catalog``) and the per-version flag vocabularies in
``gpu_catalog/data/engines/<engine>-<version>.yaml`` (flags extracted from the engines' own parsers).
Every flag and YAML key the renderer emits is checked against the vocabulary of the targeted version,
with its type, range and choices, so a render either yields a command that version accepts or raises
``LaunchError``.

Rules (shared/catalog/ENGINES.md):
- emit only what the deployment needs; nothing that restates the version's default (for vLLM's
  max_num_seqs / max_num_batched_tokens the default depends on the device class, `defaults_by_device`);
- the checkpoint: the original for FP16/BF16/dynamic FP8 (vLLM), a pre-quantised one when the model id
  names one, otherwise a quantisation step (llm-compressor for vLLM, ModelOpt `hf_ptq.py` for TensorRT-LLM)
  whose output directory is then served;
- deterministic output: fixed flag order, sorted YAML keys, `shlex` quoting.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from gpu_catalog.loader import DATA_DIR, Catalog
from gpu_catalog.schema import EngineSpec, GpuSpec, KvDtypeSpec, ModelSpec, WeightDtypeSpec
from service.core.engine_defaults import known_versions, read_engine_file

VOCAB_DIR = DATA_DIR / "engines"
DEFAULT_PORT = 8000

# Pre-SM80 CUDA GPUs have no BF16: vLLM needs --dtype half there (ENGINES.md §1, `--dtype` row:
# vllm/platforms/cuda.py; TRT-LLM BaseLlmArgs.validate_dtype raises on bfloat16 below SM80).
_NO_BF16_ARCHITECTURES = frozenset({"volta", "turing"})

# vLLM leaves --enable-chunked-prefill / --enable-prefix-caching at None and decides at start-up; for
# generate models both resolve to True (ENGINES.md §1; vllm-0.11.0.yaml defaults_by_device.adjustments).
_VLLM_CHUNKED_PREFILL_DEFAULT = True
_VLLM_PREFIX_CACHING_DEFAULT = True

# Catalog kv dtype id -> `vllm serve --kv-cache-dtype` value (config/cache.py CacheDType).
_VLLM_KV_DTYPE = {"fp8": "fp8", "fp16": "float16", "bf16": "bfloat16"}

# Tokens of a repository name that mark a checkpoint already quantised to a weight dtype
# ("Qwen/Qwen3-30B-A3B-FP8", "hugging-quants/...-AWQ-INT4", "nvidia/Qwen3-32B-NVFP4", "...quantized.w4a16").
_PREQUANT_NAME_TOKENS: dict[str, tuple[str, ...]] = {
    "nvfp4": ("nvfp4", "fp4"),
    "mxfp4": ("mxfp4",),
    "w4a8-awq": ("w4a8",),
    "int4-awq": ("awq",),
    "int4-gptq": ("gptq", "w4a16"),
    "int8-sq": ("w8a8", "int8", "smoothquant"),
    "fp8": ("fp8",),
}

# Catalog families whose original checkpoint already ships quantised weights (catalog model notes:
# DeepSeek-V3/R1 "weights ship as FP8 block-scaled", MiniMax-M2.5 "Weights released in FP8",
# gpt-oss "Released weights are MXFP4 for the experts").
_NATIVE_WEIGHT_DTYPE_BY_FAMILY = {
    "deepseek-v3": "fp8", "deepseek-r1": "fp8", "minimax-m2.5": "fp8",
    "gpt-oss-20b": "mxfp4", "gpt-oss-120b": "mxfp4",
}

# Expert parallelism is chosen for MoE models with many small experts (Qwen3-MoE 128, DeepSeek 256, ...):
# whole experts per GPU instead of slicing every expert's width by TP. Few large experts (Mixtral's 8)
# keep TP-sharded experts, which balances better.
_EP_MIN_EXPERTS = 16

# CUDA-graph capture cap for TRT-LLM: larger batches run without graphs. 512 is the cap NVIDIA's own
# DeepSeek-R1 trtllm-serve example uses (cuda_graph_config.max_batch_size 512 with max_batch_size 1024,
# docs examples/deepseek_r1_reasoning_parser) and vLLM's default max_cudagraph_capture_size (ENGINES.md §1).
_TRTLLM_CUDA_GRAPH_MAX_BATCH = 512
TRTLLM_EXTRA_OPTIONS_FILE = "extra_llm_api_options.yaml"

# Containers. NVIDIA flags for TRT-LLM: NVIDIA/TensorRT-LLM quick-start-guide ("docker run --rm -it --ipc host
# --gpus all --ulimit memlock=-1 --ulimit stack=67108864 -p 8000:8000 nvcr.io/nvidia/tensorrt-llm/release:...").
# vLLM: docs/deployment/docker.md ("--gpus all -v ~/.cache/huggingface:/root/.cache/huggingface
# --env HF_TOKEN -p 8000:8000 --ipc=host vllm/vllm-openai:<tag>"; the image's ENTRYPOINT is `vllm serve`).
# ROCm: the vocabularies name no ROCm image. vLLM publishes `vllm/vllm-openai-rocm` (tags v0.14.0, v0.19.0,
# v0.23.0 and `nightly` seen in public deployment scripts, entrypoint `vllm serve`); the v<version> tag for the
# versions here was not seen. Device flags from AMD's ROCm vLLM docs (rocm.docs.amd.com ... inference/vllm).
_VLLM_ROCM_IMAGE = "vllm/vllm-openai-rocm:v{version}"
_ROCM_DOCKER_FLAGS = ("--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video",
                      "--security-opt", "seccomp=unconfined")
_HF_CACHE_MOUNT = '"$HOME/.cache/huggingface":/root/.cache/huggingface'
_WORKDIR_MOUNT = '"$PWD":/workspace'

# ModelOpt post-training quantisation (NVIDIA/Model-Optimizer examples/llm_ptq/hf_ptq.py @003e0fb: argparse
# --pyt_ckpt_path, --qformat, --kv_cache_qformat (default fp8_cast), --export_fmt (deprecated, default hf;
# older releases defaulted to tensorrt_llm, so it is passed explicitly), --export_path). TRT-LLM's docs
# (features/quantization.md) clone NVIDIA/Model-Optimizer and run examples/llm_ptq inside the release image.
_MODELOPT_REPO = "https://github.com/NVIDIA/Model-Optimizer.git"
_MODELOPT_QFORMAT = {"fp8": "fp8", "int4-awq": "int4_awq", "w4a8-awq": "w4a8_awq", "nvfp4": "nvfp4",
                     "int8-sq": "int8_sq"}

# Output-directory suffix per quantised weight dtype: ./<repo basename>-<suffix>.
_CHECKPOINT_SUFFIX = {"fp8": "fp8", "int4-awq": "awq-int4", "int4-gptq": "gptq-int4", "int8-sq": "w8a8-int8",
                      "w4a8-awq": "w4a8-awq", "nvfp4": "nvfp4"}


class LaunchError(ValueError):
    """The deployment cannot be rendered: unknown engine version, unsupported combination, bad value."""


class CheckpointError(LaunchError):
    """No checkpoint plan for the weight dtype. The model, its ``checkpoint``, the engine version, the weight dtype
    and the KV dtype (TensorRT-LLM's quantisation step takes it) decide it, whatever the GPU, parallelism and
    settings."""


@dataclass(frozen=True)
class LaunchSpec:
    model_id: str            # HF repo id to serve (the user's name for it)
    gpu_id: str
    tp: int
    pp: int
    replicas: int
    weight_dtype: str        # catalog weight dtype id
    kv_dtype: str            # catalog kv dtype id: auto, fp16, bf16, fp8, int8
    engine: str              # vllm | trtllm
    engine_version: str | None = None   # None = engines.yaml default_version
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None             # vllm: fraction of TOTAL device memory
    kv_cache_free_gpu_memory_fraction: float | None = None  # trtllm: fraction of memory FREE after weights
    enable_chunked_prefill: bool | None = None
    enable_prefix_caching: bool | None = None
    checkpoint: str | None = None   # a pre-quantised checkpoint the user names; None = derive from model_id
    port: int = DEFAULT_PORT


# --------------------------------------------------------------------------------------------------
# Vocabulary


@dataclass(frozen=True)
class FlagSpec:
    """One command-line flag of one engine version, as its own parser declares it."""

    name: str
    type: str                                 # int | float | str | bool | bool-optional | json | path ...
    default: Any = None
    choices: tuple[str, ...] | None = None
    min_value: float | None = None
    max_value: float | None = None
    min_exclusive: bool = False
    max_exclusive: bool = False
    aliases: tuple[str, ...] = ()
    negative: str | None = None               # `--no-x` / `--disable-x` form of a bool-optional flag
    multiple: bool = False

    @property
    def takes_value(self) -> bool:
        return self.type not in ("bool", "bool-optional")

    def parse(self, raw: str) -> int | float | str:
        """The typed value of a command-line string; ValueError when it is not of the flag's type."""
        if self.type == "int":
            return int(raw)
        if self.type == "float":
            return float(raw)
        return raw

    def problem(self, value: object) -> str | None:
        """Why `value` is not acceptable for this flag, or None when it is."""
        if not self.takes_value:
            return None if value is None else f"{self.name} takes no value"
        if self.type == "int":
            if not isinstance(value, int) or isinstance(value, bool):
                return f"{self.name} needs an integer, got {value!r}"
        elif self.type == "float":
            if not isinstance(value, int | float) or isinstance(value, bool):
                return f"{self.name} needs a number, got {value!r}"
        elif not isinstance(value, str):
            return f"{self.name} needs a string, got {value!r}"
        if isinstance(value, int | float):
            if self.min_value is not None and (
                    value < self.min_value or (self.min_exclusive and value == self.min_value)):
                op = ">" if self.min_exclusive else ">="
                return f"{self.name} must be {op} {self.min_value:g}, got {value}"
            if self.max_value is not None and (
                    value > self.max_value or (self.max_exclusive and value == self.max_value)):
                op = "<" if self.max_exclusive else "<="
                return f"{self.name} must be {op} {self.max_value:g}, got {value}"
        if self.choices is not None and str(value) not in self.choices:
            return f"{self.name} must be one of {', '.join(self.choices)}; got {value!r}"
        return None


@dataclass(frozen=True)
class YamlKeySpec:
    """One key of the TRT-LLM `--extra_llm_api_options` YAML (dotted path for nested keys)."""

    path: str
    type: str                                 # object | int | float | str | bool | list[int] ...
    default: Any = None
    choices: tuple[str, ...] | None = None
    min_value: float | None = None
    max_value: float | None = None

    def problem(self, value: object) -> str | None:
        kind = self.type
        if kind == "object":
            return None if isinstance(value, dict) or value is None else f"{self.path} needs a mapping"
        if kind == "bool":
            ok = isinstance(value, bool)
        elif kind == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind == "float":
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        elif kind == "str":
            ok = isinstance(value, str)
        elif kind.startswith("list"):
            ok = isinstance(value, list)
        else:
            ok = True
        if not ok:
            return f"{self.path} needs a value of type {kind}, got {value!r}"
        if isinstance(value, int | float) and not isinstance(value, bool):
            if self.min_value is not None and value < self.min_value:
                return f"{self.path} must be >= {self.min_value:g}, got {value}"
            if self.max_value is not None and value > self.max_value:
                return f"{self.path} must be <= {self.max_value:g}, got {value}"
        if self.choices is not None and isinstance(value, str) and value not in self.choices:
            return f"{self.path} must be one of {', '.join(self.choices)}; got {value!r}"
        return None


@dataclass(frozen=True)
class Vocabulary:
    """The flags (and, for TRT-LLM, the YAML keys) one engine version accepts."""

    engine: str
    version: str
    executable: tuple[str, ...]               # ("vllm", "serve") / ("trtllm-serve",)
    image: str | None
    image_verified: bool
    flags: Mapping[str, FlagSpec]             # canonical name -> spec
    spellings: Mapping[str, str]              # every accepted spelling (aliases, negative forms) -> canonical
    yaml_keys: Mapping[str, YamlKeySpec]      # dotted path -> spec (empty for vLLM)
    raw: Mapping[str, Any] = field(repr=False)  # the whole vocabulary file (defaults_by_device, quantize, ...)

    def flag(self, spelling: str) -> FlagSpec | None:
        canonical = self.spellings.get(spelling)
        return self.flags[canonical] if canonical else None

    def flag_default(self, spelling: str) -> Any:
        spec = self.flag(spelling)
        return spec.default if spec else None

    def yaml_default(self, path: str) -> Any:
        spec = self.yaml_keys.get(path)
        return spec.default if spec else None


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _choices(v: object) -> tuple[str, ...] | None:
    return tuple(str(c) for c in v) if isinstance(v, list) else None


def _flag_spec(name: str, entry: Mapping[str, Any]) -> FlagSpec:
    return FlagSpec(
        name=name, type=str(entry.get("type", "str")), default=entry.get("default"),
        choices=_choices(entry.get("choices")), min_value=_num(entry.get("min")), max_value=_num(entry.get("max")),
        min_exclusive=bool(entry.get("min_exclusive", False)), max_exclusive=bool(entry.get("max_exclusive", False)),
        aliases=tuple(entry.get("aliases") or ()) + tuple(entry.get("hidden_aliases") or ()),
        negative=entry.get("negative"), multiple=bool(entry.get("multiple", False)),
    )


def _yaml_keys(tree: Mapping[str, Any], prefix: str = "") -> dict[str, YamlKeySpec]:
    out: dict[str, YamlKeySpec] = {}
    for key, entry in tree.items():
        path = f"{prefix}{key}"
        entry = entry if isinstance(entry, dict) else {}
        out[path] = YamlKeySpec(path=path, type=str(entry.get("type", "str")), default=entry.get("default"),
                                choices=_choices(entry.get("choices")), min_value=_num(entry.get("min")),
                                max_value=_num(entry.get("max")))
        if isinstance(entry.get("keys"), dict):
            out.update(_yaml_keys(entry["keys"], prefix=f"{path}."))
    return out


def warm_up(vocab_dir: Path | None = None) -> int:
    """Read every engine's flag vocabulary before a request needs it: each is read once per process (for the
    renderer and for the engine defaults), and the server's first recommendation paid ~0.9 s of its 0.98 s
    for them with PyYAML's pure-Python parser (this takes ~0.03 s with libyaml). The number of files read."""
    files = 0
    for path in sorted(_resolved(vocab_dir or VOCAB_DIR).glob("*-*.yaml")):
        engine, version = path.stem.split("-", 1)
        if version in known_versions(engine):
            vocabulary(engine, version, vocab_dir)
            files += 1
    return files


@lru_cache(maxsize=16)
def _load_vocabulary(engine: str, version: str, vocab_dir: Path) -> Vocabulary:
    path = vocab_dir / f"{engine}-{version}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in vocab_dir.glob(f"{engine}-*.yaml"))
        raise LaunchError(f"no flag vocabulary for {engine} {version} (looked for {path.name}; "
                          f"known: {', '.join(known) or 'none'})")
    raw = read_engine_file(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("flags"), dict):
        raise LaunchError(f"{path.name} is not a flag vocabulary (no 'flags' mapping)")
    flags = {name: _flag_spec(name, entry or {}) for name, entry in raw["flags"].items()}
    spellings: dict[str, str] = {}
    for spec in flags.values():
        for spelling in (spec.name, *spec.aliases, *([spec.negative] if spec.negative else [])):
            spellings.setdefault(spelling, spec.name)
    return Vocabulary(
        engine=engine, version=version, executable=tuple(str(raw.get("command", engine)).split()),
        image=raw.get("image"), image_verified=bool(raw.get("image_verified", True)),
        flags=flags, spellings=spellings, yaml_keys=_yaml_keys(raw.get("yaml_keys") or {}), raw=raw,
    )


def vocabulary(engine: str, version: str, vocab_dir: Path | None = None) -> Vocabulary:
    """The flag vocabulary of one engine version: flag names with type/default/min/max/choices, every
    accepted spelling, and (TRT-LLM) the `--extra_llm_api_options` YAML keys as dotted paths."""
    return _load_vocabulary(engine, version, _resolved(vocab_dir or VOCAB_DIR))


@lru_cache(maxsize=16)
def _resolved(path: Path) -> Path:
    """``path.resolve()``, once per path (it asks the file system; every launch rendered looks it up)."""
    return path.resolve()


# --------------------------------------------------------------------------------------------------
# Resolution and checks shared by both engines


@dataclass(frozen=True)
class _Context:
    spec: LaunchSpec
    engine: EngineSpec
    version: str
    vocab: Vocabulary
    gpu: GpuSpec
    model: ModelSpec | None
    weight: WeightDtypeSpec
    kv: KvDtypeSpec


def _by_id(items: list[Any], key: str, what: str) -> Any:
    for item in items:
        if item.id == key:
            return item
    known = ", ".join(sorted(i.id for i in items))
    raise LaunchError(f"unknown {what} '{key}' (known: {known})")


def _resolve(spec: LaunchSpec, catalog: Catalog, vocab_dir: Path | None) -> _Context:
    engine: EngineSpec = _by_id(catalog.engines, spec.engine, "engine")
    version = spec.engine_version or engine.default_version
    if version not in engine.versions:
        raise LaunchError(f"unknown {engine.id} version '{version}' (catalog versions: {', '.join(engine.versions)})")
    gpu: GpuSpec = _by_id(catalog.gpus, spec.gpu_id, "GPU")
    weight: WeightDtypeSpec = _by_id(catalog.weight_dtypes, spec.weight_dtype, "weight dtype")
    kv: KvDtypeSpec = _by_id(catalog.kv_dtypes, spec.kv_dtype, "KV-cache dtype")
    if gpu.vendor not in engine.vendors:
        raise LaunchError(f"{engine.name} does not run on {gpu.vendor.upper()} GPUs ({gpu.name}); "
                          f"it runs on: {', '.join(engine.vendors)}")
    supported = catalog.support_levels(engine.id, gpu.architecture)
    for kind, dtype in (("weight", weight.id), ("kv", kv.id)):
        if (kind, dtype) not in supported:
            raise LaunchError(f"{engine.name} does not run {kind} dtype '{dtype}' on {gpu.architecture} "
                              f"GPUs such as {gpu.name} (gpu_catalog/data/support.yaml)")
    vocab = vocabulary(engine.id, version, vocab_dir)
    return _Context(spec=spec, engine=engine, version=version, vocab=vocab, gpu=gpu,
                    model=catalog.resolve_model(spec.model_id), weight=weight, kv=kv)


def _check_values(ctx: _Context) -> None:
    s = ctx.spec
    if not s.model_id.strip():
        raise LaunchError("model_id is empty")
    for name, value in (("tp", s.tp), ("pp", s.pp), ("replicas", s.replicas)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise LaunchError(f"{name} must be an integer >= 1, got {value!r}")
    for name, opt in (("max_num_seqs", s.max_num_seqs), ("max_num_batched_tokens", s.max_num_batched_tokens),
                      ("max_model_len", s.max_model_len)):
        if opt is not None and (not isinstance(opt, int) or isinstance(opt, bool) or opt < 1):
            raise LaunchError(f"{name} must be an integer >= 1, got {opt!r}")
    if not 1 <= s.port <= 65535:
        raise LaunchError(f"port must be in 1..65535, got {s.port}")
    for name, frac in (("gpu_memory_utilization", s.gpu_memory_utilization),
                       ("kv_cache_free_gpu_memory_fraction", s.kv_cache_free_gpu_memory_fraction)):
        if frac is not None and not 0 < frac <= 1:
            raise LaunchError(f"{name} must be in (0, 1], got {frac}")
    if (s.max_num_seqs is not None and s.max_num_batched_tokens is not None
            and s.engine == "vllm" and s.max_num_batched_tokens < s.max_num_seqs):
        raise LaunchError(f"max_num_batched_tokens ({s.max_num_batched_tokens}) must be >= max_num_seqs "
                          f"({s.max_num_seqs}): vLLM's scheduler config rejects it")


def _check_model_fit(ctx: _Context) -> None:
    s, m = ctx.spec, ctx.model
    if m is None:
        return
    if m.num_attention_heads % s.tp:
        raise LaunchError(f"tp={s.tp} does not divide the {m.num_attention_heads} attention heads of {m.id}")
    if s.pp > m.num_layers:
        raise LaunchError(f"pp={s.pp} exceeds the {m.num_layers} layers of {m.id}")
    if s.max_model_len is not None and s.max_model_len > m.max_position_embeddings:
        raise LaunchError(f"max_model_len {s.max_model_len} exceeds the {m.max_position_embeddings}-token "
                          f"context of {m.id}")
    weights_gb_per_gpu = m.total_params_b * ctx.weight.bits_per_weight / 8 / (s.tp * s.pp)
    if weights_gb_per_gpu >= ctx.gpu.memory_gb:
        raise LaunchError(f"the {ctx.weight.name} weights of {m.id} need {weights_gb_per_gpu:.1f} GB per GPU at "
                          f"tp={s.tp} pp={s.pp}, more than the {ctx.gpu.memory_gb:g} GB of a {ctx.gpu.name}")


def _check_flag(vocab: Vocabulary, spelling: str, value: object = None) -> FlagSpec:
    spec = vocab.flag(spelling)
    if spec is None:
        raise LaunchError(f"{vocab.engine} {vocab.version} has no flag {spelling}")
    problem = spec.problem(value)
    if problem:
        raise LaunchError(f"{vocab.engine} {vocab.version}: {problem}")
    return spec


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return format(value, "g")
    return str(value)


class _Argv:
    """The argv after the executable, with every flag checked against the vocabulary as it is added."""

    def __init__(self, vocab: Vocabulary, positional: str) -> None:
        self.vocab = vocab
        self.items: list[str] = [positional]

    def add(self, spelling: str, value: object = None) -> None:
        spec = _check_flag(self.vocab, spelling, value)
        self.items.append(spelling)
        if spec.takes_value:
            self.items.append(_fmt(value))

    def switch(self, spelling: str, on: bool) -> None:
        """A bool-optional flag: its positive spelling for True, its negative form for False."""
        spec = _check_flag(self.vocab, spelling)
        if on:
            self.items.append(spelling)
        elif spec.negative:
            self.items.append(spec.negative)
        else:
            raise LaunchError(f"{self.vocab.engine} {self.vocab.version}: {spelling} has no negative form")


def _name_tokens(repo_id: str) -> set[str]:
    return {t for t in re.split(r"[-_.]", repo_id.rstrip("/").split("/")[-1].lower()) if t}


def _checkpoint_weight_dtype(model_id: str, model: ModelSpec | None) -> str | None:
    """The weight dtype a repo id already carries (from its name, or the catalog family's native format);
    None for an ordinary 16-bit checkpoint."""
    tokens = _name_tokens(model_id)
    for dtype, markers in _PREQUANT_NAME_TOKENS.items():
        if tokens.intersection(markers):
            return dtype
    if model is not None:
        return _NATIVE_WEIGHT_DTYPE_BY_FAMILY.get(model.family)
    return None


def _expert_parallel(ctx: _Context) -> bool:
    m = ctx.model
    return bool(m and m.num_experts and m.num_experts >= _EP_MIN_EXPERTS and ctx.spec.tp > 1
                and m.num_experts % ctx.spec.tp == 0)


def _dtype16(ctx: _Context) -> str | None:
    """The 16-bit activation dtype to pin: 'half' on pre-SM80, the requested 16-bit weight dtype otherwise."""
    if ctx.gpu.architecture in _NO_BF16_ARCHITECTURES:
        return "half"
    return {"bf16": "bfloat16", "fp16": "float16"}.get(ctx.weight.id)


# --------------------------------------------------------------------------------------------------
# Checkpoint: which one is served, and the quantisation steps that make it


@dataclass
class _Checkpoint:
    served: str                       # what the server loads: HF id or local output path
    local: bool                       # a directory produced by a step (or a user path)
    dynamic_fp8: bool = False         # vLLM quantises a 16-bit checkpoint to FP8 at load time
    steps: list[dict[str, str]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _output_dir(model_id: str, weight_dtype: str) -> str:
    return f"./{model_id.rstrip('/').split('/')[-1]}-{_CHECKPOINT_SUFFIX[weight_dtype]}"


def _plan_checkpoint(ctx: _Context) -> _Checkpoint:
    s, w = ctx.spec, ctx.weight.id
    if s.checkpoint:
        return _Checkpoint(served=s.checkpoint, local=s.checkpoint.startswith(("/", "./", "../")), notes=[
            f"Serving the named checkpoint {s.checkpoint}; it must already hold {ctx.weight.name} weights "
            "(its quantization config is read from the checkpoint)."])
    carried = _checkpoint_weight_dtype(s.model_id, ctx.model)
    if w in ("fp16", "bf16"):
        if carried is not None:
            raise CheckpointError(f"{s.model_id} ships {carried} weights, not {w}; name a 16-bit checkpoint "
                                  f"in `checkpoint` or pick weight_dtype {carried}")
        return _Checkpoint(served=s.model_id, local=False)
    if carried == w:
        return _Checkpoint(served=s.model_id, local=False, notes=[
            f"{s.model_id} is already a {ctx.weight.name} checkpoint: no quantisation step."])
    if carried is not None:
        raise CheckpointError(f"{s.model_id} already ships {carried} weights; re-quantising it to {w} is not "
                              f"supported: name a {w} checkpoint in `checkpoint`")
    if s.engine == "vllm":
        return _plan_vllm_checkpoint(ctx)
    return _plan_trtllm_checkpoint(ctx)


# llm-compressor recipes. API as in vllm-project/llm-compressor (search index):
#   examples/awq/llama_example.py @b6a4803 (AWQModifier(ignore=["lm_head"], scheme="W4A16_ASYM", targets=["Linear"]),
#     256 samples x 512 tokens), examples/awq/qwen3_moe_example.py @b6a4803 (MoE: scheme="W4A16" because vLLM
#     has no asymmetric MoE kernels; ignore "re:.*mlp.gate$", "re:.*mlp.shared_expert_gate$"),
#   examples/quantization_w4a16/llama3_example.py @feab612 (GPTQModifier(targets="Linear", scheme="W4A16")),
#   examples/quantization_w8a8_int8/llama3_example.py @6c081a6 (SmoothQuantModifier(smoothing_strength=0.8) +
#     GPTQModifier(scheme="W8A8")), examples/quantization_w4a4_fp4/llama3_example.py @6c081a6
#     (QuantizationModifier(targets="Linear", scheme="NVFP4")); all call `from llmcompressor import oneshot`
#   and save with model.save_pretrained(SAVE_DIR, save_compressed=True) (compressed-tensors, read by vLLM).
@dataclass(frozen=True)
class _LlmCompressorRecipe:
    imports: tuple[str, ...]
    modifiers: tuple[str, ...]        # Python expressions; IGNORE is the ignore list
    samples: int
    seq_len: int
    what: str


def _llmcompressor_recipe(weight_dtype: str, moe: bool) -> _LlmCompressorRecipe | None:
    if weight_dtype == "int4-awq":
        scheme = "W4A16" if moe else "W4A16_ASYM"
        return _LlmCompressorRecipe(
            ("from llmcompressor.modifiers.awq import AWQModifier",),
            (f'AWQModifier(ignore=IGNORE, scheme="{scheme}", targets=["Linear"])',), 256, 512,
            f"AWQ 4-bit weights, group 128 ({scheme})")
    if weight_dtype == "int4-gptq":
        return _LlmCompressorRecipe(
            ("from llmcompressor.modifiers.quantization import GPTQModifier",),
            ('GPTQModifier(targets="Linear", scheme="W4A16", ignore=IGNORE)',), 512, 2048,
            "GPTQ 4-bit weights, group 128 (W4A16)")
    if weight_dtype == "int8-sq":
        return _LlmCompressorRecipe(
            ("from llmcompressor.modifiers.quantization import GPTQModifier",
             "from llmcompressor.modifiers.smoothquant import SmoothQuantModifier"),
            ("SmoothQuantModifier(smoothing_strength=0.8)",
             'GPTQModifier(targets="Linear", scheme="W8A8", ignore=IGNORE)'), 512, 2048,
            "SmoothQuant + GPTQ INT8 weights and dynamic per-token INT8 activations (W8A8)")
    if weight_dtype == "nvfp4":
        return _LlmCompressorRecipe(
            ("from llmcompressor.modifiers.quantization import QuantizationModifier",),
            ('QuantizationModifier(targets="Linear", scheme="NVFP4", ignore=IGNORE)',), 512, 2048,
            "NVFP4 weights and activations (FP4, group 16)")
    return None


def _llmcompressor_script(model_id: str, save_dir: str, recipe: _LlmCompressorRecipe, moe: bool) -> str:
    ignore = ["lm_head"]
    if moe:  # router gates stay in 16 bit; patterns that match nothing are harmless (qwen3_moe_example)
        ignore += ["re:.*mlp.gate$", "re:.*mlp.shared_expert_gate$", "re:.*block_sparse_moe.gate$",
                   "re:.*router$"]
    modifiers = "".join(f"    {m},\n" for m in recipe.modifiers)
    return (
        f'"""Quantise {model_id} with llm-compressor: {recipe.what}. Output: {save_dir} (compressed-tensors)."""\n'
        "from datasets import load_dataset\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "\n"
        "from llmcompressor import oneshot\n"
        + "".join(f"{line}\n" for line in recipe.imports)
        + "\n"
        f"MODEL_ID = {json.dumps(model_id)}\n"
        f"SAVE_DIR = {json.dumps(save_dir)}\n"
        f"NUM_CALIBRATION_SAMPLES = {recipe.samples}\n"
        f"MAX_SEQUENCE_LENGTH = {recipe.seq_len}\n"
        f"IGNORE = {json.dumps(ignore)}\n"
        "\n"
        'model = AutoModelForCausalLM.from_pretrained(MODEL_ID, torch_dtype="auto")\n'
        "tokenizer = AutoTokenizer.from_pretrained(MODEL_ID)\n"
        "\n"
        'ds = load_dataset("HuggingFaceH4/ultrachat_200k", split=f"train_sft[:{NUM_CALIBRATION_SAMPLES}]")\n'
        "ds = ds.shuffle(seed=42)\n"
        "\n"
        "\n"
        "def to_text(example):\n"
        "    if tokenizer.chat_template:\n"
        '        return {"text": tokenizer.apply_chat_template(example["messages"], tokenize=False)}\n'
        '    return {"text": "\\n".join(m["content"] for m in example["messages"])}\n'
        "\n"
        "\n"
        "def tokenize(sample):\n"
        '    return tokenizer(sample["text"], padding=False, max_length=MAX_SEQUENCE_LENGTH, truncation=True,\n'
        "                     add_special_tokens=False)\n"
        "\n"
        "\n"
        "ds = ds.map(to_text)\n"
        "ds = ds.map(tokenize, remove_columns=ds.column_names)\n"
        "\n"
        "recipe = [\n"
        f"{modifiers}"
        "]\n"
        "oneshot(model=model, dataset=ds, recipe=recipe, max_seq_length=MAX_SEQUENCE_LENGTH,\n"
        "        num_calibration_samples=NUM_CALIBRATION_SAMPLES)\n"
        "\n"
        "model.save_pretrained(SAVE_DIR, save_compressed=True)\n"
        "tokenizer.save_pretrained(SAVE_DIR)\n"
    )


def _plan_vllm_checkpoint(ctx: _Context) -> _Checkpoint:
    s, w = ctx.spec, ctx.weight.id
    if w == "fp8":
        notes = ["Dynamic FP8: vLLM quantises the 16-bit checkpoint at load time (--quantization fp8, per-tensor "
                 "scales); no calibration step."]
        if ctx.model is not None:
            fp8_aliases = [a for a in ctx.model.aliases if "fp8" in _name_tokens(a)]
            if fp8_aliases:
                notes.append(f"A pre-quantised FP8 checkpoint of the same architecture exists: {fp8_aliases[0]} "
                             "(pass it as `checkpoint` to skip online quantisation).")
        return _Checkpoint(served=s.model_id, local=False, dynamic_fp8=True, notes=notes)
    moe = bool(ctx.model and ctx.model.num_experts)
    recipe = _llmcompressor_recipe(w, moe)
    if recipe is None:
        raise CheckpointError(f"no quantisation recipe for {ctx.weight.name} with vLLM: name a {w} checkpoint "
                              "in `checkpoint`")
    save_dir = _output_dir(s.model_id, w)
    script = f"quantize_{_CHECKPOINT_SUFFIX[w].replace('-', '_')}.py"
    return _Checkpoint(
        served=save_dir, local=True,
        steps=[
            {"what": "Install llm-compressor (any Python environment with a GPU and the model's disk space).",
             "command": "pip install llmcompressor"},
            {"what": f"Quantise {s.model_id} ({recipe.what}; {recipe.samples} calibration samples of "
                     f"HuggingFaceH4/ultrachat_200k) into {save_dir}.",
             "command": shlex.join(["python", script])},
        ],
        files={script: _llmcompressor_script(s.model_id, save_dir, recipe, moe)},
        notes=[f"The served checkpoint {save_dir} is produced by the quantisation step (compressed-tensors "
               "format: vLLM reads its quantization config, so no --quantization flag)."],
    )


def _plan_trtllm_checkpoint(ctx: _Context) -> _Checkpoint:
    s, w = ctx.spec, ctx.weight.id
    qformat = _MODELOPT_QFORMAT.get(w)
    if qformat is None:
        raise CheckpointError(f"no ModelOpt recipe for {ctx.weight.name} (hf_ptq.py has no such --qformat): name a "
                              f"{w} checkpoint in `checkpoint`")
    ptq = ctx.vocab.raw.get("quantize", {}).get("modelopt_hf_ptq", {})
    choices = ptq.get("qformat", {}).get("choices", [])
    kv_qformat = "fp8" if ctx.kv.id == "fp8" else "none"
    kv_choices = ptq.get("kv_cache_qformat", {}).get("choices", [])
    if qformat not in choices or kv_qformat not in kv_choices:
        raise CheckpointError(f"ModelOpt hf_ptq.py in the {ctx.vocab.engine} {ctx.vocab.version} vocabulary lacks "
                              f"--qformat {qformat} / --kv_cache_qformat {kv_qformat}")
    save_dir = _output_dir(s.model_id, w)
    image = ctx.vocab.image or "nvcr.io/nvidia/tensorrt-llm/release"
    container = shlex.join(["docker", "run", "--rm", "-it", "--ipc=host", "--gpus", "all", "--ulimit",
                            "memlock=-1", "--ulimit", "stack=67108864"])
    container += f" -v {_HF_CACHE_MOUNT} -v {_WORKDIR_MOUNT} " + shlex.join(
        ["-w", "/workspace", "-e", "HF_TOKEN", image, "bash"])
    ptq_cmd = shlex.join([
        "python", "Model-Optimizer/examples/llm_ptq/hf_ptq.py", "--pyt_ckpt_path", s.model_id,
        "--qformat", qformat, "--kv_cache_qformat", kv_qformat, "--export_fmt", "hf", "--export_path", save_dir])
    return _Checkpoint(
        served=save_dir, local=True,
        steps=[
            {"what": "Open a shell in the TensorRT-LLM release image (it ships nvidia-modelopt; the exported "
                     "checkpoint lands in the current directory).", "command": container},
            {"what": "Fetch ModelOpt's PTQ example (if it needs a newer nvidia-modelopt than the image ships, "
                     "check out the Model-Optimizer tag matching `pip show nvidia-modelopt`).",
             "command": shlex.join(["git", "clone", "--depth", "1", _MODELOPT_REPO])},
            {"what": "Install the example's requirements.",
             "command": "pip install -r Model-Optimizer/examples/llm_ptq/requirements.txt"},
            {"what": f"Quantise {s.model_id} to {qformat} (KV cache: {kv_qformat}; 512 calibration samples by "
                     f"default) and export a Hugging Face checkpoint to {save_dir}.", "command": ptq_cmd},
        ],
        notes=[f"The served checkpoint {save_dir} is a ModelOpt export (hf_quant_config.json); TRT-LLM's PyTorch "
               "backend reads the quantization from it."],
    )


# --------------------------------------------------------------------------------------------------
# vLLM


def _device_batch_defaults(vocab: Vocabulary, gpu: GpuSpec) -> dict[str, int]:
    """The `vllm serve` max_num_batched_tokens / max_num_seqs defaults of the GPU's device class.

    The classes in `defaults_by_device` are tested in order: 'device_memory >= N GiB', optionally
    "'a100' not in device name"; 'other GPUs' matches all. Catalog memory is the datasheet figure (GB),
    converted to GiB; no catalog GPU lies near a class boundary."""
    memory_gib = gpu.memory_gb * 1e9 / 2**30
    classes = vocab.raw.get("defaults_by_device", {}).get("classes", [])
    for cls in classes:
        label = str(cls.get("class", ""))
        serve = cls.get("vllm_serve", {})
        if label.startswith("CPU") or label.startswith("TPU"):
            continue
        threshold = re.search(r"device_memory >= (\d+) GiB", label)
        if threshold and memory_gib < float(threshold.group(1)):
            continue
        if "'a100' not in device name" in label and ("a100" in gpu.id or "a100" in gpu.name.lower()):
            continue
        if threshold or label.startswith("other"):
            return {k: int(v) for k, v in serve.items() if isinstance(v, int)}
    fallback = vocab.raw.get("defaults_by_device", {}).get("fallback", {})
    return {k: int(v) for k, v in fallback.items() if isinstance(v, int)}


def _vllm_gpu_memory_utilization_default(vocab: Vocabulary) -> float | None:
    entry = vocab.raw.get("gpu_memory_utilization_default", {})
    if entry.get("value") is not None:
        return float(entry["value"])
    # 0.34.0: None resolves to 1.0 with the extensible KV cache, on by default on CUDA/ROCm (ENGINES.md §2).
    resolved = entry.get("resolved", {}).get("extensible_kv_cache")
    return float(resolved) if resolved is not None else _num(vocab.flag_default("--gpu-memory-utilization"))


@dataclass(frozen=True)
class _Replicas:
    mode: str                 # single | data-parallel | separate-servers
    count: int


def _vllm_replicas(ctx: _Context) -> _Replicas:
    s = ctx.spec
    if s.replicas == 1:
        return _Replicas("single", 1)
    dense = not (ctx.model and ctx.model.num_experts)
    fits_one_node = s.tp * s.pp * s.replicas <= ctx.gpu.max_gpus_per_node
    if dense and s.pp == 1 and fits_one_node and ctx.vocab.flag("--data-parallel-size"):
        return _Replicas("data-parallel", s.replicas)
    return _Replicas("separate-servers", s.replicas)


def _vllm_args(ctx: _Context, ckpt: _Checkpoint, replicas: _Replicas, port: int, notes: list[str]) -> list[str]:
    s, vocab = ctx.spec, ctx.vocab
    argv = _Argv(vocab, ckpt.served)
    if ckpt.served != s.model_id:
        argv.add("--served-model-name", s.model_id)
    dtype = _dtype16(ctx)
    if dtype:
        argv.add("--dtype", dtype)
    if ckpt.dynamic_fp8:
        argv.add("--quantization", "fp8")
    kv = _VLLM_KV_DTYPE.get(ctx.kv.id) if ctx.kv.id != "auto" else None
    if ctx.kv.id not in ("auto", *_VLLM_KV_DTYPE):
        raise LaunchError(f"vLLM has no KV-cache dtype for '{ctx.kv.id}'")
    kv_is_model_dtype = (kv == "float16" and dtype in ("float16", "half")) or (kv == "bfloat16" and dtype == "bfloat16")
    if kv and not kv_is_model_dtype:
        argv.add("--kv-cache-dtype", kv)
    if s.tp > 1:
        argv.add("--tensor-parallel-size", s.tp)
    if s.pp > 1:
        argv.add("--pipeline-parallel-size", s.pp)
    if replicas.mode == "data-parallel":
        argv.add("--data-parallel-size", replicas.count)
    if _expert_parallel(ctx):
        argv.switch("--enable-expert-parallel", True)
        notes.append(f"Expert parallelism: the {ctx.model.num_experts if ctx.model else 0} experts are spread "
                     f"whole over the {s.tp} GPUs (EP={s.tp}) instead of slicing every expert by TP.")
    if s.max_model_len is not None and not (ctx.model and s.max_model_len == ctx.model.max_position_embeddings):
        argv.add("--max-model-len", s.max_model_len)
    chunked = _VLLM_CHUNKED_PREFILL_DEFAULT if s.enable_chunked_prefill is None else s.enable_chunked_prefill
    device_defaults = _device_batch_defaults(vocab, ctx.gpu)
    if s.max_num_seqs is not None and s.max_num_seqs != device_defaults.get("max_num_seqs"):
        argv.add("--max-num-seqs", s.max_num_seqs)
    # Without chunked prefill vLLM raises the token budget to >= max_model_len, so the device default no
    # longer applies and an explicit value is kept.
    if s.max_num_batched_tokens is not None and (
            not chunked or s.max_num_batched_tokens != device_defaults.get("max_num_batched_tokens")):
        argv.add("--max-num-batched-tokens", s.max_num_batched_tokens)
    if not chunked and s.max_num_batched_tokens is not None and s.max_model_len is not None \
            and s.max_num_batched_tokens < s.max_model_len:
        raise LaunchError(f"with chunked prefill off, max_num_batched_tokens ({s.max_num_batched_tokens}) must be "
                          f">= max_model_len ({s.max_model_len})")
    if s.gpu_memory_utilization is not None and s.gpu_memory_utilization != _vllm_gpu_memory_utilization_default(vocab):
        argv.add("--gpu-memory-utilization", s.gpu_memory_utilization)
    if s.enable_chunked_prefill is not None and s.enable_chunked_prefill != _VLLM_CHUNKED_PREFILL_DEFAULT:
        argv.switch("--enable-chunked-prefill", s.enable_chunked_prefill)
    if s.enable_prefix_caching is not None and s.enable_prefix_caching != _VLLM_PREFIX_CACHING_DEFAULT:
        argv.switch("--enable-prefix-caching", s.enable_prefix_caching)
    if port != vocab.flag_default("--port"):
        argv.add("--port", port)
    return argv.items


# --------------------------------------------------------------------------------------------------
# TensorRT-LLM


def _check_yaml(vocab: Vocabulary, tree: Mapping[str, Any], prefix: str = "") -> None:
    for key, value in tree.items():
        path = f"{prefix}{key}"
        spec = vocab.yaml_keys.get(path)
        if spec is None:
            raise LaunchError(f"{vocab.engine} {vocab.version} has no --extra_llm_api_options key {path}")
        problem = spec.problem(value)
        if problem:
            raise LaunchError(f"{vocab.engine} {vocab.version}: {problem}")
        if isinstance(value, dict):
            _check_yaml(vocab, value, prefix=f"{path}.")


def _trtllm_extra_options(ctx: _Context, max_batch_size: int, notes: list[str]) -> dict[str, Any]:
    s, vocab = ctx.spec, ctx.vocab
    options: dict[str, Any] = {}
    dtype = _dtype16(ctx)
    if dtype:
        options["dtype"] = dtype
    kv_cache: dict[str, Any] = {}
    if ctx.kv.id == "fp8":
        kv_cache["dtype"] = "fp8"
    elif ctx.kv.id in ("fp16", "bf16"):
        notes.append("TRT-LLM keeps a 16-bit KV cache in the model's activation dtype (kv_cache_config.dtype auto).")
    if s.enable_prefix_caching is not None and s.enable_prefix_caching != vocab.yaml_default(
            "kv_cache_config.enable_block_reuse"):
        kv_cache["enable_block_reuse"] = s.enable_prefix_caching
    if kv_cache:
        options["kv_cache_config"] = kv_cache
    if s.enable_chunked_prefill is not None and s.enable_chunked_prefill != vocab.yaml_default(
            "enable_chunked_prefill"):
        options["enable_chunked_prefill"] = s.enable_chunked_prefill
    graph_batch = min(max_batch_size, _TRTLLM_CUDA_GRAPH_MAX_BATCH)
    options["cuda_graph_config"] = {"enable_padding": True, "max_batch_size": graph_batch}
    notes.append(f"CUDA graphs are captured for padded batch sizes up to {graph_batch} "
                 f"(max_batch_size {max_batch_size}); larger batches run without graphs.")
    _check_yaml(vocab, options)
    return options


def _trtllm_args(ctx: _Context, ckpt: _Checkpoint, port: int, notes: list[str]) -> list[str]:
    s, vocab = ctx.spec, ctx.vocab
    argv = _Argv(vocab, ckpt.served)
    if vocab.flag_default("--backend") != "pytorch":
        argv.add("--backend", "pytorch")
    if s.tp > 1:
        argv.add("--tp_size", s.tp)
    if s.pp > 1:
        argv.add("--pp_size", s.pp)
    if _expert_parallel(ctx):
        argv.add("--ep_size", s.tp)
        notes.append(f"Expert parallelism: EP={s.tp} over the TP group (moe_expert_parallel_size), whole experts "
                     "per GPU.")
    if s.max_num_seqs is not None and s.max_num_seqs != vocab.flag_default("--max_batch_size"):
        argv.add("--max_batch_size", s.max_num_seqs)
    if s.max_num_batched_tokens is not None and s.max_num_batched_tokens != vocab.flag_default("--max_num_tokens"):
        argv.add("--max_num_tokens", s.max_num_batched_tokens)
    if s.max_model_len is not None and not (ctx.model and s.max_model_len == ctx.model.max_position_embeddings):
        argv.add("--max_seq_len", s.max_model_len)
    fraction = s.kv_cache_free_gpu_memory_fraction
    if fraction is not None and fraction != vocab.flag_default("--kv_cache_free_gpu_memory_fraction"):
        argv.add("--kv_cache_free_gpu_memory_fraction", fraction)
    if vocab.flag_default("--host") != "0.0.0.0":
        argv.add("--host", "0.0.0.0")
    if port != vocab.flag_default("--port"):
        argv.add("--port", port)
    argv.add("--extra_llm_api_options", TRTLLM_EXTRA_OPTIONS_FILE)
    return argv.items


# --------------------------------------------------------------------------------------------------
# Containers, replicas, assembly


# PyYAML's libyaml emitter where it is built in (the wheels have it): the same text as safe_dump (the golden
# TRT-LLM launches check it), ~4x faster (159 vs 668 us for a 5-key options file on the 2-core machine)
_YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _image(ctx: _Context) -> tuple[str, str | None]:
    """The container image and, when it is not verified, why."""
    if ctx.gpu.vendor == "amd":
        return (_VLLM_ROCM_IMAGE.format(version=ctx.version),
                f"ROCm image vllm/vllm-openai-rocm:v{ctx.version} is unverified: the tag pattern is seen for "
                "v0.14.0-v0.23.0 in public scripts; AMD also publishes rocm/vllm:<rocm>_vllm_<version>_<date> tags.")
    image = ctx.vocab.image
    if image is None:
        raise LaunchError(f"the {ctx.engine.id} {ctx.version} vocabulary names no container image")
    if not ctx.vocab.image_verified:
        return image, f"Image tag {image} follows NVIDIA's naming pattern but was not seen in a source."
    return image, None


def _docker_line(ctx: _Context, image: str, args: list[str], gpus: list[int] | None, host_port: int,
                 local_files: bool) -> str:
    """`docker run` for one server. gpus None = all GPUs of the host."""
    s = ctx.spec
    parts: list[str] = [shlex.join(["docker", "run", "-d", "--ipc=host"])]
    if ctx.gpu.vendor == "amd":
        parts.append(shlex.join(_ROCM_DOCKER_FLAGS))
        if gpus is not None:
            parts.append(shlex.join(["-e", "HIP_VISIBLE_DEVICES=" + ",".join(map(str, gpus))]))
    else:
        parts.append(shlex.join(["--gpus", "all" if gpus is None else '"device=' + ",".join(map(str, gpus)) + '"']))
    if ctx.engine.id == "trtllm":
        parts.append(shlex.join(["--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]))
    parts.append(shlex.join(["-p", f"{host_port}:{s.port}", "-e", "HF_TOKEN"]))
    parts.append(f"-v {_HF_CACHE_MOUNT}")
    if local_files:
        parts.append(f"-v {_WORKDIR_MOUNT} -w /workspace")
    parts.append(shlex.quote(image))
    if ctx.engine.id == "trtllm":  # the NGC image has no serving entrypoint; vllm-openai's is `vllm serve`
        parts.append(shlex.join(ctx.vocab.executable))
    parts.append(shlex.join(args))
    return " ".join(parts)


def _placements(ctx: _Context, count: int) -> list[tuple[int, list[int], int]]:
    """(node, GPU indices, host port) of each of `count` servers of tp*pp GPUs packed onto nodes."""
    per_server = ctx.spec.tp * ctx.spec.pp
    per_node = max(ctx.gpu.max_gpus_per_node // per_server, 1)
    out = []
    for i in range(count):
        local = i % per_node
        first = local * per_server
        out.append((i // per_node, list(range(first, first + per_server)), ctx.spec.port + local))
    return out


def render_launch(spec: LaunchSpec, catalog: Catalog, vocab_dir: Path | None = None) -> dict[str, Any]:
    """The launch of one deployment: command, argv, container line, files, preparation steps, replicas, notes.

    Returns {"engine", "engine_version", "executable", "image", "model", "command", "args", "container",
    "files", "steps", "replicas", "notes"}; `args` is the argv after `executable` (for a Kubernetes manifest:
    with the vLLM image its entrypoint is already `vllm serve`; with the TRT-LLM image set
    command: [trtllm-serve])."""
    ctx = _resolve(spec, catalog, vocab_dir)
    _check_values(ctx)
    ckpt = _plan_checkpoint(ctx)
    _check_model_fit(ctx)
    notes: list[str] = list(ckpt.notes)
    files = dict(ckpt.files)
    if catalog.support_levels(ctx.engine.id, ctx.gpu.architecture).get(("weight", ctx.weight.id)) == "fallback":
        notes.append(f"{ctx.weight.name} runs in fallback kernels on {ctx.gpu.architecture} (weight-only, "
                     f"{ctx.weight.fallback_compute} GEMMs): memory savings without the compute speed-up.")
    if ctx.model is None:
        notes.append(f"{spec.model_id} is not in the catalog: tp/pp divisibility, context length and weight size "
                     "were not checked, and it is treated as a dense model.")
    if spec.engine == "vllm":
        replicas = _vllm_replicas(ctx)
        if spec.kv_cache_free_gpu_memory_fraction is not None:
            notes.append("kv_cache_free_gpu_memory_fraction is a TRT-LLM setting; vLLM sizes its KV cache from "
                         "gpu_memory_utilization (a fraction of total memory) instead. Ignored.")

        def server_args(port: int) -> list[str]:
            return _vllm_args(ctx, ckpt, replicas, port, [])

        args = _vllm_args(ctx, ckpt, replicas, spec.port, notes)
    else:
        replicas = _Replicas("single" if spec.replicas == 1 else "separate-servers", spec.replicas)
        if spec.gpu_memory_utilization is not None:
            notes.append("gpu_memory_utilization is a vLLM setting; TRT-LLM sizes its KV cache from "
                         "kv_cache_free_gpu_memory_fraction (a fraction of memory free after weights). Ignored.")
        max_batch = spec.max_num_seqs or int(ctx.vocab.flag_default("--max_batch_size"))
        options = _trtllm_extra_options(ctx, max_batch, notes)
        files[TRTLLM_EXTRA_OPTIONS_FILE] = yaml.dump(options, Dumper=_YAML_DUMPER, sort_keys=True,
                                                     default_flow_style=False)
        max_tokens = spec.max_num_batched_tokens or int(ctx.vocab.flag_default("--max_num_tokens"))
        if spec.max_model_len and max_tokens < spec.max_model_len and not spec.enable_chunked_prefill:
            notes.append(f"max_num_tokens {max_tokens} < max_seq_len {spec.max_model_len} without chunked prefill: "
                         "prompts longer than max_num_tokens are rejected.")

        def server_args(port: int) -> list[str]:
            return _trtllm_args(ctx, ckpt, port, [])

        args = _trtllm_args(ctx, ckpt, spec.port, notes)
    image, image_note = _image(ctx)
    if image_note:
        notes.append(image_note)
    gpus_per_server = spec.tp * spec.pp * (replicas.count if replicas.mode == "data-parallel" else 1)
    if gpus_per_server > ctx.gpu.max_gpus_per_node:
        launcher = "a Ray cluster (vLLM multi-node)" if spec.engine == "vllm" else "mpirun/Slurm (trtllm-llmapi-launch)"
        notes.append(f"One server spans {gpus_per_server} GPUs, more than the {ctx.gpu.max_gpus_per_node} of one "
                     f"{ctx.gpu.name} node: it needs {launcher}; the single-node container line does not cover it.")
    local_files = ckpt.local or bool(files)
    executable = list(ctx.vocab.executable)
    replicas_out: dict[str, Any] = {"count": replicas.count, "mode": replicas.mode}
    if replicas.mode == "single":
        replicas_out["how"] = "One server; no load balancer needed."
        container = _docker_line(ctx, image, args, None, spec.port, local_files)
    elif replicas.mode == "data-parallel":
        replicas_out["how"] = (
            f"One vLLM server with --data-parallel-size {replicas.count}: {replicas.count} engine replicas of "
            f"{spec.tp * spec.pp} GPU(s) each behind vLLM's own API server, which balances requests across them; "
            "one endpoint, no external load balancer.")
        container = _docker_line(ctx, image, args, None, spec.port, local_files)
    else:
        env = "HIP_VISIBLE_DEVICES" if ctx.gpu.vendor == "amd" else "CUDA_VISIBLE_DEVICES"
        servers: list[dict[str, Any]] = []
        per_slot: dict[int, tuple[str, str]] = {}      # a node's slots repeat on every node: rendered once each
        for i, (node, gpus, host_port) in enumerate(_placements(ctx, replicas.count)):
            gpu_list = ",".join(map(str, gpus))
            if host_port not in per_slot:
                per_slot[host_port] = (f"{env}={gpu_list} " + shlex.join([*executable, *server_args(host_port)]),
                                       _docker_line(ctx, image, args, gpus, host_port, local_files))
            command, container_line = per_slot[host_port]
            servers.append({"replica": i, "node": node, "gpus": gpu_list, "host_port": host_port,
                            "command": command, "container": container_line})
        why = ("MoE expert layers of vLLM data-parallel ranks synchronise every step, so they are not independent "
               "replicas" if spec.engine == "vllm" and ctx.model and ctx.model.num_experts else
               "each replica is an independent server")
        replicas_out["how"] = (
            f"{replicas.count} separate servers of {spec.tp * spec.pp} GPU(s) each ({why}), behind an HTTP load "
            "balancer (nginx/Envoy, or a Kubernetes Service over a Deployment with replicas: "
            f"{replicas.count}, each pod requesting {spec.tp * spec.pp} GPU(s) and running `args`). "
            "`servers` lists a packing onto nodes: one command and container line per replica.")
        replicas_out["servers"] = servers
        container = servers[0]["container"]
    return {
        "engine": ctx.engine.id,
        "engine_version": ctx.version,
        "executable": executable,
        "image": image,
        "model": ckpt.served,
        "command": shlex.join([*executable, *args]),
        "args": args,
        "container": container,
        "files": dict(sorted(files.items())),
        "steps": ckpt.steps,
        "replicas": replicas_out,
        "notes": notes,
    }
