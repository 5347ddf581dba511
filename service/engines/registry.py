"""The engines the service renders launches for and reads defaults of, by catalog engine id."""

from __future__ import annotations

from service.engines.base import Engine
from service.engines.errors import LaunchError
from service.engines.trtllm import TrtLlm
from service.engines.vllm import Vllm

ENGINES: dict[str, Engine] = {e.id: e for e in (Vllm(), TrtLlm())}


def engine_for(engine_id: str) -> Engine:
    """The engine of a catalog engine id; LaunchError naming the known ids otherwise."""
    engine = ENGINES.get(engine_id)
    if engine is None:
        raise LaunchError(f"unknown engine '{engine_id}' (known: {', '.join(sorted(ENGINES))})")
    return engine


def foreign_memory_setting(engine_id: str, settings: object) -> tuple[str, str] | None:
    """The memory-fraction setting of another engine that ``settings`` (an object with the settings as
    attributes) gives, with why ``engine_id`` refuses it; None when it gives none."""
    own = engine_for(engine_id)
    for other in ENGINES.values():
        setting = other.memory_fraction_setting
        if setting != own.memory_fraction_setting and getattr(settings, setting, None) is not None:
            return setting, f"is a {other.name} setting; {own.name} takes {own.memory_fraction_setting}"
    return None
