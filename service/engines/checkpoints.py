"""Which checkpoint a launch serves: the model's own, a pre-quantised one, or the output of a quantisation
step (the engine's quantisation tool: llm-compressor for vLLM, ModelOpt for TensorRT-LLM).

The original checkpoint serves FP16/BF16 (and vLLM's dynamic FP8); a repository whose name or catalog family
marks it as already quantised serves its own weight dtype; any other weight dtype needs a quantisation step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpu_catalog.schema import ModelSpec
from service.engines.base import Context, Engine, name_tokens
from service.engines.errors import CheckpointError

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

# Output-directory suffix per quantised weight dtype: ./<repo basename>-<suffix>.
CHECKPOINT_SUFFIX = {"fp8": "fp8", "int4-awq": "awq-int4", "int4-gptq": "gptq-int4", "int8-sq": "w8a8-int8",
                      "w4a8-awq": "w4a8-awq", "nvfp4": "nvfp4"}


def checkpoint_weight_dtype(model_id: str, model: ModelSpec | None) -> str | None:
    """The weight dtype a repo id already carries (from its name, or the catalog family's native format);
    None for an ordinary 16-bit checkpoint."""
    tokens = name_tokens(model_id)
    for dtype, markers in _PREQUANT_NAME_TOKENS.items():
        if tokens.intersection(markers):
            return dtype
    if model is not None:
        return _NATIVE_WEIGHT_DTYPE_BY_FAMILY.get(model.family)
    return None


@dataclass
class Checkpoint:
    served: str                       # what the server loads: HF id or local output path
    local: bool                       # a directory produced by a step (or a user path)
    dynamic_fp8: bool = False         # vLLM quantises a 16-bit checkpoint to FP8 at load time
    steps: list[dict[str, str]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def output_dir(model_id: str, weight_dtype: str) -> str:
    return f"./{model_id.rstrip('/').split('/')[-1]}-{CHECKPOINT_SUFFIX[weight_dtype]}"


def plan_checkpoint(ctx: Context, engine: Engine) -> Checkpoint:
    s, w = ctx.spec, ctx.weight.id
    if s.checkpoint:
        return Checkpoint(served=s.checkpoint, local=s.checkpoint.startswith(("/", "./", "../")), notes=[
            f"Serving the named checkpoint {s.checkpoint}; it must already hold {ctx.weight.name} weights "
            "(its quantization config is read from the checkpoint)."])
    carried = checkpoint_weight_dtype(s.model_id, ctx.model)
    if w in ("fp16", "bf16"):
        if carried is not None:
            raise CheckpointError(f"{s.model_id} ships {carried} weights, not {w}; name a 16-bit checkpoint "
                                  f"in `checkpoint` or pick weight_dtype {carried}")
        return Checkpoint(served=s.model_id, local=False)
    if carried == w:
        return Checkpoint(served=s.model_id, local=False, notes=[
            f"{s.model_id} is already a {ctx.weight.name} checkpoint: no quantisation step."])
    if carried is not None:
        raise CheckpointError(f"{s.model_id} already ships {carried} weights; re-quantising it to {w} is not "
                              f"supported: name a {w} checkpoint in `checkpoint`")
    return engine.plan_quantisation(ctx)
