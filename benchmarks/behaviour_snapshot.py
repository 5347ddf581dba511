"""Capture, or compare against, every answer a restructuring must leave unchanged (not a test: it prints).

The 24 search_speed requirements (POST /v1/recommendations), the 8 predict_speed deployments
(POST /v1/predictions) and a prediction with launch files, answered in process by the real app on a fresh
SQLite file with the shipped calibration. Fields that differ from run to run by design (ids, timestamps,
links, timings) are dropped; everything else must match byte for byte.

    python benchmarks/behaviour_snapshot.py capture /tmp/before.json
    python benchmarks/behaviour_snapshot.py compare /tmp/before.json      # exit 1 and a diff when changed
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from predict_speed import REQUESTS
from search_speed import REQUIREMENTS

# keys whose values change between runs by design
VOLATILE = {"id", "created_at", "links", "elapsed_ms", "request_id", "computed_at", "generated_at"}


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def capture() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        os.environ.update({"DATABASE_URL": f"sqlite:///{d}/snapshot.db", "CALIBRATION_CV": "off",
                           "STARTUP_MODE": "blocking", "LOG_LEVEL": "WARNING"})
        from fastapi.testclient import TestClient

        from service.main import create_app

        out: dict[str, Any] = {}
        with TestClient(create_app()) as client:
            for i, body in enumerate(REQUIREMENTS):
                r = client.post("/v1/recommendations", json=body)
                out[f"recommendation {i:02d}"] = {"status": r.status_code, "body": _scrub(r.json())}
            for i, (m, g, tp, wd, kv, e, load) in enumerate(REQUESTS):
                body = {"model": m, "deployment": {"gpu": g, "tp": tp, "weight_dtype": wd, "kv_dtype": kv,
                                                   "engine": e},
                        "workload": {"input_tokens": 1024, "output_tokens": 256, **load}}
                r = client.post("/v1/predictions", json=body)
                out[f"prediction {i:02d}"] = {"status": r.status_code, "body": _scrub(r.json())}
        return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["capture", "compare"])
    ap.add_argument("path", type=Path)
    args = ap.parse_args(argv)
    now = capture()
    if args.mode == "capture":
        args.path.write_text(json.dumps(now, indent=1, sort_keys=True))
        print(f"captured {len(now)} answers to {args.path}")
        return 0
    before = json.loads(args.path.read_text())
    changed = [k for k in sorted(set(before) | set(now)) if before.get(k) != now.get(k)]
    for k in changed:
        a = json.dumps(before.get(k), indent=1, sort_keys=True).splitlines()
        b = json.dumps(now.get(k), indent=1, sort_keys=True).splitlines()
        print(f"--- {k}")
        print("\n".join(list(difflib.unified_diff(a, b, lineterm="", n=1))[:60]))
    print(f"{len(before) - len(changed)} of {len(before)} answers identical, {len(changed)} changed")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
