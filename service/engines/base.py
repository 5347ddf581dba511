"""What every engine shares: the deployment to launch, its resolution against the catalog, the checks every
launch passes, the argv builder, and the ``Engine`` protocol each engine module implements."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gpu_catalog.checkpoints import PartBits, shipped_checkpoints
from gpu_catalog.loader import Catalog
from gpu_catalog.schema import EngineSpec, GpuSpec, KvDtypeSpec, ModelSpec, WeightDtypeSpec
from service.core.moe_layout import Layout, LayoutError, weight_bytes_per_rank
from service.engines.errors import LaunchError
from service.engines.vocabulary import Vocabulary, check_flag, vocabulary
from service.units import GB_BYTES

if TYPE_CHECKING:
    from service.core.moe_layout import EngineParallelSettings
    from service.engines.checkpoints import Checkpoint

DEFAULT_PORT = 8000

# Pre-SM80 CUDA GPUs have no BF16: vLLM needs --dtype half there (the `--dtype` flag of
# gpu_catalog/data/engines/vllm-<version>.yaml; TRT-LLM BaseLlmArgs.validate_dtype raises on bfloat16 below SM80).
_NO_BF16_ARCHITECTURES = frozenset({"volta", "turing"})

# Expert parallelism is chosen for MoE models with many small experts (Qwen3-MoE 128, DeepSeek 256, ...):
# whole experts per GPU instead of slicing every expert's width by TP. Few large experts (Mixtral's 8)
# keep TP-sharded experts, which balances better.
EP_MIN_EXPERTS = 16


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
    dp: int = 1                     # attention data-parallel ranks per replica
    ep: int | None = None           # expert-parallel size (None: the engine's rule for the TP group)
    port: int = DEFAULT_PORT
    speculative: SpeculativeLaunch | None = None    # speculative decoding (docs/levers.md)
    cpu_offload_gb: float | None = None             # weights per GPU in host memory, GB (1e9 bytes)
    kv_offload_gb: float | None = None              # host-memory KV-cache tier per GPU, GB (1e9 bytes)


@dataclass(frozen=True)
class SpeculativeLaunch:
    """Speculative decoding as a launch renders it: our method id (eagle3, mtp, ngram, draft_model), k, and the
    draft's repository (an EAGLE-3 head or a draft model; None for mtp and ngram)."""

    method: str
    num_speculative_tokens: int
    draft: str | None = None



@dataclass(frozen=True)
class Context:
    """A launch spec resolved against the catalog and its engine version's vocabulary."""

    spec: LaunchSpec
    engine: EngineSpec
    version: str
    vocab: Vocabulary
    gpu: GpuSpec
    model: ModelSpec | None
    weight: WeightDtypeSpec
    kv: KvDtypeSpec
    # bits per weight of each linear part of the model as the served checkpoint stores them (checkpoints.yaml)
    part_bits: PartBits


def by_id(items: list[Any], key: str, what: str) -> Any:
    for item in items:
        if item.id == key:
            return item
    known = ", ".join(sorted(i.id for i in items))
    raise LaunchError(f"unknown {what} '{key}' (known: {known})")



def resolve_context(spec: LaunchSpec, catalog: Catalog, vocab_dir: Path | None) -> Context:
    engine: EngineSpec = by_id(catalog.engines, spec.engine, "engine")
    version = spec.engine_version or engine.default_version
    if version not in engine.versions:
        raise LaunchError(f"unknown {engine.id} version '{version}' (catalog versions: {', '.join(engine.versions)})")
    gpu: GpuSpec = by_id(catalog.gpus, spec.gpu_id, "GPU")
    weight: WeightDtypeSpec = by_id(catalog.weight_dtypes, spec.weight_dtype, "weight dtype")
    kv: KvDtypeSpec = by_id(catalog.kv_dtypes, spec.kv_dtype, "KV-cache dtype")
    if gpu.vendor not in engine.vendors:
        raise LaunchError(f"{engine.name} does not run on {gpu.vendor.upper()} GPUs ({gpu.name}); "
                          f"it runs on: {', '.join(engine.vendors)}")
    supported = catalog.support_levels(engine.id, gpu.architecture)
    for kind, dtype in (("weight", weight.id), ("kv", kv.id)):
        if (kind, dtype) not in supported:
            raise LaunchError(f"{engine.name} does not run {kind} dtype '{dtype}' on {gpu.architecture} "
                              f"GPUs such as {gpu.name} (gpu_catalog/data/support.yaml)")
    vocab = vocabulary(engine.id, version, vocab_dir)
    model = catalog.resolve_model(spec.model_id)
    part_bits = (shipped_checkpoints().part_bits(model.id, weight.id, {d.id: d.bits_per_weight
                                                                       for d in catalog.weight_dtypes})
                 if model is not None else PartBits.uniform(weight.bits_per_weight))
    return Context(spec=spec, engine=engine, version=version, vocab=vocab, gpu=gpu, model=model, weight=weight,
                   kv=kv, part_bits=part_bits)


def check_values(ctx: Context) -> None:
    s = ctx.spec
    if not s.model_id.strip():
        raise LaunchError("model_id is empty")
    for name, value in (("tp", s.tp), ("pp", s.pp), ("dp", s.dp), ("replicas", s.replicas)):
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


def check_model_fit(ctx: Context) -> None:
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
    # the checkpoint's parts at their own bits (gpt-oss: MXFP4 experts, BF16 attention); the experts shared by
    # the DP ranks: moe_layout's split per GPU
    layout = Layout(tp=s.tp, pp=s.pp, dp=s.dp, ep=s.ep or 1)
    try:
        weights_gb_per_gpu = weight_bytes_per_rank(m, layout, ctx.weight.bits_per_weight,
                                                   parts=ctx.part_bits).total_bytes / GB_BYTES
    except LayoutError as exc:
        raise LaunchError(str(exc)) from exc
    # weights offloaded to host memory (vLLM --cpu-offload-gb, per GPU) do not stay on the GPU
    weights_gb_per_gpu -= s.cpu_offload_gb or 0.0
    if weights_gb_per_gpu >= ctx.gpu.memory_gb:
        raise LaunchError(f"the {ctx.weight.name} weights of {m.id} need {weights_gb_per_gpu:.1f} GB per GPU at "
                          f"tp={s.tp} pp={s.pp}, more than the {ctx.gpu.memory_gb:g} GB of a {ctx.gpu.name}")


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return format(value, "g")
    return str(value)


class Argv:
    """The argv after the executable, with every flag checked against the vocabulary as it is added."""

    def __init__(self, vocab: Vocabulary, positional: str) -> None:
        self.vocab = vocab
        self.items: list[str] = [positional]

    def add(self, spelling: str, value: object = None) -> None:
        spec = check_flag(self.vocab, spelling, value)
        self.items.append(spelling)
        if spec.takes_value:
            self.items.append(_fmt(value))

    def switch(self, spelling: str, on: bool) -> None:
        """A bool-optional flag: its positive spelling for True, its negative form for False."""
        spec = check_flag(self.vocab, spelling)
        if on:
            self.items.append(spelling)
        elif spec.negative:
            self.items.append(spec.negative)
        else:
            raise LaunchError(f"{self.vocab.engine} {self.vocab.version}: {spelling} has no negative form")


def name_tokens(repo_id: str) -> set[str]:
    return {t for t in re.split(r"[-_.]", repo_id.rstrip("/").split("/")[-1].lower()) if t}


def expert_parallel(ctx: Context) -> bool:
    m = ctx.model
    return bool(m and m.num_experts and m.num_experts >= EP_MIN_EXPERTS and ctx.spec.tp > 1
                and m.num_experts % ctx.spec.tp == 0)


def dtype16(ctx: Context) -> str | None:
    """The 16-bit activation dtype to pin: 'half' on pre-SM80, the requested 16-bit weight dtype otherwise."""
    if ctx.gpu.architecture in _NO_BF16_ARCHITECTURES:
        return "half"
    return {"bf16": "bfloat16", "fp16": "float16"}.get(ctx.weight.id)




@dataclass(frozen=True)
class Replicas:
    mode: str                 # single | data-parallel | separate-servers
    count: int


@dataclass
class Rendered:
    """One engine's part of a launch: how replicas are served, the argv of the first server, and a function
    giving the argv of a server listening on another port."""

    replicas: Replicas
    args: list[str]
    server_args: Callable[[int], list[str]]
    files: dict[str, str] = field(default_factory=dict)


class Engine(Protocol):
    """One serving engine: its defaults as its vocabulary states them, and the launch it renders."""

    id: str
    name: str
    memory_fraction_setting: str        # the LaunchSpec field the engine sizes its KV cache by
    multi_node_launcher: str            # what starts one server spanning nodes
    defaults_source: str                # where in its vocabulary file its defaults are read
    docker_flags: tuple[str, ...]       # `docker run` flags the engine's image needs
    image_runs_server: bool             # the image's entrypoint is the serving command
    always_chunks_prefill: bool         # prompts are split into chunks whatever the settings
    reserves_whole_sequences: bool      # KV for prompt + output is reserved when a request is admitted

    def batch_defaults(self, vocab: Vocabulary, gpu: GpuSpec) -> tuple[int, int]:
        """(max_num_seqs, max_num_batched_tokens) the engine uses on ``gpu`` when they are not given."""
        ...

    def memory_fraction_default(self, vocab: Vocabulary) -> float:
        """The default of ``memory_fraction_setting``."""
        ...

    def check_values(self, spec: LaunchSpec) -> None:
        """LaunchError for settings the engine rejects (beyond the checks every engine shares)."""
        ...

    def plan_quantisation(self, ctx: Context) -> Checkpoint:
        """The quantisation steps that turn a 16-bit checkpoint into one of ``ctx.weight``."""
        ...

    def parallel_settings(self, layout: Layout) -> EngineParallelSettings:
        """The flags and YAML keys of ``layout`` (``LayoutError`` naming the field the engine cannot express)."""
        ...

    def render(self, ctx: Context, ckpt: Checkpoint, notes: list[str]) -> Rendered:
        """The engine's argv, files and replica layout; appends what the operator should know to ``notes``."""
        ...

    def separate_servers_reason(self, ctx: Context) -> str:
        """Why replicas run as separate servers behind a load balancer."""
        ...
