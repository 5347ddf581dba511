"""The calibration a process answers with, and the error of each of its segments."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from service.core.calibration import Calibration


@dataclass
class CalibrationState:
    """The calibration in use and the error of each of its segments."""

    calibration: Calibration
    version: int | None = None
    segment_errors: dict[str, dict[str, Any]] = field(default_factory=dict)
    overall_errors: dict[str, Any] = field(default_factory=dict)
    error_kind: str = "in-sample"          # or "leave-one-source-out"
