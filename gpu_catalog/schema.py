"""Pydantic schemas of the catalog data files.

Every numeric field carries its unit in its name; every record carries the source of its figures.
The loader (``gpu_catalog.loader``) validates each file against these models before anything is
written to the database, and names the file, the row and the field of the first bad value.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")

# GPU architecture families. They are the columns of the quantisation support matrix
# (shared/catalog/quant_support.csv: turing_sm75, ampere_sm80_86, ada_sm89, hopper_sm90,
# blackwell_sm100_103, blackwell_sm120_121, amd_rocm).
Architecture = Literal[
    "volta", "turing", "ampere", "ada", "hopper", "blackwell", "blackwell-rtx",
    "cdna2", "cdna3", "cdna4", "gaudi3",
]
ComputeDtype = Literal["fp16", "bf16", "fp8", "int8", "fp4"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GpuSources(_Strict):
    memory: str = Field(min_length=3, description="where memory size and bandwidth come from")
    compute: str = Field(min_length=3, description="where the dense TFLOPS figures come from")
    interconnect: str = Field(min_length=3, description="where the interconnect figures come from")
    price: str | None = Field(default=None, description="price list the hourly price is quoted from")


class GpuSpec(_Strict):
    id: str = Field(description="lowercase slug, SPEC.md GPU id")
    vendor: Literal["nvidia", "amd", "intel"] = Field(description="nvidia, amd or intel")
    name: str = Field(description="the vendor's product name")
    architecture: Architecture = Field(description="GPU architecture (decides which dtypes run natively)")
    compute_capability: str | None = Field(default=None, description="CUDA SM version or gfx target")
    memory_gb: float = Field(gt=0, description="device memory, GB (1e9 bytes) as the datasheet states")
    memory_type: str = Field(description="memory technology (HBM3, GDDR6, ...)")
    memory_bw_gb_s: float = Field(gt=0, description="peak memory bandwidth, GB/s")
    dense_tflops: dict[ComputeDtype, float] = Field(
        description="dense (no sparsity) tensor throughput per dtype, TFLOPS (TOPS for int8); "
        "a dtype that is absent has no native tensor-core path on this GPU")
    fp32_tflops: float | None = Field(default=None, gt=0, description="non-tensor FP32 throughput, TFLOPS")
    interconnect: Literal["nvlink", "nvlink-bridge", "pcie", "infinity-fabric", "roce"] = Field(
        description="the GPU-to-GPU link inside one node")
    interconnect_bw_gb_s_bidir: float = Field(
        gt=0, description="per-GPU GPU-to-GPU bandwidth, GB/s, both directions added (PCIe-only: the PCIe link)")
    pcie_bw_gb_s_bidir: float = Field(gt=0, description="host PCIe link, GB/s both directions added")
    max_gpus_per_node: int = Field(
        ge=1, le=72, description="GPUs one server holds (tensor parallelism stays within a node)")
    nvlink_domain_gpus: int | None = Field(
        default=None, ge=1, description="GPUs that share the fast link (2 for a bridged pair; 72 for NVL72)")
    tdp_w: float | None = Field(default=None, gt=0, description="board power, W")
    price_usd_per_gpu_hour: float | None = Field(
        default=None, gt=0, description="cloud price of one GPU, USD per hour (source: sources.price)")
    sources: GpuSources = Field(description="where each group of figures comes from")
    notes: str = Field(default="", description="remarks on the figures")

    @field_validator("id")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not SLUG_RE.match(v):
            raise ValueError("must be a lowercase slug (a-z, 0-9, '-', '.')")
        return v

    @model_validator(mode="after")
    def _price_has_source(self) -> GpuSpec:
        if self.price_usd_per_gpu_hour is not None and not self.sources.price:
            raise ValueError("price_usd_per_gpu_hour needs sources.price")
        if "fp16" not in self.dense_tflops:
            raise ValueError("dense_tflops must give fp16")
        return self


class ModelSpec(_Strict):
    """One model architecture: the config.json fields the cost model needs."""

    id: str = Field(description="canonical Hugging Face repo id")
    family: str = Field(description="slug shared by base/instruct/chat variants; the benchmark model_family")
    name: str = Field(description="display name")
    aliases: list[str] = Field(default_factory=list, description="other HF repo ids of the same architecture")
    model_type: str = Field(description="config.json model_type")
    num_layers: int = Field(ge=1, description="transformer layers (config.json num_hidden_layers)")
    hidden_size: int = Field(ge=1, description="model width, elements")
    intermediate_size: int = Field(ge=1, description="dense MLP width (of the dense layers for MoE)")
    num_attention_heads: int = Field(ge=1, description="query heads per layer")
    num_kv_heads: int = Field(ge=1, description="key/value heads per layer (num_key_value_heads)")
    head_dim: int = Field(ge=1, description="size of one attention head, elements")
    vocab_size: int = Field(ge=1, description="vocabulary, tokens")
    max_position_embeddings: int = Field(ge=1, description="context window, tokens")
    tie_word_embeddings: bool = Field(description="the output projection shares the input embedding's weights")
    # Mixture of experts
    num_experts: int | None = Field(default=None, ge=1, description="MoE: routed experts per MoE layer (null: dense)")
    num_shared_experts: int | None = Field(
        default=None, ge=0, description="MoE: experts every token uses besides the routed ones")
    experts_per_token: int | None = Field(default=None, ge=1, description="MoE: routed experts each token uses")
    moe_intermediate_size: int | None = Field(default=None, ge=1, description="MoE: MLP width of one expert, elements")
    first_k_dense_layers: int | None = Field(default=None, ge=0, description="MoE: leading layers with a dense MLP")
    # Multi-head latent attention (DeepSeek-V2/V3 style)
    mla_kv_lora_rank: int | None = Field(
        default=None, ge=1, description="MLA: rank of the compressed KV latent, elements")
    mla_q_lora_rank: int | None = Field(default=None, ge=1, description="MLA: rank of the compressed query, elements")
    mla_qk_rope_head_dim: int | None = Field(
        default=None, ge=1, description="MLA: rotary part of each query/key head, elements")
    mla_qk_nope_head_dim: int | None = Field(
        default=None, ge=1, description="MLA: non-rotary part of each query/key head, elements")
    mla_v_head_dim: int | None = Field(default=None, ge=1, description="MLA: value head size, elements")
    # Layers whose KV does not grow with the whole context
    sliding_window_tokens: int | None = Field(
        default=None, ge=1, description="attention window of the sliding-window layers, tokens")
    sliding_window_layers: int | None = Field(
        default=None, ge=0, description="how many layers attend only to the sliding window")
    linear_attention_layers: int | None = Field(
        default=None, ge=0, description="layers with a fixed-size recurrent state instead of a KV cache")
    # Layers whose attention and MLP read the same input and add their outputs (Falcon's
    # new_decoder_architecture / parallel_attn): under TP the engines all-reduce the sum once, not each half
    # (vLLM model_executor/models/falcon.py reduce_row_parallel_results; TensorRT-LLM models/falcon/model.py
    # "allreduce applies after those layer")
    parallel_attention: bool = Field(
        default=False, description="attention and MLP in parallel, one all-reduce per layer under TP")
    total_params_b: float = Field(gt=0, description="all parameters, billions")
    active_params_b: float = Field(gt=0, description="parameters used per token, billions (= total for dense)")
    source: str = Field(min_length=5, description="where the config.json was read")
    notes: str = Field(default="", description="remarks on the architecture")

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        if self.active_params_b > self.total_params_b * 1.0001:
            raise ValueError("active_params_b exceeds total_params_b")
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError("num_attention_heads must be a multiple of num_kv_heads")
        moe = (self.num_experts, self.experts_per_token)
        if any(v is not None for v in moe) and not all(v is not None for v in moe):
            raise ValueError("num_experts and experts_per_token go together")
        windowed = (self.sliding_window_layers or 0) + (self.linear_attention_layers or 0)
        if windowed > self.num_layers:
            raise ValueError("sliding_window_layers + linear_attention_layers exceed num_layers")
        if self.sliding_window_layers and not self.sliding_window_tokens:
            raise ValueError("sliding_window_layers needs sliding_window_tokens")
        return self


Quality = Literal["lossless", "near-lossless", "noticeable"]
SupportLevel = Literal["native", "fallback"]


class WeightDtypeSpec(_Strict):
    id: str = Field(description="weight dtype id (deployment.weight_dtype)")
    name: str = Field(description="display name")
    bits_per_weight: float = Field(gt=0, le=32, description="stored bits per weight, scales included")
    native_compute: ComputeDtype = Field(description="tensor-core dtype of the GEMM where supported natively")
    fallback_compute: ComputeDtype | None = Field(description="GEMM dtype when run weight-only")
    activation_bits: int = Field(gt=0, le=32, description="bits of the activations the GEMMs run on")
    quality: Quality = Field(description="what it gives up: lossless, near-lossless or noticeable")
    quality_note: str = Field(description="the quality evidence, in words")
    source: str = Field(min_length=3, description="where the format's figures come from")


class KvDtypeSpec(_Strict):
    id: str = Field(description="KV-cache dtype id (deployment.kv_dtype)")
    name: str = Field(description="display name")
    bits_per_element: int = Field(gt=0, le=32, description="bits per cached key/value element")
    quality: Quality = Field(description="what it gives up: lossless, near-lossless or noticeable")
    source: str = Field(min_length=3, description="where the format's figures come from")


class EngineSpec(_Strict):
    id: str
    name: str
    vendors: list[Literal["nvidia", "amd", "intel"]]
    default_version: str
    versions: list[str]
    source: str = Field(min_length=3)

    @model_validator(mode="after")
    def _default_listed(self) -> EngineSpec:
        if self.default_version not in self.versions:
            raise ValueError("default_version must be one of versions")
        return self


class SupportRow(_Strict):
    """One (engine, dtype kind, dtype, architecture) that runs, and how."""

    engine: str
    kind: Literal["weight", "kv"]
    dtype: str
    architecture: Architecture
    level: SupportLevel
    source: str


def _opt_float(v: object) -> object:
    return None if v in ("", None) else v


class MeasurementRow(BaseModel):
    """One published measurement: the columns of shared/benchmarks/published.csv."""

    # inf passes gt=0 (and cannot be written as JSON): no measurement is infinite
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    row_id: str = Field(min_length=1, max_length=200)
    quality: Literal["good", "weak"]
    source_id: str = Field(min_length=1, max_length=128)
    source: str = Field(min_length=3)
    engine: str
    engine_version: str | None = None
    gpu: str
    gpu_count: int | None = Field(default=None, ge=1, le=100000)
    model: str
    model_family: str | None = None
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    tp: int | None = Field(default=None, ge=1)
    pp: int | None = Field(default=None, ge=1)
    dp: int | None = Field(default=None, ge=1)
    ep: int | None = Field(default=None, ge=0, description="0 where the source gives EP 0 (no expert parallelism)")
    mode: Literal["offline", "static_batch", "concurrency", "request_rate"] | None = None
    input_tokens: float | None = Field(default=None, gt=0)
    output_tokens: float | None = Field(default=None, gt=0)
    concurrency: float | None = Field(default=None, gt=0)
    request_rate: float | None = Field(default=None, gt=0)
    max_batch: int | None = Field(default=None, ge=1)
    output_tok_s: float | None = Field(default=None, gt=0)
    output_tok_s_per_gpu: float | None = Field(default=None, gt=0)
    total_tok_s: float | None = Field(default=None, gt=0)
    requests_per_s: float | None = Field(default=None, gt=0)
    ttft_ms: float | None = Field(default=None, gt=0)
    ttft_stat: str | None = None
    tpot_ms: float | None = Field(default=None, gt=0)
    tpot_stat: str | None = None
    itl_ms: float | None = Field(default=None, gt=0)
    itl_stat: str | None = None
    e2e_ms: float | None = Field(default=None, gt=0)
    e2e_stat: str | None = None
    peak_mem_gb: float | None = Field(default=None, gt=0)
    orig_gpu: str | None = None
    orig_model: str | None = None
    orig_engine: str | None = None
    notes: str | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_none(cls, v: object) -> object:
        return _opt_float(v)

    @model_validator(mode="after")
    def _layout(self) -> MeasurementRow:
        if self.gpu_count and self.tp and self.pp and self.dp and self.tp * self.pp * self.dp != self.gpu_count:
            raise ValueError(f"tp*pp*dp = {self.tp * self.pp * self.dp} does not equal gpu_count {self.gpu_count}")
        return self


MEASUREMENT_COLUMNS: tuple[str, ...] = tuple(MeasurementRow.model_fields)


class CostMemoryConstants(_Strict):
    other_overhead_gib: float = Field(gt=0, description="per-GPU reserve for CUDA context, graphs, workspaces, GiB")
    other_overhead_source: str = Field(min_length=5)
    nccl_mb_by_tp: dict[int, float] = Field(description="NCCL buffer memory by tensor-parallel size, MB")
    nccl_source: str = Field(min_length=5)
    activation_bytes_per_element: int = Field(gt=0)
    logits_bytes_per_element: int = Field(gt=0)
    logits_source: str = Field(min_length=5)


class EngineBudget(_Strict):
    memory_budget: Literal["share_of_total", "share_of_free"]
    current_from_version: str = Field(description="first release of the engine generation the service targets")
    legacy_gpu_memory_utilization: float = Field(gt=0, le=1)
    legacy_max_num_seqs: int = Field(ge=1)
    legacy_max_num_batched_tokens: int = Field(ge=1)
    ends_sequences_at_context_window: bool = Field(
        description="the engine refuses a max length beyond the model's max_position_embeddings, so a sequence "
        "ends there: a run stating a longer input + output did not generate it")
    context_window_source: str = Field(min_length=5)
    source: str = Field(min_length=5)


class ParamBound(_Strict):
    initial: float = Field(gt=0)
    min: float = Field(gt=0)
    max: float = Field(gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> ParamBound:
        if not self.min <= self.initial <= self.max:
            raise ValueError("need min <= initial <= max")
        return self


class CostConstants(_Strict):
    """gpu_catalog/data/costmodel.yaml: planning constants of the cost model, with sources."""

    memory: CostMemoryConstants
    engines: dict[str, EngineBudget]
    initial_params: dict[str, ParamBound]
