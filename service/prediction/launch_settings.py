"""The engine settings a prediction assumes (the request's, else the engine version's defaults on the GPU) and
the command that starts the deployment with exactly those settings."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gpu_catalog.schema import GpuSpec, ModelSpec
from service.engines.base import LaunchSpec
from service.engines.defaults import EngineDefaults
from service.engines.errors import LaunchError
from service.engines.launch import render_launch as render_engine_launch
from service.engines.registry import engine_for
from service.prediction.levers import with_launch_levers
from service.schemas.predictions import Deployment, Launch, ResolvedSettings, Workload

if TYPE_CHECKING:
    from service.prediction.advisor import Advisor


def settings_for(adv: Advisor, dep: Deployment, gpu: GpuSpec, wl: Workload) -> tuple[ResolvedSettings, EngineDefaults]:
    version = dep.engine_version or adv.engines[dep.engine].default_version
    d = adv.defaults(dep.engine, version, gpu)
    a = dep.engine_args
    setting = engine_for(dep.engine).memory_fraction_setting
    fraction = getattr(a, setting)
    return ResolvedSettings(
        engine_version=version, max_num_seqs=a.max_num_seqs or d.max_num_seqs,
        max_num_batched_tokens=a.max_num_batched_tokens or d.max_num_batched_tokens,
        memory_fraction=fraction if fraction is not None else d.mem_fraction,
        memory_fraction_flag=setting,
        max_model_len=a.max_model_len or wl.context_tokens, defaults_source=d.source), d

# --- prediction ----------------------------------------------------------------------------------

def launch(adv: Advisor, model_id: str, dep: Deployment, settings: ResolvedSettings, *,
           wl: Workload | None = None, model: ModelSpec | None = None) -> Launch:
    """The command that starts ``dep`` with exactly the settings the prediction assumed (its levers need ``wl``,
    for the prefix cache, and ``model``, for the EAGLE-3 head measured with it)."""
    try:
        return render_launch(adv, model_id, dep, settings, wl=wl, model=model)
    except LaunchError as exc:
        return Launch(error=str(exc))

def render_launch(adv: Advisor, model_id: str, dep: Deployment, settings: ResolvedSettings, *,
                  wl: Workload | None = None, model: ModelSpec | None = None) -> Launch:
    """``launch``, raising its ``LaunchError`` (a ``CheckpointError`` when no checkpoint plan exists)."""
    a = dep.engine_args
    spec = LaunchSpec(
        model_id=model_id, gpu_id=dep.gpu, tp=dep.tp, pp=dep.pp, replicas=dep.replicas,
        weight_dtype=dep.weight_dtype, kv_dtype=dep.kv_dtype, engine=dep.engine,
        engine_version=settings.engine_version, max_num_seqs=settings.max_num_seqs,
        max_num_batched_tokens=settings.max_num_batched_tokens, max_model_len=settings.max_model_len,
        enable_chunked_prefill=a.enable_chunked_prefill, enable_prefix_caching=a.enable_prefix_caching,
        checkpoint=dep.checkpoint, dp=dep.dp, ep=dep.ep)
    spec = with_launch_levers(adv, spec, dep, wl, model)
    # the memory fraction goes in the setting the engine takes (settings.memory_fraction_flag names it)
    fraction: dict[str, Any] = {settings.memory_fraction_flag: settings.memory_fraction}
    spec = replace(spec, **fraction)
    out = render_engine_launch(spec, adv.catalog)
    return Launch(command=out["command"], container=out["container"], args=out["args"], files=out["files"],
                  steps=out["steps"], replicas=out["replicas"], notes=out["notes"])
