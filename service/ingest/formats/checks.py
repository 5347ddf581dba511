"""What every benchmark-file parser shares: the posted deployment and hint, the error naming the bad field,
and the checks of single values (numbers, counts, text, percentile order)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

RESULT = "result"
DEPLOYMENT = "deployment"
HINT = "hint"
SOURCE = "source"

SOURCE_ID = "user"
REL_TOL = 1e-9


class FormatError(ValueError):
    """A posted result file, deployment or hint is not usable; ``field`` is the dotted path of the bad value."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True)
class DeploymentInfo:
    """What the caller says about the measured system; ``replicas`` becomes the ``dp`` column."""

    model: str
    gpu: str
    gpu_count: int
    tp: int
    pp: int
    replicas: int
    weight_dtype: str
    kv_dtype: str
    engine: str
    engine_version: str | None = None


@dataclass(frozen=True)
class WorkloadHint:
    """Workload facts the caller gives for what the file does not record."""

    input_tokens: float | None = None
    output_tokens: float | None = None
    concurrency: int | None = None
    request_rate: float | None = None


def join(path: str, key: str | int) -> str:
    return f"{path}.{key}"


def is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def mapping(v: object, path: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise FormatError(path, f"expected a JSON object, got {type(v).__name__}")
    return v


def require(obj: Mapping[str, Any], key: str, path: str) -> Any:
    if key not in obj or obj[key] is None:
        raise FormatError(join(path, key), "required field is missing")
    return obj[key]


def number(v: object, path: str, *, positive: bool = False) -> float:
    """A finite, non-negative number (strictly positive when ``positive``)."""
    if not is_number(v):
        raise FormatError(path, f"expected a number, got {type(v).__name__}")
    f = float(v)  # type: ignore[arg-type]
    if not math.isfinite(f):
        raise FormatError(path, f"must be finite, got {v}")
    if f < 0:
        raise FormatError(path, f"must not be negative, got {v}")
    if positive and f == 0:
        raise FormatError(path, "must be positive, got 0")
    return f


def whole_count(v: object, path: str, *, minimum: int = 0) -> int:
    """A whole number (an int, or a float with no fraction as numpy statistics write counts) >= minimum."""
    f = number(v, path)
    if f != int(f):
        raise FormatError(path, f"expected a whole number, got {v}")
    if f < minimum:
        raise FormatError(path, f"must be at least {minimum}, got {v}")
    return int(f)


def opt_number(obj: Mapping[str, Any], key: str, path: str, *, positive: bool = False) -> float | None:
    v = obj.get(key)
    return None if v is None else number(v, join(path, key), positive=positive)


def text(v: object, path: str, *, min_length: int = 1) -> str:
    if not isinstance(v, str):
        raise FormatError(path, f"expected a string, got {type(v).__name__}")
    if len(v.strip()) < min_length:
        raise FormatError(path, f"must have at least {min_length} non-blank characters")
    return v


def check_order(points: list[tuple[float, str, float]]) -> None:
    """``points`` = (rank, field path, value) of one metric's statistics; a higher rank (a larger percentile, or
    the maximum) must not hold a smaller value than any lower rank."""
    best: tuple[str, float] | None = None
    for _, path, value in sorted(points, key=lambda p: p[0]):
        if best is not None and value < best[1] - REL_TOL * max(1.0, abs(best[1])):
            raise FormatError(path, f"{value} is below {best[0]} = {best[1]}; percentiles must not decrease")
        if best is None or value > best[1]:
            best = (path, value)


def check_mean(mean: float | None, mean_path: str, lo: float | None, hi: float | None) -> None:
    tol = REL_TOL * max(1.0, abs(mean or 0.0))
    if mean is not None and ((lo is not None and mean < lo - tol) or (hi is not None and mean > hi + tol)):
        raise FormatError(mean_path, f"mean {mean} lies outside [min {lo}, max {hi}]")


def check_deployment(dep: DeploymentInfo) -> None:
    if not isinstance(dep, DeploymentInfo):
        raise FormatError(DEPLOYMENT, "expected a DeploymentInfo")
    for name in ("model", "gpu", "weight_dtype", "kv_dtype", "engine"):
        text(getattr(dep, name), join(DEPLOYMENT, name))
    if dep.engine_version is not None:
        text(dep.engine_version, join(DEPLOYMENT, "engine_version"))
    for name in ("gpu_count", "tp", "pp", "replicas"):
        v = getattr(dep, name)
        if not isinstance(v, int) or isinstance(v, bool):
            raise FormatError(join(DEPLOYMENT, name), f"expected an integer, got {type(v).__name__}")
        if v < 1:
            raise FormatError(join(DEPLOYMENT, name), f"must be at least 1, got {v}")
    if dep.tp * dep.pp * dep.replicas != dep.gpu_count:
        raise FormatError(join(DEPLOYMENT, "gpu_count"),
                          f"tp*pp*replicas = {dep.tp}*{dep.pp}*{dep.replicas} = {dep.tp * dep.pp * dep.replicas} "
                          f"does not equal gpu_count {dep.gpu_count}")


def check_hint(hint: WorkloadHint) -> None:
    if not isinstance(hint, WorkloadHint):
        raise FormatError(HINT, "expected a WorkloadHint")
    for name in ("input_tokens", "output_tokens", "request_rate"):
        v = getattr(hint, name)
        if v is not None:
            number(v, join(HINT, name), positive=True)
    if hint.concurrency is not None:
        if not isinstance(hint.concurrency, int) or isinstance(hint.concurrency, bool):
            raise FormatError(join(HINT, "concurrency"), f"expected an integer, got {type(hint.concurrency).__name__}")
        if hint.concurrency < 1:
            raise FormatError(join(HINT, "concurrency"), f"must be at least 1, got {hint.concurrency}")


def check_source(source: str) -> str:
    return text(source, SOURCE, min_length=3)
