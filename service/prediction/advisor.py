"""The prediction service's state: the catalog, its tables, the calibration in use and what is looked up from
them once (engine defaults, fitted parameters). The prediction's steps are module functions of this package
that take it; the methods below the caches are the entry points other packages use.

No web framework or database here: the routes hand it validated request bodies; it raises ``InvalidRequest``
(a 422 with the field path) for what cannot run.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from gpu_catalog.levers import Levers, load_levers
from gpu_catalog.loader import Catalog
from gpu_catalog.schema import CostConstants, GpuSpec, ModelSpec
from service.calibration.state import CalibrationState
from service.core.calibration import Calibration
from service.core.costmodel import PARAM_NAMES, Params, Tables, build_tables
from service.engines.defaults import EngineDefaults, resolve
from service.prediction import analytic, predictor, validate
from service.schemas.predictions import Deployment, InlineModel, PredictionRequest, PredictionResponse, Workload

F = NDArray[np.float64]


class Advisor:
    """Everything a prediction needs that does not change between requests."""

    def __init__(self, catalog: Catalog, constants: CostConstants, calibration: CalibrationState) -> None:
        self.catalog = catalog
        self.constants = constants
        self.cal = calibration
        self.tables = build_tables(catalog, constants)
        self.gpus: dict[str, GpuSpec] = {g.id: g for g in catalog.gpus}
        # catalog model id -> config.json model_type (which models share an architecture's MTP module)
        self.model_types: dict[str, str] = {m.id: m.model_type for m in catalog.models}
        self.weight_dtypes = {d.id: d for d in catalog.weight_dtypes}
        self.kv_dtypes = {d.id: d for d in catalog.kv_dtypes}
        self.engines = {e.id: e for e in catalog.engines}
        self.support = {(r.engine, r.kind, r.dtype, r.architecture): r.level for r in catalog.support}
        self.index = self.tables.index()
        # engine defaults by (engine, version, GPU): read from the engines' vocabularies once
        self._defaults: dict[tuple[str, str, str], EngineDefaults] = {}
        # fitted parameters (rows in PARAM_NAMES order) and each (segment key, current generation)'s row, for the
        # calibration they were read from; replaced whole, never changed in place (requests run in threads)
        self._params_held: tuple[Calibration | None, dict[tuple[tuple[str, str, str, str], bool, str], int], F] = (
            None, {}, np.zeros((0, len(PARAM_NAMES))))


    # --- what is looked up once ----------------------------------------------------------------------

    @cached_property
    def levers(self) -> Levers:
        """levers.yaml (acceptance defaults, host links, engine flags), read and checked on first use."""
        return load_levers(catalog=self.catalog)

    def defaults(self, engine: str, version: str, gpu: GpuSpec) -> EngineDefaults:
        """The engine version's defaults on ``gpu``, read from its vocabulary once."""
        key = (engine, version, gpu.id)
        d = self._defaults.get(key)
        if d is None:
            d = self._defaults[key] = resolve(engine, version, gpu, self.constants)
        return d

    def tables_for(self, model: ModelSpec) -> tuple[Tables, int]:
        idx = self.index["model"].get(model.id)
        if idx is not None and model.model_type != "inline":
            return self.tables, idx
        tables = build_tables(self.catalog, self.constants, extra_models=[model])
        return tables, len(tables.model_ids) - 1

    def params_for(self, keys: list[tuple[str, str, str, str]], current: list[bool], cls: str = "") -> Params:
        """Fitted parameters of each (engine, arch, GPU, dtype) key, of the current engine generation or not, for
        a model of class ``cls`` (dense, moe, mla: the software overheads' key): looked up once per key for the
        calibration in use (a new calibration starts afresh)."""
        return Params.from_matrix(self.param_rows(keys, current, cls))

    def param_rows(self, keys: list[tuple[str, str, str, str]], current: list[bool],
                   cls: str = "") -> NDArray[np.float64]:
        """``params_for`` as a matrix: a row per key, a column per parameter (``PARAM_NAMES``)."""
        cal = self.cal.calibration
        held = self._params_held
        if held[0] is not cal:
            held = (cal, {}, np.zeros((0, len(PARAM_NAMES))))
        wanted = [(k, c, cls) for k, c in zip(keys, current, strict=True)]
        row_of = held[1]
        missing = list(dict.fromkeys(w for w in wanted if w not in row_of))
        if missing:
            got = cal.params_for([k for k, _, _ in missing], np.asarray([c for _, c, _ in missing], dtype=bool),
                                 [cl for _, _, cl in missing])
            new = np.stack([np.asarray(getattr(got, n), dtype=np.float64) for n in PARAM_NAMES], axis=1)
            row_of = {**row_of, **{w: len(row_of) + i for i, w in enumerate(missing)}}
            held = self._params_held = (cal, row_of, np.concatenate([held[2], new]))
        return held[2][np.fromiter((row_of[w] for w in wanted), dtype=np.int64, count=len(wanted))]

    # --- entry points ----------------------------------------------------------------------------------

    def model_for(self, model: str | None, spec: InlineModel | None, field_name: str = "model") -> ModelSpec:
        """``validate.model_for``."""
        return validate.model_for(self, model, spec, field_name)

    def check_runnable(self, model: ModelSpec, dep: Deployment, wl: Workload, prefix: list[str | int]) -> None:
        """``validate.check_runnable``."""
        validate.check_runnable(self, model, dep, wl, prefix)

    def predict(self, req: PredictionRequest) -> PredictionResponse:
        """``predictor.predict``: POST /v1/predictions."""
        return predictor.predict(self, req)

    def analyse(self, model: ModelSpec, wl: Workload, deps: list[Deployment]) -> analytic.Analyses:
        """``analytic.analyse``."""
        return analytic.analyse(self, model, wl, deps)
