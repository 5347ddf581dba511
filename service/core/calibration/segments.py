"""Segments of a calibration (engine, architecture, GPU, dtype; model class) and the fitted parameters by
segment (``Calibration``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.core.candidates import PARAM_NAMES, Params
from service.core.residuals import Residuals
from service.core.types import F

MODELLED_ENGINES = ("vllm", "trtllm")
LEVELS = ("global", "engine", "engine/arch", "engine/gpu", "engine/gpu/dtype")
# What physically varies: the hardware efficiencies with the engine, GPU and dtype (the LEVELS below the engine);
# the software overheads with the engine and the model class (CLASS_LEVEL segments, beside the GPU ones).
CLASS_LEVEL = "engine/class"
HARDWARE_PARAMS = ("eff_flops", "eff_bw", "comm_eff")
SOFTWARE_PARAMS = tuple(n for n in PARAM_NAMES if n not in HARDWARE_PARAMS)
MODEL_CLASSES = ("dense", "moe", "mla")
# The class whose software overheads a class without a fitted segment of its engine falls back to, before the
# engine's: an MLA model's MLP is routed experts (DeepSeek-V2/V3/R1, Kimi K2, GLM-5: every MLA model of the
# catalog), and the per-MoE-layer prefill dispatch and step overheads the moe class fits are those of its layers.
CLASS_FALLBACK = {"mla": "moe"}
# The value of a software overhead a stored calibration predates (seconds: none, kept positive for its log).
ABSENT_OVERHEAD_S = 1e-12


def calibration_engine(engine: str, vendor: str) -> str:
    """The engine part of a segment key: an engine on another vendor's GPUs is calibrated apart (vLLM on
    ROCm is a different code path whose efficiencies say nothing about vLLM on CUDA), so that NVIDIA GPUs
    without vLLM measurements fall back to vLLM-on-NVIDIA values and not to a mix dominated by AMD rows."""
    return engine if vendor == "nvidia" else f"{engine}-{vendor}"


def model_class(spec: Any) -> str:
    """dense, moe or mla (MLA attention, whatever its MLP) of a catalog ModelSpec."""
    if getattr(spec, "mla_kv_lora_rank", None):
        return "mla"
    return "moe" if getattr(spec, "num_experts", None) else "dense"


def class_key(engine: str, cls: str) -> str:
    return f"{engine}/{cls}"


def segment_key(level: str, key: tuple[str, str, str, str]) -> str:
    engine, arch, gpu, dtype = key
    return {"global": "global", "engine": engine, "engine/arch": f"{engine}/{arch}",
            "engine/gpu": f"{engine}/{gpu}", "engine/gpu/dtype": f"{engine}/{gpu}/{dtype}"}[level]


def parent_key(level: str, key: tuple[str, str, str, str]) -> str:
    return segment_key(LEVELS[LEVELS.index(level) - 1], key)


@dataclass
class Calibration:
    """Fitted parameters by segment (log-space vectors in PARAM_NAMES order), and how each was fitted.

    GPU segments (``LEVELS``) give every parameter; below the engine level they fit only the hardware ones and
    carry the engine's software overheads. Class segments (``engine/<class>``, level ``CLASS_LEVEL``) give the
    software overheads of one engine and model class, and override the GPU segment's for that class."""

    segments: dict[str, dict[str, Any]]          # key -> {"level", "params": {name: value}, "n": rows}
    generation: dict[str, float]                 # engine -> speed factor of releases before the current one
    data_sha256: str = ""
    n_measurements: int = 0
    harness: dict[str, float] = field(default_factory=dict)   # source -> its harness's TTFT, s (not predicted)
    anchors: list[dict[str, Any]] = field(default_factory=list)  # users' measurements (service/core/residuals.py)
    _residuals: Residuals | None = field(default=None, repr=False, compare=False)

    def residuals(self) -> Residuals:
        """The residual correction of the users' measurements (built once per calibration)."""
        if self._residuals is None:
            self._residuals = Residuals(self.anchors)
        return self._residuals

    def vector(self, key: str) -> F:
        params = self.segments[key]["params"]
        # a calibration stored before a parameter existed lacks it: an additive overhead it did not have (for
        # a2a_latency_s not quite: such a calibration charged all-to-alls the all-reduce latency, now 0)
        return np.log([params.get(n, ABSENT_OVERHEAD_S) for n in PARAM_NAMES])

    def lookup(self, key: tuple[str, str, str, str]) -> tuple[str, dict[str, Any]]:
        """The most specific fitted GPU segment for (engine, arch, gpu, dtype)."""
        for level in reversed(LEVELS):
            k = segment_key(level, key)
            if k in self.segments:
                return k, self.segments[k]
        return "global", self.segments["global"]

    def overheads(self, key: tuple[str, str, str, str], cls: str) -> tuple[str, dict[str, Any]]:
        """The segment that owns the software overheads of a prediction for model class ``cls``: the engine's
        class segment where one is fitted, else that of the class it falls back to (``CLASS_FALLBACK``), else
        the engine's (else the global one)."""
        classes = [c for c in (cls, CLASS_FALLBACK.get(cls, "")) if c]
        for k in (*(class_key(key[0], c) for c in classes), key[0]):
            if k in self.segments:
                return k, self.segments[k]
        return "global", self.segments["global"]

    def log_matrix(self, keys: Sequence[tuple[str, str, str, str]], classes: Sequence[str] | None = None) -> F:
        """(n, len(PARAM_NAMES)) log-parameters of each key (and model class): the hardware efficiencies of its
        most specific GPU segment, the software overheads of ``overheads``."""
        if not keys:
            return np.zeros((0, len(PARAM_NAMES)))
        memo: dict[tuple[tuple[str, str, str, str], str], F] = {}
        sw = [PARAM_NAMES.index(n) for n in SOFTWARE_PARAMS]
        rows = []
        for k, c in zip(keys, classes if classes is not None else [""] * len(keys), strict=True):
            v = memo.get((k, c))
            if v is None:
                v = self.vector(self.lookup(k)[0])
                v[sw] = self.vector(self.overheads(k, c)[0])[sw]
                memo[(k, c)] = v
            rows.append(v)
        return np.stack(rows)

    def params_for(self, keys: Sequence[tuple[str, str, str, str]], current: NDArray[np.bool_] | None = None,
                   classes: Sequence[str] | None = None) -> Params:
        mat = np.exp(self.log_matrix(keys, classes)) if keys else np.zeros((0, len(PARAM_NAMES)))
        if current is not None:
            factor = np.asarray([1.0 if cur else self.generation.get(k[0], 1.0)
                                 for k, cur in zip(keys, current, strict=True)])
            mat = apply_generation(mat, factor)
        return Params.from_matrix(mat)

    def harness_s(self, sources: Sequence[str]) -> F:
        """Each measurement's harness TTFT (0 for a source the fit never saw)."""
        return np.asarray([self.harness.get(src, 0.0) for src in sources], dtype=np.float64)

    def to_json(self) -> dict[str, Any]:
        return {"levels": list(LEVELS), "param_names": list(PARAM_NAMES), "segments": self.segments,
                "generation": self.generation, "harness": self.harness, "anchors": self.anchors}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], data_sha256: str = "", n: int = 0) -> Calibration:
        return cls(segments=dict(data["segments"]), generation=dict(data["generation"]), data_sha256=data_sha256,
                   n_measurements=n, harness=dict(data.get("harness") or {}), anchors=list(data.get("anchors") or []))



def apply_generation(mat: F, factor: F) -> F:
    """Older releases: efficiencies scaled by ``factor`` and per-step overhead divided by it."""
    out = mat.copy()
    f = factor[:, None] if mat.ndim == 2 else factor
    names = list(PARAM_NAMES)
    for n in ("eff_flops", "eff_bw"):
        out[:, names.index(n)] = np.minimum(out[:, names.index(n)] * f[:, 0], 1.0)
    for n in ("step_overhead_s", "layer_overhead_s"):
        out[:, names.index(n)] = out[:, names.index(n)] / f[:, 0]
    return out

