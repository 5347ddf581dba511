"""The background calibration process: one per database on a machine, paused while a worker serves."""

from __future__ import annotations

import time
from pathlib import Path

from service.admission import BusySignal
from service.calibration import shipped as shipped_calibration
from service.calibration.jobs import CrossValidationProcess
from service.db.session import make_engine, make_sessionmaker, transaction
from service.repository import calibrations as cal_repo
from service.startup import migrate_and_load

# Longest wait for the background process to pause or resume, seconds: it defers a pause until its database
# transaction ends, which takes seconds when the machine is loaded.
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
