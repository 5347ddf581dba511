"""The engine settings of each lever per engine version (gpu_catalog/data/levers.yaml ``engine_levers``, checked
there against the vocabularies), for the launch renderers."""

from __future__ import annotations

from functools import lru_cache

from gpu_catalog.levers import EngineLevers, load_levers
from service.engines.errors import LaunchError


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
