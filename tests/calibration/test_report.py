"""GET /v1/calibration's account of its own error: current (held-out) or in-sample, and why."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_calibration_says_whether_its_error_is_current(client: TestClient) -> None:
    cal = client.get("/v1/calibration").json()
    assert cal["error_current"] == (cal["held_out"] is not None)
    # the client runs with CALIBRATION_CV=off: the error is held-out only if it came with the shipped file
    assert cal["held_out_status"] == ("computed" if cal["held_out"] else "off")
    assert cal["shipped"] == (cal["held_out"] is not None)
    assert cal["error"]["kind"] == ("leave-one-source-out" if cal["error_current"] else "in-sample")
