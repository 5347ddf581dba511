"""The engine registry: one engine per catalog engine id with a flag vocabulary, and a clear error otherwise."""

from __future__ import annotations

import pytest

from gpu_catalog.loader import load_catalog
from service.engines.errors import LaunchError
from service.engines.registry import ENGINES, engine_for
from service.engines.vocabulary import known_versions


def test_every_catalog_engine_with_a_vocabulary_is_registered() -> None:
    with_vocabulary = {e.id for e in load_catalog().engines if known_versions(e.id)}
    assert with_vocabulary == set(ENGINES)
    assert all(engine_for(engine_id).id == engine_id for engine_id in ENGINES)


def test_unknown_engine_names_the_known_ones() -> None:
    with pytest.raises(LaunchError, match=r"unknown engine 'sglang' \(known: trtllm, vllm\)"):
        engine_for("sglang")
