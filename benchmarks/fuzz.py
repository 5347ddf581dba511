"""The larger schemathesis run (not part of the suite): the suite's generated-request test with more cases
per operation. Prints pytest's summary; any 5xx or schema violation fails it with a curl line to reproduce.

    python benchmarks/fuzz.py              # 200 cases per operation
    python benchmarks/fuzz.py --cases 1000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=200)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:warnings", "--no-header",
                          "tests/api/test_schema_fuzz.py"], cwd=ROOT,
                         env={**os.environ, "FUZZ_CASES": str(args.cases), "LOG_LEVEL": "WARNING"})
    print(f"schemathesis: up to {args.cases} generated cases per operation, {time.perf_counter() - t0:.0f} s, "
          f"{'no failures' if rc == 0 else 'FAILURES (see above)'}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
