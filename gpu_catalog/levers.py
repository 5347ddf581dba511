"""Reads and validates levers.yaml: speculative-decoding acceptance, host links and the engine flags of each lever;
and benchmarks/lever_measurements.csv, the published measurements of a lever's effect (with and without it).

Validation goes past the field types: a quoted mean accepted length must agree with the stored acceptance rate
through the chain formula, every model, GPU and engine version named must be in the catalog, every engine flag
or YAML key must be in that version's vocabulary (data/engines/<engine>-<version>.yaml), and each GPU's host link
must match its ``pcie_bw_gb_s_bidir``. A bad value raises ``CatalogError`` naming the file, the row and the field.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpu_catalog.loader import DATA_DIR, Catalog, CatalogError, _read_yaml, _unique, _validate, load_catalog

LEVER_MEASUREMENTS_CSV = DATA_DIR / "benchmarks" / "lever_measurements.csv"

Method = Literal["eagle3", "mtp", "ngram", "draft_model"]
METHODS: tuple[Method, ...] = ("eagle3", "mtp", "ngram", "draft_model")

# A quoted mean accepted length is given to 2 decimals; the stored rate, to 3, reproduces it within this.
ACCEPTED_LENGTH_TOLERANCE_TOK = 0.005
# A GPU's catalog host bandwidth (both directions) against 2 x its link's per-direction payload rate: the
# catalog quotes raw rates (PCIe Gen6 x16: 256 GB/s) where the link table holds payload (2 x 121), 5.5 % apart.
HOST_BW_TOLERANCE = 0.10


def mean_accepted_length_tok(acceptance_rate: float, num_speculative_tokens: int) -> float:
    """Tokens per verify step of a k-token chain draft, each accepted with probability a: (1 - a^(k+1)) / (1 - a)."""
    k = num_speculative_tokens
    if acceptance_rate >= 1.0:
        return float(k + 1)
    return (1.0 - acceptance_rate ** (k + 1)) / (1.0 - acceptance_rate)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SpeculativeMeasurement(_Strict):
    id: str = Field(min_length=3, description="unique slug")
    method: Method = Field(description="eagle3, mtp, ngram or draft_model")
    model: str | None = Field(description="catalog model id of the target model; null when not model-specific")
    draft: str | None = Field(default=None, description="the draft model or head the figure was measured with")
    engine: Literal["vllm", "trtllm", "sglang"] | None = Field(description="engine measured on, if stated")
    num_speculative_tokens: int = Field(ge=1, le=16, description="k, draft tokens per verify step")
    quoted_kind: Literal["acceptance_rate", "mean_accepted_length"] = Field(description="what the source states")
    quoted_value: float = Field(gt=0, description="the figure as the source states it (rate, or tokens per step)")
    acceptance_rate: float = Field(ge=0, le=1, description="per-token acceptance rate (converted if quoted as length)")
    workload: str = Field(min_length=3, description="dataset, temperature and anything that limits the figure")
    quote: str = Field(min_length=10, description="the source's words")
    source: str = Field(min_length=8, description="where the quote is")

    @model_validator(mode="after")
    def _conversion(self) -> SpeculativeMeasurement:
        k = self.num_speculative_tokens
        if self.quoted_kind == "acceptance_rate":
            if self.quoted_value != self.acceptance_rate:
                raise ValueError("acceptance_rate must equal the quoted acceptance rate")
        elif not 1.0 <= self.quoted_value <= k + 1:
            raise ValueError(f"a mean accepted length lies in [1, k+1] = [1, {k + 1}]")
        else:
            tau = mean_accepted_length_tok(self.acceptance_rate, k)
            if abs(tau - self.quoted_value) > ACCEPTED_LENGTH_TOLERANCE_TOK:
                raise ValueError(
                    f"acceptance_rate {self.acceptance_rate} gives (1 - a^(k+1)) / (1 - a) = {tau:.4f} "
                    f"tokens per step at k={k}, not the quoted {self.quoted_value}"
                )
        return self


class LeverMeasurement(_Strict):
    """One published measurement of a lever's effect: the same deployment and workload with and without it.

    Only speculative decoding has rows (no prefix-cache TTFT or CPU-offload TPOT pair with a stated GPU, engine
    and workload was found; docs/levers.md lists what was searched), so only its columns exist."""

    row_id: str = Field(pattern=r"^lv-\d{4}$")
    quality: Literal["good", "weak"] = Field(description="weak: part of the configuration inferred; reasons in notes")
    lever: Literal["speculative"]
    method: Method
    source_id: str = Field(min_length=3)
    source: str = Field(min_length=20, description="repository + path + commit, or issue/PR number, or URL")
    engine: Literal["vllm", "trtllm"]
    engine_version: str | None = Field(default=None, description="as the source states it; empty = not stated")
    gpu: str = Field(description="catalog GPU id")
    gpu_count: int = Field(ge=1)
    model: str = Field(description="catalog model id (base of the checkpoint measured)")
    orig_model: str | None = None
    draft: str | None = Field(default=None, description="draft model, head or lookup the source names")
    weight_dtype: str
    tp: int = Field(ge=1)
    ep: int | None = Field(default=None, ge=1)
    input_tokens: int = Field(ge=1)
    output_tokens: int = Field(ge=1)
    concurrency: int = Field(ge=1, description="closed-loop clients or batch size")
    num_speculative_tokens: int = Field(ge=1, le=16, description="k, draft tokens per verify step")
    quoted_accepted_length: float | None = Field(default=None, description="mean accepted length the source gives")
    acceptance_rate: float | None = Field(default=None, ge=0, le=1,
                                          description="from quoted_accepted_length; empty = the catalog default")
    metric: Literal["tpot", "request_latency"] = Field(
        description="what the speed-up is a ratio of: TPOT, or the whole request (prefill included)")
    value_without: float | None = Field(default=None, gt=0, description="the source's figure without the lever")
    value_with: float | None = Field(default=None, gt=0, description="the source's figure with the lever")
    speedup: float = Field(gt=0, description="measured speed-up as the source states it (or from the two values)")
    notes: str = Field(min_length=10, description="the source's words; [weak: reasons] first when weak")

    @model_validator(mode="after")
    def _consistent(self) -> LeverMeasurement:
        if self.quality == "weak" and not self.notes.startswith("[weak: "):
            raise ValueError("a weak row's notes start with '[weak: <reasons>]'")
        if (self.quoted_accepted_length is None) != (self.acceptance_rate is None):
            raise ValueError("give acceptance_rate exactly when a mean accepted length is quoted")
        if self.quoted_accepted_length is not None and self.acceptance_rate is not None:
            tau = mean_accepted_length_tok(self.acceptance_rate, self.num_speculative_tokens)
            if abs(tau - self.quoted_accepted_length) > ACCEPTED_LENGTH_TOLERANCE_TOK:
                raise ValueError(f"acceptance_rate {self.acceptance_rate} gives {tau:.4f} tokens per step at "
                                 f"k={self.num_speculative_tokens}, not the quoted {self.quoted_accepted_length}")
        if (self.value_without is None) != (self.value_with is None):
            raise ValueError("give both value_without and value_with, or neither")
        # throughputs (tok/s): the speed-up is with / without; the source rounds it to 2 decimals
        if (self.value_without is not None and self.value_with is not None
                and abs(self.value_with / self.value_without - self.speedup) > 0.01):
            raise ValueError(f"speedup {self.speedup} is not value_with / value_without "
                                 f"= {self.value_with / self.value_without:.3f}")
        return self


def load_lever_measurements(path: Path = LEVER_MEASUREMENTS_CSV, catalog: Catalog | None = None,
                            ) -> list[LeverMeasurement]:
    """lever_measurements.csv, validated: schema, unique row ids, models and GPUs in the catalog."""
    with path.open(encoding="utf-8", newline="") as fh:
        raw = [{k: (v if v != "" else None) for k, v in row.items()} for row in csv.DictReader(fh)]
    rows = _validate(LeverMeasurement, raw, path)
    _unique((r.row_id for r in rows), path, "row_id")
    catalog = catalog if catalog is not None else load_catalog()
    gpus = {g.id for g in catalog.gpus}
    dtypes = {d.id for d in catalog.weight_dtypes}
    for i, r in enumerate(rows, start=1):
        if catalog.resolve_model(r.model) is None:
            raise CatalogError(path, i, "model", f"'{r.model}' is not a catalog model")
        if r.gpu not in gpus:
            raise CatalogError(path, i, "gpu", f"'{r.gpu}' is not a catalog GPU")
        if r.weight_dtype not in dtypes:
            raise CatalogError(path, i, "weight_dtype", f"'{r.weight_dtype}' is not a catalog weight dtype")
    return rows


class SpeculativeDefault(_Strict):
    method: Method
    model: str | None = Field(description="catalog model id; null = the method's default for any model")
    measurement: str | None = Field(description="id of the measurement used; null = no sourced figure")
    why: str = Field(min_length=10, description="why this figure, or why none")


class MtpModules(_Strict):
    model: str = Field(description="catalog model id")
    num_nextn_predict_layers: int = Field(ge=1, le=16, description="config.json: MTP modules the checkpoint ships")
    quote: str = Field(min_length=10)
    source: str = Field(min_length=8)


class HostLink(_Strict):
    id: str = Field(min_length=3)
    name: str
    bw_gb_s_per_direction: float = Field(gt=0, description="payload bandwidth one way, GB/s (1e9 bytes)")
    quote: str = Field(min_length=10)
    source: str = Field(min_length=8)


class GpuHostLink(_Strict):
    gpu: str = Field(description="catalog GPU id")
    link: str = Field(description="host link id")
    source: str = Field(min_length=8, description="where the link generation is stated")
    assumed: bool = Field(default=False, description="no source of its own: a sibling product's link")


class EngineSetting(_Strict):
    flag: str | None = Field(default=None, description="CLI flag (vLLM)")
    key: str | None = Field(default=None, description="dotted YAML key (TensorRT-LLM extra options)")
    negative: str | None = None
    backend_flag: str | None = None
    value: str | None = Field(default=None, description="the value's shape")
    unit: str | None = None
    methods: dict[Method, str] | None = Field(default=None, description="our method -> the engine's name for it")
    default: bool | None = Field(default=None, description="state when not given; null = decided at run time")
    default_source: str | None = None

    @model_validator(mode="after")
    def _one_name(self) -> EngineSetting:
        if (self.flag is None) == (self.key is None):
            raise ValueError("give exactly one of flag, key")
        return self


class EngineLevers(_Strict):
    engine: str
    version: str
    speculative: EngineSetting
    cpu_offload: EngineSetting | None
    kv_offload: EngineSetting | None
    prefix_cache: EngineSetting
    missing: list[str] = Field(default_factory=list, description="what the vocabulary lacks for the levers")


@dataclass(frozen=True)
class AcceptanceAt:
    """A default acceptance rate at the requested draft length and the measurements it comes from."""

    acceptance_rate: float
    num_speculative_tokens: int
    measurements: tuple[SpeculativeMeasurement, ...]   # one, or the two interpolated between (lower k first)
    # measured: at this k; interpolated: linear in k between two; flat_below / flat_above: outside the measured
    # k, the nearest end's figure
    basis: Literal["measured", "interpolated", "flat_below", "flat_above"]

    @property
    def measured_tokens(self) -> tuple[int, ...]:
        return tuple(m.num_speculative_tokens for m in self.measurements)


@dataclass(frozen=True)
class Levers:
    measurements: list[SpeculativeMeasurement]
    defaults: list[SpeculativeDefault]
    host_links: list[HostLink]
    gpu_host_links: list[GpuHostLink]
    engine_levers: list[EngineLevers]
    mtp_modules: list[MtpModules] = field(default_factory=list)

    @cached_property
    def _measurement(self) -> dict[str, SpeculativeMeasurement]:
        return {m.id: m for m in self.measurements}

    @cached_property
    def _default(self) -> dict[tuple[str, str | None], SpeculativeDefault]:
        return {(d.method, d.model): d for d in self.defaults}

    def default_acceptance(self, method: str, model_id: str | None) -> SpeculativeMeasurement | None:
        """The measurement behind the default acceptance of ``method`` for ``model_id`` (catalog id), if sourced."""
        row = self._default.get((method, model_id)) or self._default.get((method, None))
        return None if row is None or row.measurement is None else self._measurement[row.measurement]

    def default_measurements(self, method: str, model_id: str | None,
                             types: dict[str, str]) -> list[SpeculativeMeasurement]:
        """The measurements behind the default acceptance of ``method`` for ``model_id``, one per measured k, in
        ascending k: those of the model the default row names, and for MTP also those of the models whose
        checkpoints share its MTP module (``mtp_modules`` rows of the same architecture; ``types``: catalog model
        id -> model_type); for the other methods only those of the named row's draft head or model. At one k the
        row the default names wins, then the named model's own figure, then the file's order. Empty when the
        method has no sourced figure."""
        named = self.default_acceptance(method, model_id)
        if named is None:
            return []
        models = {named.model}
        if method == "mtp" and named.model is not None:
            arch = types.get(named.model)
            models |= {r.model for r in self.mtp_modules if arch is not None and types.get(r.model) == arch}
        pool = [m for m in self.measurements if m.method == method and m.model in models]
        if method != "mtp":
            # an EAGLE head's or a draft model's acceptance is its own: another head's figures are not mixed in
            pool = [m for m in pool if m.draft == named.draft]
        best: dict[int, SpeculativeMeasurement] = {}
        for m in sorted(pool, key=lambda m: (m is not named, m.model != named.model)):
            best.setdefault(m.num_speculative_tokens, m)
        return [best[k] for k in sorted(best)]

    def default_acceptance_at(self, method: str, model_id: str | None, num_speculative_tokens: int,
                              types: dict[str, str]) -> AcceptanceAt | None:
        """The default acceptance of ``method`` for ``model_id`` at draft length k (``default_measurements``):
        the figure measured at k; between two measured k, linear in k between the nearest below and above;
        outside the measured range, the nearest end's figure held flat. None without a sourced figure."""
        pool = self.default_measurements(method, model_id, types)
        if not pool:
            return None
        k = num_speculative_tokens
        exact = next((m for m in pool if m.num_speculative_tokens == k), None)
        if exact is not None:
            return AcceptanceAt(exact.acceptance_rate, k, (exact,), "measured")
        if k < pool[0].num_speculative_tokens:
            return AcceptanceAt(pool[0].acceptance_rate, k, (pool[0],), "flat_below")
        if k > pool[-1].num_speculative_tokens:
            return AcceptanceAt(pool[-1].acceptance_rate, k, (pool[-1],), "flat_above")
        lo = max((m for m in pool if m.num_speculative_tokens < k), key=lambda m: m.num_speculative_tokens)
        hi = min((m for m in pool if m.num_speculative_tokens > k), key=lambda m: m.num_speculative_tokens)
        share = (k - lo.num_speculative_tokens) / (hi.num_speculative_tokens - lo.num_speculative_tokens)
        a = lo.acceptance_rate + share * (hi.acceptance_rate - lo.acceptance_rate)
        return AcceptanceAt(a, k, (lo, hi), "interpolated")

    def mtp_modules_of(self, model_id: str, model_type: str | None, types: dict[str, str]) -> int | None:
        """MTP modules the checkpoint ``model_id`` ships: its own row, else that of a listed model of the same
        architecture (``types``: catalog model id -> model_type); None when neither is listed."""
        rows = {r.model: r.num_nextn_predict_layers for r in self.mtp_modules}
        if model_id in rows:
            return rows[model_id]
        return next((n for mid, n in rows.items() if model_type is not None and types.get(mid) == model_type), None)

    def host_link_bw_gb_s_per_direction(self, gpu_id: str) -> float | None:
        links = {h.id: h.bw_gb_s_per_direction for h in self.host_links}
        return next((links[g.link] for g in self.gpu_host_links if g.gpu == gpu_id), None)

    def engine(self, engine: str, version: str) -> EngineLevers | None:
        return next((e for e in self.engine_levers if (e.engine, e.version) == (engine, version)), None)


def _check_models(levers: Levers, catalog: Catalog, path: Path) -> None:
    named: dict[str, list[str | None]] = {
        "speculative_measurements": [m.model for m in levers.measurements],
        "speculative_defaults": [d.model for d in levers.defaults],
        "mtp_modules": [*(r.model for r in levers.mtp_modules)],
    }
    for what, models in named.items():
        for i, model in enumerate(models, start=1):
            spec = catalog.resolve_model(model) if model else None
            if model and (spec is None or spec.id != model):
                raise CatalogError(path, i, f"{what}.model", f"'{model}' is not a catalog model id")
    by_id = levers._measurement
    for i, d in enumerate(levers.defaults, start=1):
        m = by_id.get(d.measurement) if d.measurement else None
        if d.measurement and m is None:
            raise CatalogError(path, i, "speculative_defaults.measurement", f"unknown measurement '{d.measurement}'")
        if m is not None and m.method != d.method:
            raise CatalogError(path, i, "speculative_defaults.measurement", f"'{m.id}' measures {m.method}")
    _unique((f"{d.method}/{d.model}" for d in levers.defaults), path, "speculative_defaults")
    for method in METHODS:
        if (method, None) not in levers._default:
            raise CatalogError(path, None, "speculative_defaults", f"no method-wide row (model: null) for {method}")


def _check_gpus(levers: Levers, catalog: Catalog, path: Path) -> None:
    links = {h.id: h for h in levers.host_links}
    gpus = {g.id: g for g in catalog.gpus}
    for i, row in enumerate(levers.gpu_host_links, start=1):
        if row.gpu not in gpus:
            raise CatalogError(path, i, "gpu_host_links.gpu", f"unknown GPU '{row.gpu}'")
        if row.link not in links:
            raise CatalogError(path, i, "gpu_host_links.link", f"unknown link '{row.link}', valid: {sorted(links)}")
        both_ways_gb_s = 2 * links[row.link].bw_gb_s_per_direction
        if abs(gpus[row.gpu].pcie_bw_gb_s_bidir - both_ways_gb_s) > HOST_BW_TOLERANCE * both_ways_gb_s:
            raise CatalogError(
                path,
                i,
                "gpu_host_links.link",
                f"{row.gpu}: pcie_bw_gb_s_bidir "
                f"{gpus[row.gpu].pcie_bw_gb_s_bidir} does not match {row.link} ({both_ways_gb_s} GB/s)",
            )
    _unique((g.gpu for g in levers.gpu_host_links), path, "gpu")
    unlinked = sorted(set(gpus) - {g.gpu for g in levers.gpu_host_links})
    if unlinked:
        raise CatalogError(path, None, "gpu_host_links", f"GPUs without a host link: {unlinked}")


def _vocabulary_has(vocab: dict[str, Any], setting: EngineSetting) -> str | None:
    """Why ``setting`` is not in the vocabulary, or None when it is."""
    if setting.flag is not None:
        flags = vocab.get("flags", {})
        entry = flags.get(setting.flag)
        if entry is None:
            return f"flag '{setting.flag}' is not in the vocabulary"
        negatives = {entry.get("negative"), *entry.get("hidden_aliases", [])}
        if setting.negative is not None and setting.negative not in negatives:
            return f"'{setting.negative}' is not the negative form of {setting.flag}"
        if setting.backend_flag is not None and setting.backend_flag not in flags:
            return f"flag '{setting.backend_flag}' is not in the vocabulary"
        return None
    key = setting.key or ""
    node: dict[str, Any] = {"keys": vocab.get("yaml_keys", {})}
    for part in key.split("."):
        child = node.get("keys", {}).get(part)
        if child is None:
            return f"YAML key '{setting.key}' is not in the vocabulary"
        node = child
    choices = set(node.get("decoding_type_choices", []))
    if setting.methods and choices and not set(setting.methods.values()) <= choices:
        return f"{sorted(set(setting.methods.values()) - choices)} not in decoding_type_choices"
    if setting.default is not None and node.get("default") is not None and node["default"] != setting.default:
        return f"default {setting.default} differs from the vocabulary's {node['default']}"
    return None


def _check_engines(levers: Levers, catalog: Catalog, data_dir: Path, path: Path) -> None:
    versions = {(e.id, v) for e in catalog.engines for v in e.versions}
    for i, row in enumerate(levers.engine_levers, start=1):
        if (row.engine, row.version) not in versions:
            raise CatalogError(path, i, "engine_levers.version", f"{row.engine} {row.version} is not in engines.yaml")
        vocab = _read_yaml(data_dir / "engines" / f"{row.engine}-{row.version}.yaml")
        for lever in ("speculative", "cpu_offload", "kv_offload", "prefix_cache"):
            setting = getattr(row, lever)
            why = None if setting is None else _vocabulary_has(vocab, setting)
            if why is not None:
                raise CatalogError(path, i, f"engine_levers.{lever}", f"{row.engine} {row.version}: {why}")
    _unique((f"{e.engine}-{e.version}" for e in levers.engine_levers), path, "engine_levers")


def load_levers(data_dir: Path = DATA_DIR, catalog: Catalog | None = None) -> Levers:
    """levers.yaml, validated against its schema, the catalog and the engine vocabularies."""
    path = data_dir / "levers.yaml"
    raw = _read_yaml(path)
    levers = Levers(
        measurements=_validate(SpeculativeMeasurement, raw, path, "speculative_measurements"),
        defaults=_validate(SpeculativeDefault, raw, path, "speculative_defaults"),
        host_links=_validate(HostLink, raw, path, "host_links"),
        gpu_host_links=_validate(GpuHostLink, raw, path, "gpu_host_links"),
        engine_levers=_validate(EngineLevers, raw, path, "engine_levers"),
        mtp_modules=_validate(MtpModules, raw, path, "mtp_modules"),
    )
    _unique((m.id for m in levers.measurements), path, "id")
    _unique((h.id for h in levers.host_links), path, "id")
    catalog = catalog if catalog is not None else load_catalog(data_dir)
    _check_models(levers, catalog, path)
    _check_gpus(levers, catalog, path)
    _check_engines(levers, catalog, data_dir, path)
    return levers
