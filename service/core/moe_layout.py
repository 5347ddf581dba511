"""Memory and expert traffic of one replica laid out with attention data parallelism and expert parallelism.

A layout ``(tp, pp, dp, ep)`` runs one replica on ``tp * pp * dp`` GPUs:

* ``pp`` pipeline stages each hold ``num_layers / pp`` layers (figures here are the mean over stages).
* Within a stage, ``dp`` attention data-parallel ranks each run their own batch and keep their own KV cache;
  each DP rank's attention, dense MLPs, shared experts and embeddings are split over its ``tp`` GPUs and
  replicated across the ``dp`` ranks.
* The routed experts of a stage are spread over all ``tp * dp`` GPUs: ``ep`` expert-parallel groups each hold
  ``num_experts / ep`` whole experts, whose width is split over the ``tp * dp / ep`` GPUs of the group
  (vLLM: the MoE layers form one group of ``dp * tp`` GPUs, expert-parallel with ``--enable-expert-parallel``,
  tensor-parallel without; TensorRT-LLM: ``moe_expert_parallel_size * moe_tensor_parallel_size`` = GPUs).
* With ``ep > 1`` each MoE layer sends every token's hidden state to the groups holding its routed experts
  (dispatch) and gets the expert outputs back (combine): an all-to-all over NVLink or the network.

Parameter counts come from the config.json fields of the catalog (``ModelSpec``); units are in the names
(``_params`` elements, ``_bytes`` bytes, ``_bits`` bits). Pure Python: no engine, database or web imports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Literal

from gpu_catalog.checkpoints import PartBits
from gpu_catalog.schema import ModelSpec

# Bits of the weights the usual quantisation recipes leave in 16-bit: embeddings, LM head, router and
# norms (dtypes.yaml weight formats quantise the linear layers; quantization_config modules_to_not_convert
# keeps model.embed_tokens, lm_head and mlp.router in BF16 in gpt-oss (transformers docs, quantization/mxfp4)
# and gate and lm_head in MiniMax-M2 (its config.json)).
UNQUANTISED_BITS = 16

# A config-derived parameter split that misses more than this share of the model's stated total has parts
# the schema cannot express (linear-attention layers, gated query projections): the rest is counted as
# TP-split linear weights so the memory is not understated.
_UNEXPLAINED_SHARE = 0.01

Routing = Literal["per_expert", "per_rank"]


class LayoutError(ValueError):
    """The layout cannot run the model: names the field and the valid choices."""

    def __init__(self, field_name: str, message: str, valid: list[int] | None = None) -> None:
        self.field = field_name
        self.message = message
        self.valid = valid
        super().__init__(f"{field_name}: {message}")


@dataclass(frozen=True)
class Layout:
    """Parallel layout of one replica."""

    tp: int = 1  # tensor-parallel GPUs of one attention DP rank
    pp: int = 1  # pipeline stages
    dp: int = 1  # attention data-parallel ranks (each with its own batch and KV cache)
    ep: int = 1  # expert-parallel groups the routed experts are split over

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def moe_tp(self) -> int:
        """GPUs that split the width of each routed expert (tp * dp / ep)."""
        return self.tp * self.dp // self.ep


def check_layout(m: ModelSpec, layout: Layout) -> None:
    """Raise ``LayoutError`` naming the field when ``layout`` cannot run ``m``."""
    for name in ("tp", "pp", "dp", "ep"):
        if getattr(layout, name) < 1:
            raise LayoutError(name, "must be a positive integer")
    if layout.pp > m.num_layers:
        raise LayoutError("pp", f"at most num_layers = {m.num_layers} pipeline stages")
    if layout.ep > 1 and not m.num_experts:
        raise LayoutError("ep", f"{m.id} is dense: expert parallelism needs an MoE model (ep must be 1)", [1])
    if (layout.tp * layout.dp) % layout.ep:
        choices = [d for d in range(1, layout.tp * layout.dp + 1) if (layout.tp * layout.dp) % d == 0]
        raise LayoutError("ep", f"must divide tp x dp = {layout.tp * layout.dp}; valid: {choices}", choices)
    if m.num_experts and m.num_experts % layout.ep:
        choices = [d for d in range(1, layout.tp * layout.dp + 1)
                   if (layout.tp * layout.dp) % d == 0 and m.num_experts % d == 0]
        raise LayoutError("ep", f"must divide the {m.num_experts} routed experts of {m.id}; valid: {choices}",
                          choices)


@dataclass(frozen=True)
class ParamSplit:
    """Parameters of a model by how a layout places them, elements (all layers)."""

    attn_split_params: float  # query/output projections (MLA: the q_b, kv_b and o up/out projections)
    attn_kv_params: float  # GQA key/value projections (split by KV head: replicated once tp > KV heads)
    attn_replicated_params: float  # MLA down-projections q_a and kv_a (ReplicatedLinear on every TP rank)
    dense_mlp_params: float  # MLPs of the dense layers (gate, up, down)
    shared_expert_params: float  # shared experts of the MoE layers
    routed_expert_params: float  # routed experts of the MoE layers
    router_params: float  # router gates (hidden x experts per MoE layer)
    embedding_params: float  # input embedding
    lm_head_params: float  # output projection (0 when tied to the embedding)
    norm_params: float  # RMSNorm weights
    other_params: float  # stated total minus the above when the split misses > 1% of it
    moe_layers: int

    @property
    def attention_params(self) -> float:
        """Every attention weight: query/output, key/value and MLA down-projections."""
        return self.attn_split_params + self.attn_kv_params + self.attn_replicated_params

    @property
    def total_params(self) -> float:
        return sum(getattr(self, f.name) for f in fields(self) if f.name.endswith("_params"))


def _gated_mlp_params(hidden: int, width: int) -> int:
    # gate, up and down projections of a SwiGLU MLP
    return 3 * hidden * width


def param_split(m: ModelSpec) -> ParamSplit:
    """Split ``m``'s parameters from its config.json fields (biases left out)."""
    h, n_layers = m.hidden_size, m.num_layers
    if m.mla_kv_lora_rank is not None:
        rope = m.mla_qk_rope_head_dim or 0
        qk = (m.mla_qk_nope_head_dim or (m.head_dim - rope)) + rope
        v = m.mla_v_head_dim or m.head_dim
        heads = m.num_attention_heads
        kv_a = h * (m.mla_kv_lora_rank + rope)
        kv_b = m.mla_kv_lora_rank * heads * (qk - rope + v)
        if m.mla_q_lora_rank:
            q_a, q_b = h * m.mla_q_lora_rank, m.mla_q_lora_rank * heads * qk
        else:
            q_a, q_b = 0, h * heads * qk
        replicated, split, kv = (q_a + kv_a) * n_layers, (q_b + kv_b + heads * v * h) * n_layers, 0
        norms_layer = 2 * h + (m.mla_q_lora_rank or 0) + m.mla_kv_lora_rank
    else:
        q_o = 2 * h * m.num_attention_heads * m.head_dim
        replicated, split, kv = 0, q_o * n_layers, 2 * h * m.num_kv_heads * m.head_dim * n_layers
        norms_layer = 2 * h
    moe_layers = n_layers - (m.first_k_dense_layers or 0) if m.num_experts else 0
    dense_layers = n_layers - moe_layers
    expert = _gated_mlp_params(h, m.moe_intermediate_size or m.intermediate_size)
    split_params = ParamSplit(
        attn_split_params=float(split),
        attn_kv_params=float(kv),
        attn_replicated_params=float(replicated),
        dense_mlp_params=float(dense_layers * _gated_mlp_params(h, m.intermediate_size)),
        shared_expert_params=float(moe_layers * (m.num_shared_experts or 0) * expert),
        routed_expert_params=float(moe_layers * (m.num_experts or 0) * expert),
        router_params=float(moe_layers * h * (m.num_experts or 0)),
        embedding_params=float(m.vocab_size * h),
        lm_head_params=0.0 if m.tie_word_embeddings else float(m.vocab_size * h),
        norm_params=float(n_layers * norms_layer + h),
        other_params=0.0,
        moe_layers=moe_layers,
    )
    unexplained = m.total_params_b * 1e9 - split_params.total_params
    if unexplained > _UNEXPLAINED_SHARE * m.total_params_b * 1e9:
        return replace(split_params, other_params=unexplained)
    return split_params


@dataclass(frozen=True)
class MtpParams:
    """Parameters of a checkpoint's multi-token-prediction modules, elements (all modules)."""

    dense_params: float          # attention, shared experts or dense MLP, router, eh_proj and norms
    routed_expert_params: float  # routed experts (MoE): spread over the GPUs as the main model's

    @property
    def total_params(self) -> float:
        return self.dense_params + self.routed_expert_params


def mtp_params(m: ModelSpec, modules: int) -> MtpParams:
    """``modules`` MTP modules of ``m`` (config.json ``num_nextn_predict_layers``), each one decoder layer of
    the model's own kind (an MoE layer with every routed expert when the model's last layers are MoE) plus
    ``eh_proj`` (2 x hidden -> hidden) and three RMSNorms (enorm, hnorm, the shared head's norm); the embedding
    and output head are the main model's (DeepSeek-V3 report, arXiv 2412.19437 section 2.2)."""
    p = param_split(m)
    h, n = m.hidden_size, max(m.num_layers, 1)
    attention = p.attention_params / n
    norms = (p.norm_params - h) / n       # per layer: the model's norms less its final norm (h), not repeated
    if p.moe_layers:
        mlp = (p.shared_expert_params + p.router_params) / p.moe_layers
        routed = p.routed_expert_params / p.moe_layers
    else:
        mlp, routed = p.dense_mlp_params / max(n - p.moe_layers, 1), 0.0
    return MtpParams(dense_params=modules * (attention + norms + mlp + 2 * h * h + 3 * h),
                     routed_expert_params=modules * routed)


@dataclass(frozen=True)
class WeightBytesPerRank:
    """Weight bytes one GPU of the layout holds (mean over pipeline stages), by part."""

    attention_bytes: float
    dense_mlp_bytes: float
    shared_expert_bytes: float
    routed_expert_bytes: float
    embedding_bytes: float  # input embedding + LM head, split over the DP rank's tp GPUs
    router_norm_bytes: float  # router gates and norms, on every GPU
    other_bytes: float

    @property
    def total_bytes(self) -> float:
        return sum(getattr(self, f.name) for f in fields(self))


def weight_bytes_per_rank(
    m: ModelSpec,
    layout: Layout,
    linear_bits: float,
    parts: PartBits | None = None,
    unquantised_bits: float = UNQUANTISED_BITS,
) -> WeightBytesPerRank:
    """Weight bytes per GPU. ``linear_bits``: bits per weight of the quantised linear layers (the weight
    dtype's ``bits_per_weight``); ``parts``: of each linear part where the checkpoint stores them differently
    (checkpoints.yaml ``quantised_parts``: gpt-oss ships MXFP4 experts beside BF16 attention); embeddings,
    LM head, routers and norms at ``unquantised_bits``."""
    check_layout(m, layout)
    s = param_split(m)
    tp, pp = layout.tp, layout.pp
    b = parts if parts is not None else PartBits.uniform(linear_bits)
    lin, raw = linear_bits / 8.0, unquantised_bits / 8.0
    kv_share = math.ceil(m.num_kv_heads / tp) / m.num_kv_heads
    attention = (s.attn_split_params / tp + s.attn_kv_params * kv_share + s.attn_replicated_params) * b.attention / 8
    return WeightBytesPerRank(
        attention_bytes=attention / pp,
        dense_mlp_bytes=s.dense_mlp_params / tp * b.dense_mlp / 8 / pp,
        shared_expert_bytes=s.shared_expert_params / tp * b.shared_experts / 8 / pp,
        # each of the ep groups holds 1/ep of the experts, split in width over its moe_tp GPUs
        routed_expert_bytes=s.routed_expert_params / (layout.ep * layout.moe_tp) * b.routed_experts / 8 / pp,
        embedding_bytes=(s.embedding_params + s.lm_head_params) / tp * raw / pp,
        router_norm_bytes=(s.router_params + s.norm_params) * raw / pp,
        other_bytes=s.other_params / tp * lin / pp,
    )


def _kv_elems_per_token_per_layer_per_rank(m: ModelSpec, layout: Layout) -> float:
    if m.mla_kv_lora_rank is not None:
        # one latent + one shared rope key per token, for all heads: every TP rank keeps the whole of it
        return float(m.mla_kv_lora_rank + (m.mla_qk_rope_head_dim or 0))
    return 2.0 * math.ceil(m.num_kv_heads / layout.tp) * m.head_dim


def kv_bytes_per_token_per_rank(m: ModelSpec, layout: Layout, kv_bits: float) -> float:
    """KV bytes a GPU keeps per context token of a sequence in its own DP rank's batch, over the layers of
    its stage that grow with the whole context (sliding-window layers: ``kv_bytes_per_sequence_per_rank``)."""
    check_layout(m, layout)
    full = m.num_layers - (m.sliding_window_layers or 0) - (m.linear_attention_layers or 0)
    return _kv_elems_per_token_per_layer_per_rank(m, layout) * full / layout.pp * kv_bits / 8.0


def kv_bytes_per_sequence_per_rank(m: ModelSpec, layout: Layout, kv_bits: float, context_tokens: float) -> float:
    """KV bytes of one ``context_tokens``-token sequence on each GPU of the DP rank that runs it."""
    window_layers = m.sliding_window_layers or 0
    window = min(context_tokens, m.sliding_window_tokens) if m.sliding_window_tokens else context_tokens
    per_layer = _kv_elems_per_token_per_layer_per_rank(m, layout) * kv_bits / 8.0
    return (
        kv_bytes_per_token_per_rank(m, layout, kv_bits) * context_tokens
        + per_layer * window_layers / layout.pp * window
    )


def remote_groups_per_token(m: ModelSpec, layout: Layout, routing: Routing = "per_expert") -> float:
    """Expected expert-parallel groups other than its own that one token's hidden state is sent to per MoE
    layer, under uniform routing. ``per_expert``: one copy per routed expert held remotely,
    ``k (ep - 1) / ep``; ``per_rank``: one copy per remote group holding at least one of its ``k`` experts,
    ``(ep - 1) (1 - C(E - E/ep, k) / C(E, k))`` (DeepEP-style dispatch that deduplicates per destination)."""
    check_layout(m, layout)
    ep, k, e = layout.ep, m.experts_per_token or 0, m.num_experts or 0
    if ep == 1 or not e:
        return 0.0
    if routing == "per_expert":
        return k * (ep - 1) / ep
    miss = math.comb(e - e // ep, k) / math.comb(e, k)
    return (ep - 1) * (1.0 - miss)


def all_to_all_bytes_per_step_per_rank(
    m: ModelSpec,
    layout: Layout,
    tokens_per_dp_rank: float,
    dispatch_bytes_per_element: float = 2.0,
    combine_bytes_per_element: float = 2.0,
    routing: Routing = "per_expert",
) -> float:
    """Bytes one GPU sends in the expert all-to-all of one step (dispatch + combine, all MoE layers of its
    stage) when its DP rank's step carries ``tokens_per_dp_rank`` tokens (decode: its batch; prefill: its
    chunk). The tokens of a DP rank are split over its ``tp`` GPUs before dispatch; a token bound for a group
    goes to each of the group's ``moe_tp`` GPUs (each holds a slice of the expert's width) and each returns
    its partial output. 0 without expert parallelism (TP-split experts all-reduce instead, as dense layers
    do). Element sizes: BF16 hidden states by default; 1 for FP8 dispatch."""
    copies = remote_groups_per_token(m, layout, routing) * layout.moe_tp
    per_layer = (
        (tokens_per_dp_rank / layout.tp)
        * copies
        * m.hidden_size
        * (dispatch_bytes_per_element + combine_bytes_per_element)
    )
    return per_layer * param_split(m).moe_layers / layout.pp


def routed_experts_touched_per_step(m: ModelSpec, layout: Layout, tokens_per_dp_rank: float) -> float:
    """Expected distinct routed experts of one MoE layer that a step's tokens use, under uniform routing: all
    ``dp`` ranks' tokens meet in the MoE layers, ``E (1 - (1 - k/E)^(tokens x dp))``."""
    check_layout(m, layout)
    e, k = m.num_experts or 0, m.experts_per_token or 0
    if not e:
        return 0.0
    return e * (1.0 - (1.0 - k / e) ** (tokens_per_dp_rank * layout.dp))


def routed_expert_bytes_read_per_step_per_rank(
    m: ModelSpec, layout: Layout, tokens_per_dp_rank: float, expert_bits: float
) -> float:
    """Routed-expert weight bytes one GPU reads in a step (all MoE layers of its stage): the experts the step
    touches, spread evenly over the ``ep`` groups, each GPU holding ``1 / moe_tp`` of an expert's width. The
    busiest group reads more when routing is uneven (a load-imbalance factor the step model fits)."""
    touched = routed_experts_touched_per_step(m, layout, tokens_per_dp_rank)
    expert_params = _gated_mlp_params(m.hidden_size, m.moe_intermediate_size or m.intermediate_size)
    per_layer = touched / layout.ep * expert_params / layout.moe_tp * expert_bits / 8.0
    return per_layer * param_split(m).moe_layers / layout.pp


@dataclass(frozen=True)
class EngineParallelSettings:
    """How an engine spells a layout: command-line flags and (TensorRT-LLM) extra-options YAML keys (each
    engine module's ``parallel_settings`` gives them, or a ``LayoutError`` naming the field it cannot
    express)."""

    flags: dict[str, int | bool]
    yaml_keys: dict[str, int | bool]
