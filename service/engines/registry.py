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
