"""The shipped calibration file matches the shipped measurements and code, and nothing else is ever taken from it."""

from __future__ import annotations

import json
from pathlib import Path

from service.calibration import shipped as shipped_calibration

REGENERATE = "regenerate it: python -m service.calibration.shipped"


def test_shipped_file_is_the_calibration_of_the_shipped_data_and_code() -> None:
    shipped = shipped_calibration.read()
    assert shipped is not None, f"{shipped_calibration.SHIPPED_PATH} missing or unreadable; {REGENERATE}"
    assert shipped["data_sha256"] == shipped_calibration.shipped_data_fingerprint(), (
        f"the shipped measurements changed; {REGENERATE}")
    assert shipped["code_sha256"] == shipped_calibration.code_fingerprint(), (
        f"the cost model, fit or catalog changed; {REGENERATE}")
    assert shipped["metrics"].get("held_out"), f"made without its leave-one-source-out error; {REGENERATE}"
    assert shipped_calibration.matching(shipped["data_sha256"]) == shipped


def test_other_data_or_other_code_is_never_served_from_the_file(tmp_path: Path) -> None:
    shipped = shipped_calibration.read()
    assert shipped is not None
    assert shipped_calibration.matching("0" * 64) is None                  # other measurements: a fit instead
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps({**shipped, "code_sha256": "1" * 64}))
    assert shipped_calibration.matching(shipped["data_sha256"], stale) is None     # other code: a fit instead
    assert shipped_calibration.matching(shipped["data_sha256"], tmp_path / "absent.json") is None
