"""costmodel.py is the cost model's front door: every name it exports is the object of the module that owns it."""

from __future__ import annotations

import importlib

import pytest

from service.core import costmodel

OWNERS = ("candidates", "memory", "serve", "serve_kernel", "step_model", "tables", "types")


@pytest.mark.parametrize("name", costmodel.__all__)
def test_each_exported_name_is_its_owners_object(name: str) -> None:
    owners = [importlib.import_module(f"service.core.{m}") for m in OWNERS] + [importlib.import_module("service.units")]
    held = [m for m in owners if name in vars(m) and getattr(m, name) is getattr(costmodel, name)]
    assert held, f"{name} is defined nowhere but costmodel"
