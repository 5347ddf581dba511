"""Published checkpoints: the weight dtypes a catalog model can be served in as published.

``gpu_catalog/data/checkpoints.yaml`` records, per catalog model, the dtype its own release ships in where
that is not 16-bit (``native``), and the pre-quantised Hugging Face repositories of it (``checkpoints``).
Everything is validated against the catalog (model ids, weight dtype ids) before anything is returned; a
bad value raises ``CatalogError`` naming the file, the row and the field, as ``gpu_catalog.loader`` does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from gpu_catalog.loader import DATA_DIR, Catalog, CatalogError, _read_yaml, _unique, _validate, load_catalog
from gpu_catalog.schema import _Strict

CHECKPOINTS_FILE = "checkpoints.yaml"

# A Hugging Face repository id: owner/name (huggingface_hub's repo-id rule: letters, digits, '-', '_', '.').
_REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*/[A-Za-z0-9][A-Za-z0-9_.\-]*$")
# The 16-bit dtypes a release ships in when it has no ``native`` entry.
_SIXTEEN_BIT = frozenset({"bf16", "fp16"})


def _repo_id(v: str) -> str:
    if not _REPO_ID_RE.match(v):
        raise ValueError("must be a Hugging Face repository id 'owner/name'")
    return v


def _has_url(v: str) -> str:
    if "https://" not in v:
        raise ValueError("must give the https:// address the value was read from")
    return v


RepoId = Annotated[str, AfterValidator(_repo_id)]
SourceText = Annotated[str, AfterValidator(_has_url)]

# The linear weights of a transformer a checkpoint's format may or may not quantise (moe_layout.param_split).
QuantisedPart = Literal["attention", "dense_mlp", "shared_experts", "routed_experts"]
QUANTISED_PARTS: tuple[QuantisedPart, ...] = ("attention", "dense_mlp", "shared_experts", "routed_experts")


@dataclass(frozen=True)
class PartBits:
    """Stored bits per weight of each part of a model's linear weights, as one checkpoint holds them."""

    attention: float
    dense_mlp: float
    shared_experts: float
    routed_experts: float

    @classmethod
    def uniform(cls, bits: float) -> PartBits:
        """Every linear weight at ``bits`` (what an engine's quantisation step makes)."""
        return cls(bits, bits, bits, bits)


class _ModelDtype(_Strict):
    model: str = Field(description="catalog model id (canonical)")
    weight_dtype: str = Field(description="weight dtype id (dtypes.yaml) of the weights")
    source: SourceText = Field(min_length=10, description="where the id and the format were read (https address)")
    notes: str = Field(default="", description="remarks: which weights are quantised, hardware it targets")
    quantised_parts: list[QuantisedPart] = Field(
        default_factory=lambda: list(QUANTISED_PARTS), min_length=1,
        description="the linear weights the format quantises (default: all of them); the others are stored in "
        "`unquantised_dtype` (embeddings, LM head, routers and norms are 16-bit in every checkpoint)",
    )
    unquantised_dtype: str = Field(
        default="bf16", description="weight dtype id of the linear weights outside `quantised_parts`"
    )
    bits_per_weight: float | None = Field(
        default=None, gt=0, le=32,
        description="stored bits per quantised weight, scales included, where the checkpoint's scale groups "
        "differ from its dtype's (dtypes.yaml bits_per_weight); null: the dtype's",
    )


class NativeDtypeSpec(_ModelDtype):
    """The weight dtype a model's own release ships in, where it is not 16-bit."""

    weight_dtype: str | None = Field(  # type: ignore[assignment]
        description="weight dtype id (dtypes.yaml) of the released weights; null when the release's format has "
        "no catalog dtype (then `notes` names the format)"
    )

    @model_validator(mode="after")
    def _format_named(self) -> NativeDtypeSpec:
        if self.weight_dtype is None and not self.notes:
            raise ValueError("a release format with no catalog dtype needs `notes` naming the format")
        return self


class CheckpointSpec(_ModelDtype):
    """One published pre-quantised repository of a catalog model."""

    repo_id: RepoId = Field(description="Hugging Face repository id to serve")
    base_model: RepoId | None = Field(
        default=None, description="the release it was quantised from, where that is a variant of `model`"
    )
    producer: str = Field(min_length=2, description="who published it")
    tool: str = Field(min_length=2, description="what quantised it (with version where the card states one)")


@dataclass(frozen=True)
class CheckpointCatalog:
    native: list[NativeDtypeSpec]
    checkpoints: list[CheckpointSpec]

    @cached_property
    def _native_by_model(self) -> dict[str, str | None]:
        return {n.model: n.weight_dtype for n in self.native}

    def ships_16bit(self, model_id: str) -> bool:
        """The model's own release ships 16-bit weights (it has no ``native`` entry)."""
        return model_id not in self._native_by_model

    def native_weight_dtype(self, model_id: str) -> str | None:
        """The catalog dtype of a release that ships non-16-bit weights; None for a 16-bit release and for a
        release whose format has no catalog dtype (``ships_16bit`` tells them apart)."""
        return self._native_by_model.get(model_id)

    def for_model(self, model_id: str, weight_dtype: str | None = None) -> list[CheckpointSpec]:
        """Published pre-quantised repositories of ``model_id`` (of ``weight_dtype`` when given), file order."""
        return [
            c
            for c in self.checkpoints
            if c.model == model_id and (weight_dtype is None or c.weight_dtype == weight_dtype)
        ]

    def published_dtypes(self, model_id: str) -> set[str]:
        """Every weight dtype ``model_id`` can be served in as published: its release's and its checkpoints'.
        A release with no ``native`` entry counts as both 16-bit dtypes (a BF16 release serves as FP16 by a cast);
        a release in a format with no catalog dtype adds nothing."""
        native = self.native_weight_dtype(model_id)
        out = set(_SIXTEEN_BIT) if self.ships_16bit(model_id) else ({native} if native else set())
        out.update(c.weight_dtype for c in self.checkpoints if c.model == model_id)
        return out

    def serving_entry(self, model_id: str, weight_dtype: str) -> _ModelDtype | None:
        """The entry whose weights a deployment of ``model_id`` in ``weight_dtype`` serves: the release itself
        when it ships that dtype, else the first published checkpoint of it (what a launch serves,
        service/engines/checkpoints.plan_checkpoint); None when an engine's quantisation step makes them."""
        native = next((n for n in self.native if n.model == model_id and n.weight_dtype == weight_dtype), None)
        if native is not None:
            return native
        published = self.for_model(model_id, weight_dtype)
        return published[0] if published else None

    def part_bits(self, model_id: str, weight_dtype: str, dtype_bits: Mapping[str, float]) -> PartBits:
        """Stored bits per weight of each linear part of ``model_id`` served in ``weight_dtype``;
        ``dtype_bits``: every weight dtype's ``bits_per_weight`` (dtypes.yaml). A quantisation step (no entry)
        quantises every linear weight."""
        entry = self.serving_entry(model_id, weight_dtype)
        bits = dtype_bits[weight_dtype]
        if entry is None:
            return PartBits.uniform(bits)
        quantised = entry.bits_per_weight if entry.bits_per_weight is not None else bits
        other = dtype_bits[entry.unquantised_dtype]
        return PartBits(**{p: quantised if p in entry.quantised_parts else other for p in QUANTISED_PARTS})

    def by_repo_id(self, repo_id: str) -> CheckpointSpec | None:
        """The recorded checkpoint a repository id (any case) names, if any."""
        want = repo_id.lower()
        return next((c for c in self.checkpoints if c.repo_id.lower() == want), None)


def load_checkpoints(data_dir: Path = DATA_DIR, catalog: Catalog | None = None) -> CheckpointCatalog:
    """Read and validate checkpoints.yaml against ``catalog`` (loaded from ``data_dir`` when not given)."""
    cat = catalog if catalog is not None else load_catalog(data_dir)
    path = data_dir / CHECKPOINTS_FILE
    raw = _read_yaml(path)
    native = _validate(NativeDtypeSpec, raw, path, "native")
    checkpoints = _validate(CheckpointSpec, raw, path, "checkpoints")
    _unique((n.model for n in native), path, "native.model")
    _unique((c.repo_id.lower() for c in checkpoints), path, "checkpoints.repo_id")

    model_ids = {m.id for m in cat.models}
    dtype_ids = {d.id for d in cat.weight_dtypes}
    sections: tuple[tuple[str, Sequence[_ModelDtype]], ...] = (("native", native), ("checkpoints", checkpoints))
    for section, entries in sections:
        for i, e in enumerate(entries, start=1):
            if e.model not in model_ids:
                known = cat.resolve_model(e.model)
                hint = f" (an alias of '{known.id}': use the canonical id)" if known else ""
                raise CatalogError(path, i, f"{section}.model", f"unknown model '{e.model}'{hint}")
            if e.weight_dtype is not None and e.weight_dtype not in dtype_ids:
                raise CatalogError(
                    path,
                    i,
                    f"{section}.weight_dtype",
                    f"unknown weight dtype '{e.weight_dtype}'; valid: {sorted(dtype_ids)}",
                )
            if e.unquantised_dtype not in dtype_ids:
                raise CatalogError(
                    path,
                    i,
                    f"{section}.unquantised_dtype",
                    f"unknown weight dtype '{e.unquantised_dtype}'; valid: {sorted(dtype_ids)}",
                )
    for i, n in enumerate(native, start=1):
        if n.weight_dtype in _SIXTEEN_BIT:
            raise CatalogError(
                path,
                i,
                "native.weight_dtype",
                "16-bit releases are the default: list only releases that ship another dtype",
            )
    return CheckpointCatalog(native=native, checkpoints=checkpoints)


@lru_cache(maxsize=1)
def shipped_checkpoints() -> CheckpointCatalog:
    """The shipped checkpoints.yaml, validated against the shipped catalog (read once)."""
    return load_checkpoints()
