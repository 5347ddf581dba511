"""Start-up on a real database: the steps it reports, and a restart that reuses what the first start stored."""

from __future__ import annotations

from service.settings import Settings
from service.startup import STARTUP_STEPS, build_state


def test_a_restart_serves_the_calibration_the_first_start_stored(db_url: str) -> None:
    settings = Settings(database_url=db_url, calibration_cv="off")
    steps: list[str] = []
    first = build_state(settings, steps.append)
    try:
        assert steps == list(STARTUP_STEPS)
        version = first.serving.calibration.version
        assert version is not None
    finally:
        first.engine.dispose()
    again = build_state(settings)
    try:
        assert again.serving.calibration.version == version        # no new fit: the data did not change
        assert again.serving.advisor.cal is again.serving.calibration
    finally:
        again.engine.dispose()
