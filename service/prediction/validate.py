"""Checks of a request before anything is computed: the model it names, the ids and the layout of a deployment.

Each refusal is an ``InvalidRequest`` naming the field, with the valid choices where there is a list of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu_catalog.checkpoints import shipped_checkpoints
from gpu_catalog.schema import GpuSpec, ModelSpec
from service.core.moe_layout import Layout, LayoutError, check_layout
from service.engines.registry import engine_for, foreign_memory_setting
from service.errors import InvalidRequest, unknown_id_detail
from service.prediction.inline_model import inline_model_spec
from service.prediction.levers import check_levers
from service.schemas.predictions import Deployment, InlineModel, Workload

if TYPE_CHECKING:
    from service.prediction.advisor import Advisor


def model_for(adv: Advisor, model: str | None, spec: InlineModel | None, field_name: str = "model") -> ModelSpec:
    """The architecture a request names (a catalog id or name) or gives inline."""
    if spec is not None:
        return inline_model_spec(spec)
    found = adv.catalog.resolve_model(model or "")
    if found is None:
        detail, nearest = unknown_id_detail("model", model or "", adv.catalog.model_names())
        raise InvalidRequest([field_name], detail, title="Unknown model", valid=nearest or None)
    return found


def check_context(model: ModelSpec, wl: Workload) -> None:
    """The workload's context must fit the model's context window."""
    if wl.context_tokens > model.max_position_embeddings:
        raise InvalidRequest(["workload", "max_context_tokens"],
                             f"{wl.context_tokens} tokens exceed the {model.max_position_embeddings}-token "
                             f"context window of {model.id}")


def check_ids(adv: Advisor, dep: Deployment, prefix: list[str | int]) -> GpuSpec:
    def unknown(kind: str, value: str, known: list[str], name: str) -> InvalidRequest:
        return InvalidRequest([*prefix, name], f"unknown {kind} '{value}'; valid: {', '.join(sorted(known))}",
                              title=f"Unknown {kind}", valid=sorted(known))

    if dep.gpu not in adv.gpus:
        raise unknown("GPU", dep.gpu, list(adv.gpus), "gpu")
    if dep.weight_dtype not in adv.weight_dtypes:
        raise unknown("weight dtype", dep.weight_dtype, list(adv.weight_dtypes), "weight_dtype")
    if dep.kv_dtype not in adv.kv_dtypes:
        raise unknown("KV dtype", dep.kv_dtype, list(adv.kv_dtypes), "kv_dtype")
    engine = adv.engines[dep.engine]
    if dep.engine_version is not None and dep.engine_version not in engine.versions:
        raise unknown(f"{dep.engine} version", dep.engine_version, engine.versions, "engine_version")
    return adv.gpus[dep.gpu]


def check_checkpoint(model: ModelSpec, dep: Deployment, prefix: list[str | int]) -> None:
    """A named checkpoint must be a published checkpoint of the model holding the deployment's weight dtype."""
    if dep.checkpoint is None:
        return
    ckpts = shipped_checkpoints()
    valid = [c.repo_id for c in ckpts.for_model(model.id, dep.weight_dtype)]
    found = ckpts.by_repo_id(dep.checkpoint)
    if found is None or found.model != model.id or found.weight_dtype != dep.weight_dtype:
        what = ("not a recorded checkpoint" if found is None else
                f"a checkpoint of {found.model}" if found.model != model.id else f"{found.weight_dtype} weights")
        raise InvalidRequest([*prefix, "checkpoint"], f"checkpoint '{dep.checkpoint}' is {what}; published "
                             f"{dep.weight_dtype} checkpoints of {model.id}: {', '.join(valid) or 'none'}",
                             valid=valid)


def check_parallel(model: ModelSpec, dep: Deployment, gpu: GpuSpec, prefix: list[str | int]) -> None:
    """The layout's dp and ep: ep divides tp x dp and the routed experts (moe_layout.check_layout), the engine
    can express it (its ``parallel_settings``), and a replica's tp x pp x dp GPUs fit a node unless it may span
    nodes."""
    if dep.dp == 1 and dep.ep is None:
        return
    layout = Layout(tp=dep.tp, pp=dep.pp, dp=dep.dp, ep=dep.ep or 1)
    try:
        check_layout(model, layout)
        engine_for(dep.engine).parallel_settings(layout)
    except LayoutError as exc:
        raise InvalidRequest([*prefix, exc.field], str(exc), valid=[str(v) for v in exc.valid or []] or None) from exc
    if layout.gpus > gpu.max_gpus_per_node and not dep.multi_node:
        raise InvalidRequest([*prefix, "dp"], f"tp x pp x dp = {layout.gpus} exceeds the {gpu.max_gpus_per_node} "
                             f"{gpu.id} GPUs of one node; set multi_node: true to span nodes")


def check_runnable(adv: Advisor, model: ModelSpec, dep: Deployment, wl: Workload, prefix: list[str | int]) -> None:
    """Raise InvalidRequest for a deployment the engine cannot start (not for one that merely does not fit)."""
    gpu = check_ids(adv, dep, prefix)
    check_levers(adv, model, dep, prefix)
    engine = adv.engines[dep.engine]
    if gpu.vendor not in engine.vendors:
        raise InvalidRequest([*prefix, "engine"], f"{engine.name} does not run on {gpu.vendor.upper()} GPUs "
                             f"({gpu.id}); engines for {gpu.id}: "
                             f"{', '.join(e.id for e in adv.engines.values() if gpu.vendor in e.vendors)}")
    for kind, dtype, name in (("weight", dep.weight_dtype, "weight_dtype"), ("kv", dep.kv_dtype, "kv_dtype")):
        if (dep.engine, kind, dtype, gpu.architecture) not in adv.support:
            ok = sorted({d for (e, k, d, a) in adv.support if e == dep.engine and k == kind
                         and a == gpu.architecture})
            raise InvalidRequest([*prefix, name], f"{engine.name} does not run {kind} dtype '{dtype}' on "
                                 f"{gpu.architecture} GPUs ({gpu.id}); it runs: {', '.join(ok) or 'none'}",
                                 valid=ok)
    if model.num_attention_heads % dep.tp:
        divisors = [d for d in range(1, model.num_attention_heads + 1) if model.num_attention_heads % d == 0]
        raise InvalidRequest([*prefix, "tp"], f"tp={dep.tp} does not divide the {model.num_attention_heads} "
                             f"attention heads of {model.id}; valid tp: {divisors[:12]}")
    if dep.tp > model.num_kv_heads and dep.tp % model.num_kv_heads:
        raise InvalidRequest([*prefix, "tp"], f"tp={dep.tp} above the {model.num_kv_heads} KV heads must be a "
                             "multiple of them (each KV head is replicated on tp / kv_heads GPUs)")
    if dep.pp > model.num_layers:
        raise InvalidRequest([*prefix, "pp"], f"pp={dep.pp} exceeds the {model.num_layers} layers of {model.id}")
    per_node = gpu.max_gpus_per_node
    if dep.tp > per_node:
        raise InvalidRequest([*prefix, "tp"], f"tp={dep.tp} exceeds the {per_node} {gpu.id} GPUs one node holds; "
                             "tensor parallelism stays within a node (use pp across nodes)")
    if dep.tp * dep.pp > per_node and not dep.multi_node:
        raise InvalidRequest([*prefix, "pp"], f"tp x pp = {dep.tp * dep.pp} exceeds the {per_node} {gpu.id} GPUs "
                             "of one node; set multi_node: true to span nodes with pipeline stages")
    if dep.ep is not None and not model.num_experts:
        raise InvalidRequest([*prefix, "ep"], f"{model.id} has no experts; ep applies to MoE models only")
    check_parallel(model, dep, gpu, prefix)
    check_checkpoint(model, dep, prefix)
    check_context(model, wl)
    max_len = dep.engine_args.max_model_len
    if max_len is not None and max_len < wl.input_tokens + wl.output_tokens:
        raise InvalidRequest([*prefix, "engine_args", "max_model_len"],
                             f"max_model_len {max_len} is shorter than input + output = "
                             f"{wl.input_tokens + wl.output_tokens} tokens")
    foreign = foreign_memory_setting(dep.engine, dep.engine_args)
    if foreign is not None:
        raise InvalidRequest([*prefix, "engine_args", foreign[0]], foreign[1])
