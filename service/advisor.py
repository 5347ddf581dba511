"""TRANSITIONAL SHIM (delete when merged): the old import path of the prediction service.

The code lives in service/prediction/ (Advisor: service/prediction/advisor.py), service/errors.py
(InvalidRequest) and service/calibration/state.py (CalibrationState). Kept only for modules outside this change
(service/startup.py, service/calibrate.py, service/ingest/validate.py, service/api/benchmarks.py) until their
imports move.
"""

from service.calibration.state import CalibrationState
from service.errors import InvalidRequest
from service.prediction.advisor import Advisor

__all__ = ["Advisor", "CalibrationState", "InvalidRequest"]
