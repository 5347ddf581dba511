"""The engine settings of each lever per engine version (gpu_catalog/data/levers.yaml ``engine_levers``, checked
there against the vocabularies), for the launch renderers."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from gpu_catalog.levers import EngineLevers, load_levers
from service.engines.errors import LaunchError

if TYPE_CHECKING:
    from service.engines.base import Context


@lru_cache(maxsize=1)
def _all() -> dict[tuple[str, str], EngineLevers]:
    return {(e.engine, e.version): e for e in load_levers().engine_levers}


def engine_levers(engine: str, version: str) -> EngineLevers:
    """The lever settings of ``engine`` ``version``; LaunchError when levers.yaml has none for it."""
    found = _all().get((engine, version))
    if found is None:
        raise LaunchError(f"levers.yaml has no lever settings for {engine} {version}")
    return found


def method_name(engine: str, version: str, method: str) -> str:
    """The engine's name for our speculative method; LaunchError when the version has none."""
    names = engine_levers(engine, version).speculative.methods or {}
    if method not in names:
        raise LaunchError(f"{engine} {version} has no speculative method {method}; it has {', '.join(sorted(names))}")
    return names[method]


def draft_repository(ctx: Context) -> str | None:
    """The repository of the deployment's draft (EAGLE-3 head or draft model), None for a method without one
    (MTP, n-gram); LaunchError when the method needs one and none is known."""
    spec = ctx.spec.speculative
    if spec is None or spec.method not in ("eagle3", "draft_model"):
        return None
    if spec.draft is None:
        raise LaunchError(f"no {spec.method} draft repository is known for {ctx.spec.model_id}: name it in "
                          "deployment.speculative.draft_model")
    return spec.draft
