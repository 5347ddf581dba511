"""The flag vocabulary of one engine version: every flag and `--extra_llm_api_options` YAML key it accepts.

Read from ``gpu_catalog/data/engines/<engine>-<version>.yaml`` (flags extracted from the engines' own parsers),
once per process: the renderers and the engine defaults read the same parsed files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from gpu_catalog.loader import DATA_DIR, parse_yaml
from service.engines.errors import LaunchError

VOCAB_DIR = DATA_DIR / "engines"

_VERSION_RE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def version_tuple(version: str | None) -> tuple[int, int, int] | None:
    """(major, minor, patch) of the first version number in a free-text version string, or None."""
    if not version:
        return None
    match = _VERSION_RE.search(version)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


# Vocabulary files parsed and kept: more than the files in gpu_catalog/data/engines (a bound on memory should a
# caller ever pass other paths; the kept documents are read-only).
ENGINE_FILES_KEPT = 32


@lru_cache(maxsize=ENGINE_FILES_KEPT)
def read_engine_file(path: Path) -> Any:
    """An engine vocabulary file as parsed, once per process. Callers do not change what it returns."""
    with path.open(encoding="utf-8") as fh:
        return parse_yaml(fh)


def known_versions(engine: str, data_dir: Path = DATA_DIR) -> list[str]:
    return sorted((p.stem.split("-", 1)[1] for p in (data_dir / "engines").glob(f"{engine}-*.yaml")),
                  key=lambda v: version_tuple(v) or (0, 0, 0))


def vocab_version_for(engine: str, version: str | None, data_dir: Path = DATA_DIR) -> str:
    """The newest vocabulary not newer than ``version`` (the oldest if all are newer; newest if unstated)."""
    versions = known_versions(engine, data_dir)
    v = version_tuple(version)
    if v is None:
        return versions[-1]
    older = [k for k in versions if (version_tuple(k) or (0, 0, 0)) <= v]
    return older[-1] if older else versions[0]


@dataclass(frozen=True)
class FlagSpec:
    """One command-line flag of one engine version, as its own parser declares it."""

    name: str
    type: str                                 # int | float | str | bool | bool-optional | json | path ...
    default: Any = None
    choices: tuple[str, ...] | None = None
    min_value: float | None = None
    max_value: float | None = None
    min_exclusive: bool = False
    max_exclusive: bool = False
    aliases: tuple[str, ...] = ()
    negative: str | None = None               # `--no-x` / `--disable-x` form of a bool-optional flag
    multiple: bool = False

    @property
    def takes_value(self) -> bool:
        return self.type not in ("bool", "bool-optional")

    def parse(self, raw: str) -> int | float | str:
        """The typed value of a command-line string; ValueError when it is not of the flag's type."""
        if self.type == "int":
            return int(raw)
        if self.type == "float":
            return float(raw)
        return raw

    def problem(self, value: object) -> str | None:
        """Why `value` is not acceptable for this flag, or None when it is."""
        if not self.takes_value:
            return None if value is None else f"{self.name} takes no value"
        if self.type == "int":
            if not isinstance(value, int) or isinstance(value, bool):
                return f"{self.name} needs an integer, got {value!r}"
        elif self.type == "float":
            if not isinstance(value, int | float) or isinstance(value, bool):
                return f"{self.name} needs a number, got {value!r}"
        elif not isinstance(value, str):
            return f"{self.name} needs a string, got {value!r}"
        if isinstance(value, int | float):
            if self.min_value is not None and (
                    value < self.min_value or (self.min_exclusive and value == self.min_value)):
                op = ">" if self.min_exclusive else ">="
                return f"{self.name} must be {op} {self.min_value:g}, got {value}"
            if self.max_value is not None and (
                    value > self.max_value or (self.max_exclusive and value == self.max_value)):
                op = "<" if self.max_exclusive else "<="
                return f"{self.name} must be {op} {self.max_value:g}, got {value}"
        if self.choices is not None and str(value) not in self.choices:
            return f"{self.name} must be one of {', '.join(self.choices)}; got {value!r}"
        return None


@dataclass(frozen=True)
class YamlKeySpec:
    """One key of the TRT-LLM `--extra_llm_api_options` YAML (dotted path for nested keys)."""

    path: str
    type: str                                 # object | int | float | str | bool | list[int] ...
    default: Any = None
    choices: tuple[str, ...] | None = None
    min_value: float | None = None
    max_value: float | None = None

    def problem(self, value: object) -> str | None:
        kind = self.type
        if kind == "object":
            return None if isinstance(value, dict) or value is None else f"{self.path} needs a mapping"
        if kind == "bool":
            ok = isinstance(value, bool)
        elif kind == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind == "float":
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        elif kind == "str":
            ok = isinstance(value, str)
        elif kind.startswith("list"):
            ok = isinstance(value, list)
        else:
            ok = True
        if not ok:
            return f"{self.path} needs a value of type {kind}, got {value!r}"
        if isinstance(value, int | float) and not isinstance(value, bool):
            if self.min_value is not None and value < self.min_value:
                return f"{self.path} must be >= {self.min_value:g}, got {value}"
            if self.max_value is not None and value > self.max_value:
                return f"{self.path} must be <= {self.max_value:g}, got {value}"
        if self.choices is not None and isinstance(value, str) and value not in self.choices:
            return f"{self.path} must be one of {', '.join(self.choices)}; got {value!r}"
        return None


@dataclass(frozen=True)
class Vocabulary:
    """The flags (and, for TRT-LLM, the YAML keys) one engine version accepts."""

    engine: str
    version: str
    executable: tuple[str, ...]               # ("vllm", "serve") / ("trtllm-serve",)
    image: str | None
    image_verified: bool
    flags: Mapping[str, FlagSpec]             # canonical name -> spec
    spellings: Mapping[str, str]              # every accepted spelling (aliases, negative forms) -> canonical
    yaml_keys: Mapping[str, YamlKeySpec]      # dotted path -> spec (empty for vLLM)
    raw: Mapping[str, Any] = field(repr=False)  # the whole vocabulary file (defaults_by_device, quantize, ...)

    def flag(self, spelling: str) -> FlagSpec | None:
        canonical = self.spellings.get(spelling)
        return self.flags[canonical] if canonical else None

    def flag_default(self, spelling: str) -> Any:
        spec = self.flag(spelling)
        return spec.default if spec else None

    def yaml_default(self, path: str) -> Any:
        spec = self.yaml_keys.get(path)
        return spec.default if spec else None



def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _choices(v: object) -> tuple[str, ...] | None:
    return tuple(str(c) for c in v) if isinstance(v, list) else None


def _flag_spec(name: str, entry: Mapping[str, Any]) -> FlagSpec:
    return FlagSpec(
        name=name, type=str(entry.get("type", "str")), default=entry.get("default"),
        choices=_choices(entry.get("choices")), min_value=_num(entry.get("min")), max_value=_num(entry.get("max")),
        min_exclusive=bool(entry.get("min_exclusive", False)), max_exclusive=bool(entry.get("max_exclusive", False)),
        aliases=tuple(entry.get("aliases") or ()) + tuple(entry.get("hidden_aliases") or ()),
        negative=entry.get("negative"), multiple=bool(entry.get("multiple", False)),
    )


def _yaml_keys(tree: Mapping[str, Any], prefix: str = "") -> dict[str, YamlKeySpec]:
    out: dict[str, YamlKeySpec] = {}
    for key, entry in tree.items():
        path = f"{prefix}{key}"
        entry = entry if isinstance(entry, dict) else {}
        out[path] = YamlKeySpec(path=path, type=str(entry.get("type", "str")), default=entry.get("default"),
                                choices=_choices(entry.get("choices")), min_value=_num(entry.get("min")),
                                max_value=_num(entry.get("max")))
        if isinstance(entry.get("keys"), dict):
            out.update(_yaml_keys(entry["keys"], prefix=f"{path}."))
    return out


def warm_up(vocab_dir: Path | None = None) -> int:
    """Read every engine's flag vocabulary before a request needs it: each is read once per process (for the
    renderers and for the engine defaults), so the first request does not pay for parsing them. The number of
    files read."""
    files = 0
    for path in sorted(_resolved(vocab_dir or VOCAB_DIR).glob("*-*.yaml")):
        engine, version = path.stem.split("-", 1)
        if version in known_versions(engine):
            vocabulary(engine, version, vocab_dir)
            files += 1
    return files


@lru_cache(maxsize=16)
def _load_vocabulary(engine: str, version: str, vocab_dir: Path) -> Vocabulary:
    path = vocab_dir / f"{engine}-{version}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in vocab_dir.glob(f"{engine}-*.yaml"))
        raise LaunchError(f"no flag vocabulary for {engine} {version} (looked for {path.name}; "
                          f"known: {', '.join(known) or 'none'})")
    raw = read_engine_file(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("flags"), dict):
        raise LaunchError(f"{path.name} is not a flag vocabulary (no 'flags' mapping)")
    flags = {name: _flag_spec(name, entry or {}) for name, entry in raw["flags"].items()}
    spellings: dict[str, str] = {}
    for spec in flags.values():
        for spelling in (spec.name, *spec.aliases, *([spec.negative] if spec.negative else [])):
            spellings.setdefault(spelling, spec.name)
    return Vocabulary(
        engine=engine, version=version, executable=tuple(str(raw.get("command", engine)).split()),
        image=raw.get("image"), image_verified=bool(raw.get("image_verified", True)),
        flags=flags, spellings=spellings, yaml_keys=_yaml_keys(raw.get("yaml_keys") or {}), raw=raw,
    )


def vocabulary(engine: str, version: str, vocab_dir: Path | None = None) -> Vocabulary:
    """The flag vocabulary of one engine version: flag names with type/default/min/max/choices, every
    accepted spelling, and (TRT-LLM) the `--extra_llm_api_options` YAML keys as dotted paths."""
    return _load_vocabulary(engine, version, _resolved(vocab_dir or VOCAB_DIR))


@lru_cache(maxsize=16)
def _resolved(path: Path) -> Path:
    """``path.resolve()``, once per path (it asks the file system; every launch rendered looks it up)."""
    return path.resolve()


def check_flag(vocab: Vocabulary, spelling: str, value: object = None) -> FlagSpec:
    """The flag's spec, or LaunchError when the version lacks the flag or refuses ``value``."""
    spec = vocab.flag(spelling)
    if spec is None:
        raise LaunchError(f"{vocab.engine} {vocab.version} has no flag {spelling}")
    problem = spec.problem(value)
    if problem:
        raise LaunchError(f"{vocab.engine} {vocab.version}: {problem}")
    return spec


def check_yaml(vocab: Vocabulary, tree: Mapping[str, Any], prefix: str = "") -> None:
    """LaunchError unless every key of ``tree`` (nested) is an accepted `--extra_llm_api_options` key and value."""
    for key, value in tree.items():
        path = f"{prefix}{key}"
        spec = vocab.yaml_keys.get(path)
        if spec is None:
            raise LaunchError(f"{vocab.engine} {vocab.version} has no --extra_llm_api_options key {path}")
        problem = spec.problem(value)
        if problem:
            raise LaunchError(f"{vocab.engine} {vocab.version}: {problem}")
        if isinstance(value, dict):
            check_yaml(vocab, value, prefix=f"{path}.")
