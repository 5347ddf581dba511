"""The larger, exploratory schemathesis run (not part of the suite): the suite's generated-request test with more
cases per operation and fresh cases each run (hypothesis profile ``explore``; the suite's run is derandomized).
Prints pytest's summary and the seed; any 5xx or schema violation fails it with a curl line to reproduce, and
``--seed`` replays a run.

    python benchmarks/fuzz.py                      # 200 fresh cases per operation, a new seed
    python benchmarks/fuzz.py --cases 1000 --seed 12345
    python benchmarks/fuzz.py --deterministic      # the suite's cases (the same every run), 200 per operation

The schemathesis command line (``st run``) counts a request that outlasts its ``--request-timeout`` (10 s by
default) as an error, apart from the checks: such a run says every case passed and still exits 1. This run calls the
app in-process (no network timeout, no hypothesis deadline or health check), so only a check fails it.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=200, help="generated cases per operation")
    ap.add_argument("--seed", type=int, help="replay the run of this seed (printed by every exploratory run)")
    ap.add_argument("--deterministic", action="store_true", help="the suite's derandomized cases")
    args = ap.parse_args(argv)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:warnings", "--no-header", "tests/api/test_schema_fuzz.py"]
    env = {**os.environ, "FUZZ_CASES": str(args.cases), "LOG_LEVEL": "WARNING"}
    seed = None
    if args.deterministic:
        env["HYPOTHESIS_PROFILE"] = "deterministic"
    else:
        env["HYPOTHESIS_PROFILE"] = "explore"
        seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
        env["FUZZ_SEED"] = str(seed)
    t0 = time.perf_counter()
    rc = subprocess.call(cmd, cwd=ROOT, env=env)
    how = "the suite's cases" if seed is None else f"seed {seed} (python benchmarks/fuzz.py --cases {args.cases} " \
                                                  f"--seed {seed} replays it)"
    print(f"schemathesis: up to {args.cases} generated cases per operation, {how}, {time.perf_counter() - t0:.0f} s, "
          f"{'no failures' if rc == 0 else 'FAILURES (see above)'}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
