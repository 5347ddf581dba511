"""Which checkpoint a launch serves: the model's own, a published pre-quantised one, or the output of a
quantisation step (the engine's quantisation tool: llm-compressor for vLLM, ModelOpt for TensorRT-LLM).

What a model's release ships and which pre-quantised repositories of it exist are catalog data
(``gpu_catalog/data/checkpoints.yaml``, ``gpu_catalog.checkpoints``). A 16-bit release serves FP16/BF16 (and
vLLM's dynamic FP8) and is the input of every quantisation step; a release in another dtype (DeepSeek-V3/R1
FP8, gpt-oss MXFP4 experts) serves its own dtype and the dtypes of its published checkpoints only: the
engines' quantisation tools start from 16-bit weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpu_catalog.checkpoints import CheckpointSpec, shipped_checkpoints
from gpu_catalog.schema import ModelSpec
from service.engines.base import Context, Engine, name_tokens
from service.engines.errors import CheckpointError

# Tokens of a repository name that mark a checkpoint already quantised to a weight dtype, for repositories
# neither the catalog nor checkpoints.yaml knows (their name is the only evidence of their format):
# "someone/Model-FP8", "hugging-quants/...-AWQ-INT4", "...quantized.w4a16".
_PREQUANT_NAME_TOKENS: dict[str, tuple[str, ...]] = {
    "nvfp4": ("nvfp4", "fp4"),
    "mxfp4": ("mxfp4",),
    "w4a8-awq": ("w4a8",),
    "int4-awq": ("awq",),
    "int4-gptq": ("gptq", "w4a16"),
    "int8-sq": ("w8a8", "int8", "smoothquant"),
    "fp8": ("fp8",),
}
_SIXTEEN_BIT = ("fp16", "bf16")

# Output-directory suffix per quantised weight dtype: ./<repo basename>-<suffix>.
CHECKPOINT_SUFFIX = {"fp8": "fp8", "int4-awq": "awq-int4", "int4-gptq": "gptq-int4", "int8-sq": "w8a8-int8",
                      "w4a8-awq": "w4a8-awq", "nvfp4": "nvfp4"}


def checkpoint_weight_dtype(model_id: str, model: ModelSpec | None) -> str | None:
    """The weight dtype a repo id already carries: a recorded checkpoint's, a catalog model's release dtype
    (None for a 16-bit release), or for an unknown repository the dtype its name marks; None for 16-bit."""
    ckpts = shipped_checkpoints()
    recorded = ckpts.by_repo_id(model_id)
    if recorded is not None:
        return recorded.weight_dtype
    if model is not None:
        return ckpts.native_weight_dtype(model.id)
    tokens = name_tokens(model_id)
    for dtype, markers in _PREQUANT_NAME_TOKENS.items():
        if tokens.intersection(markers):
            return dtype
    return None


def offered_weight_dtypes(model: ModelSpec | None) -> set[str] | None:
    """The weight dtypes a catalog model can be offered in when its release is not 16-bit: the published ones
    (no engine's quantisation step starts from its weights). None: any dtype a quantisation step produces."""
    if model is None:
        return None
    ckpts = shipped_checkpoints()
    if ckpts.ships_16bit(model.id):
        return None
    return ckpts.published_dtypes(model.id)


def published_for(model: ModelSpec | None, weight_dtype: str) -> list[CheckpointSpec]:
    """The recorded pre-quantised repositories of ``model`` in ``weight_dtype`` (file order)."""
    return [] if model is None else shipped_checkpoints().for_model(model.id, weight_dtype)


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
        recorded = shipped_checkpoints().by_repo_id(s.checkpoint)
        if recorded is not None and recorded.weight_dtype != w:
            raise CheckpointError(f"checkpoint {recorded.repo_id} holds {recorded.weight_dtype} weights, not {w}")
        return Checkpoint(served=s.checkpoint, local=s.checkpoint.startswith(("/", "./", "../")), notes=[
            f"Serving the named checkpoint {s.checkpoint}; it must already hold {ctx.weight.name} weights "
            "(its quantization config is read from the checkpoint)."])
    carried = checkpoint_weight_dtype(s.model_id, ctx.model)
    ships_16bit = carried is None and (ctx.model is None or shipped_checkpoints().ships_16bit(ctx.model.id))
    if w in _SIXTEEN_BIT and ships_16bit:
        return Checkpoint(served=s.model_id, local=False)
    if carried == w:
        return Checkpoint(served=s.model_id, local=False, notes=[
            f"{s.model_id} is already a {ctx.weight.name} checkpoint: no quantisation step."])
    if ships_16bit:
        return engine.plan_quantisation(ctx)
    published = published_for(ctx.model, w)
    if published:
        c = published[0]
        return Checkpoint(served=c.repo_id, local=False, notes=[
            f"Serving {c.repo_id}, the {ctx.weight.name} checkpoint of {ctx.model.id if ctx.model else s.model_id} "
            f"published by {c.producer} ({c.tool}): no quantisation step."])
    choices = sorted(checkpoint_weight_dtypes(ctx.model, carried))
    raise CheckpointError(f"{s.model_id} already ships {carried or 'non-16-bit'} weights and no {w} checkpoint of "
                          f"it is published (no quantisation step starts from its weights): weight_dtype one of "
                          f"{', '.join(choices) or 'its published checkpoints'}")


def checkpoint_weight_dtypes(model: ModelSpec | None, carried: str | None) -> set[str]:
    """The dtypes a model whose release is not 16-bit serves in: its release's and its published checkpoints'."""
    out = offered_weight_dtypes(model) or set()
    return out | ({carried} if carried else set())
