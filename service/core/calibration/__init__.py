"""Calibration: the cost model's efficiencies fitted on stored measurements, by segment, with fall-backs.

* segments.py: the segment hierarchy and the fitted parameters by segment (``Calibration``)
* measurements.py: stored rows as arrays the cost model scores (``MeasurementSet``, ``prepare``)
* predict.py: what a calibration predicts for measurements, and the anchors of users' measurements
* fit.py: the fit, level by level (``fit``); refit.py: only the segments new rows fall in
* errors.py: errors against measurements and the leave-one-source-out cross-validation; heldout.py: the
  accuracy report's held-out errors by model family and against the datasheet floor

The names callers use are importable from the package itself.
"""

from service.core.calibration.errors import BREAKDOWNS, ape, cross_validate, error_report, summarise
from service.core.calibration.fit import fit
from service.core.calibration.measurements import (
    DUPLICATE,
    DUPLICATE_CONFLICT,
    METRICS,
    PAST_CONTEXT,
    UNQUEUED_OVERLOAD,
    MeasurementSet,
    data_fingerprint,
    duplicate_latency,
    prepare,
    run_kv_dtype,
    unmodelled_layout,
    unqueued_overload,
)
from service.core.calibration.predict import predict_measured, predict_metrics, with_anchors
from service.core.calibration.segments import (
    CLASS_LEVEL,
    HARDWARE_PARAMS,
    LEVELS,
    MODEL_CLASSES,
    MODELLED_ENGINES,
    SOFTWARE_PARAMS,
    Calibration,
    calibration_engine,
    class_key,
    model_class,
    parent_key,
    segment_key,
)

__all__ = [
    "BREAKDOWNS", "CLASS_LEVEL", "DUPLICATE", "DUPLICATE_CONFLICT", "HARDWARE_PARAMS", "LEVELS", "METRICS",
    "MODELLED_ENGINES", "MODEL_CLASSES", "PAST_CONTEXT", "SOFTWARE_PARAMS", "UNQUEUED_OVERLOAD", "Calibration",
    "MeasurementSet", "ape", "calibration_engine", "class_key", "cross_validate", "data_fingerprint",
    "duplicate_latency", "error_report", "fit", "model_class", "parent_key", "predict_measured", "predict_metrics",
    "prepare", "run_kv_dtype", "segment_key", "summarise", "unmodelled_layout", "unqueued_overload", "with_anchors",
]
