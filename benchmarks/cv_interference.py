"""Search latency while the calibration's leave-one-source-out cross-validation runs in the background, against
no background work, in the same run (not a test: it prints figures).

Starts uvicorn (one worker, a fresh SQLite file, CALIBRATION_CV=background). Phases alternate:

- idle: no background process; the search_speed.py requirements one after another, ``--gap`` seconds apart;
- background: an ingest makes a new calibration version, so the worker starts the cross-validation process
  (nice 19, paused while any worker serves a CPU-heavy request); the same searches, the same gaps, during
  which it runs. The process is then killed (the worker would restart it at its next calibration check, which
  is set to an hour here) so that the next idle phase has none.

Prints p50/p99 of each kind of phase, their ratio, and the CPU seconds the background process got.

    python benchmarks/cv_interference.py                # 2 x (idle, background), 24 searches each, 0.5 s apart
    python benchmarks/cv_interference.py --gap 0        # back to back: the process never gets to run
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import numpy as np
from load import WRITE_KEY, _free_port, ingest_body, wait_ready
from search_speed import REQUIREMENTS

ROOT = Path(__file__).resolve().parents[1]
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cv_processes(parent: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, ValueError):
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == parent and b"service.calibration.jobs" in (d / "cmdline").read_bytes():
                    out.append(int(d.name))
    return out


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S


def search_pass(client: httpx.Client, gap_s: float) -> list[float]:
    out = []
    for body in REQUIREMENTS:
        time.sleep(gap_s)
        t0 = time.perf_counter()
        client.post("/v1/recommendations", json=body).raise_for_status()
        out.append(time.perf_counter() - t0)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=2)
    ap.add_argument("--gap", type=float, default=0.5, help="seconds between searches")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args(argv)
    idle: list[float] = []
    busy: list[float] = []
    cv_cpu = 0.0
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "DATABASE_URL": f"sqlite:///{d}/cv.db", "CALIBRATION_CV": "background",
               "ADVISOR_API_KEY": WRITE_KEY, "CALIBRATION_REFRESH_S": "3600", "LOG_LEVEL": "WARNING"}
        port = args.port or _free_port()
        server = subprocess.Popen([sys.executable, "-m", "uvicorn", "service.main:app", "--port", str(port),
                                   "--log-level", "warning"], cwd=ROOT, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, server)
            with httpx.Client(base_url=url, timeout=300) as client:
                search_pass(client, 0.0)                              # warm-up
                for _ in range(args.cycles):
                    assert not cv_processes(server.pid), "a background process is running in an idle phase"
                    idle += search_pass(client, args.gap)
                    client.post("/v1/benchmarks", json=ingest_body(uuid.uuid4().hex[:8]),
                                headers={"Authorization": f"Bearer {WRITE_KEY}"}).raise_for_status()
                    time.sleep(5)                                     # past its imports, into the work
                    pids = cv_processes(server.pid)
                    assert pids, "the worker started no cross-validation process"
                    before = cpu_s(pids[0])
                    busy += search_pass(client, args.gap)
                    cv_cpu += cpu_s(pids[0]) - before
                    for pid in pids:
                        os.kill(pid, signal.SIGKILL)
                    time.sleep(1)
        finally:
            server.terminate()
            server.wait(timeout=60)
    i, b = np.asarray(idle) * 1e3, np.asarray(busy) * 1e3
    print(f"{len(i)} searches, no background work: p50 {np.percentile(i, 50):.1f} ms, "
          f"p99 {np.percentile(i, 99):.1f} ms")
    print(f"{len(b)} searches, cross-validation running between them: p50 {np.percentile(b, 50):.1f} ms, "
          f"p99 {np.percentile(b, 99):.1f} ms (it got {cv_cpu:.1f} CPU s meanwhile)")
    print(f"ratio: p50 {np.percentile(b, 50) / np.percentile(i, 50):.2f}, "
          f"p99 {np.percentile(b, 99) / np.percentile(i, 99):.2f} (searches {args.gap:g} s apart)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
