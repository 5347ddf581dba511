"""The shipped calibration file matches the shipped measurements and code, and nothing else is ever taken from it."""

from __future__ import annotations

import json
import time
from pathlib import Path

from fastapi.testclient import TestClient

from service.admission import BusySignal
from service.calibration import shipped as shipped_calibration
from service.db.session import make_engine, make_sessionmaker, transaction
from service.startup import migrate_and_load

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


def test_calibration_says_whether_its_error_is_current(client: TestClient) -> None:
    cal = client.get("/v1/calibration").json()
    assert cal["error_current"] == (cal["held_out"] is not None)
    # the client runs with CALIBRATION_CV=off: the error is held-out only if it came with the shipped file
    assert cal["held_out_status"] == ("computed" if cal["held_out"] else "off")
    assert cal["shipped"] == (cal["held_out"] is not None)
    assert cal["error"]["kind"] == ("leave-one-source-out" if cal["error_current"] else "in-sample")


# Longest wait for the background process to pause or resume, seconds: it defers a pause until its database
# transaction ends, which takes seconds when the machine is loaded (2 s failed under a full test run).
PAUSE_WAIT_S = 30.0


def _state_within(pid: int, states: str, timeout_s: float, renew: BusySignal | None = None) -> bool:
    """Whether process ``pid`` reaches one of the /proc states ``states`` within ``timeout_s`` (renewing ``renew``
    meanwhile, as a serving worker does)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if renew is not None:
            renew.touch()
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in states:
            return True
        time.sleep(0.01)
    return False


def test_one_background_cross_validation_process_per_database(tmp_path: Path) -> None:
    from service.calibration.jobs import CrossValidationProcess
    from service.repository import calibrations as cal_repo

    url = f"sqlite:///{tmp_path / 'cv.db'}"
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    migrate_and_load(engine, sessions)
    shipped = shipped_calibration.read()
    assert shipped is not None
    with transaction(sessions) as session:       # a version still lacking its held-out error: work to do
        cal_repo.store(session, shipped["data_sha256"], shipped["n_measurements"], shipped["params"],
                       {**shipped["metrics"], "held_out": None})
    engine.dispose()
    first, second = CrossValidationProcess(url), CrossValidationProcess(url)
    try:
        assert first.ensure() and first.running()
        assert first.proc is not None and first.proc.args[-3] == "--low-priority"
        assert not first.ensure()                 # already running: not twice from one worker
        assert not second.ensure()                # nor from another worker on this machine
        # paused while a worker serves (the busy signal is fresh), running again once it is not
        pid = first.proc.pid
        # (a pause waits for the end of the child's database transaction: seconds on a loaded machine)
        assert _state_within(pid, "T", PAUSE_WAIT_S, renew=BusySignal(url)), "not paused while a worker was serving"
        assert _state_within(pid, "RSD", PAUSE_WAIT_S, renew=None), "not resumed after serving stopped"
        assert _state_within(pid, "T", PAUSE_WAIT_S, renew=BusySignal(url)), "not paused again when serving resumed"
        first.stop()
        assert not first.running()
        assert second.ensure()                    # the lock went with the process
    finally:
        first.stop()
        second.stop()
