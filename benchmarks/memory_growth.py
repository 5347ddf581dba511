"""What grows in a worker that serves ingests (not a test: it prints figures).

Runs the real app in this process (a SQLite file, or ``--database-url``), warms it up with ``--warm`` rounds, then
runs ``--rounds`` more. A round is one benchmark ingest (unique rows, so each refits the calibration) and a few
predictions, recommendations and catalog reads, the mix of ``benchmarks/load.py``. Prints the resident memory
after warm-up and at the end, and the Python allocations that grew most between the two (tracemalloc), by the
line that made them.

    python benchmarks/memory_growth.py                     # 5 warm-up rounds, then 40
    MALLOC_ARENA_MAX=2 python benchmarks/memory_growth.py  # glibc's arenas bounded (as the Dockerfile sets)
    python benchmarks/memory_growth.py --no-trace          # resident memory alone (tracemalloc costs time)
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path

from fastapi.testclient import TestClient
from load import CATALOG, PREDICTIONS, RECOMMENDATIONS, ingest_body

WRITE_KEY = "memory-growth-key"


def rss_mib() -> float:
    """This process's resident memory, MiB (from /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def one_round(c: TestClient, n: int) -> None:
    r = c.post("/v1/benchmarks", json=ingest_body(f"mem-{uuid.uuid4().hex[:8]}-{n}"),
               headers={"Authorization": f"Bearer {WRITE_KEY}"})
    assert r.status_code in (200, 201), r.text[:300]
    for body in PREDICTIONS:
        assert c.post("/v1/predictions", json=body).status_code == 200
    for body in RECOMMENDATIONS:
        assert c.post("/v1/recommendations", json=body).status_code == 200
    for path in CATALOG:
        assert c.get(path).status_code == 200


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--warm", type=int, default=5, help="rounds before the first measurement")
    ap.add_argument("--rounds", type=int, default=40, help="rounds measured")
    ap.add_argument("--database-url", help="default: a SQLite file in a temporary directory")
    ap.add_argument("--no-trace", action="store_true", help="resident memory alone")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args(argv)
    os.environ.setdefault("STARTUP_MODE", "blocking")
    os.environ.setdefault("INGEST_REFIT", "sync")
    from service.main import create_app
    from service.settings import Settings

    with tempfile.TemporaryDirectory() as d:
        url = args.database_url or f"sqlite:///{d}/memory.db"
        settings = Settings(database_url=url, advisor_api_key=WRITE_KEY, calibration_cv="off", log_level="WARNING")
        with TestClient(create_app(settings)) as c:
            t0 = time.perf_counter()
            for n in range(args.warm):
                one_round(c, n)
            gc.collect()
            if not args.no_trace:
                tracemalloc.start(8)
            warm_mib = rss_mib()
            before = tracemalloc.take_snapshot() if not args.no_trace else None
            print(f"after {args.warm} warm-up rounds ({time.perf_counter() - t0:.0f} s): {warm_mib:.0f} MiB",
                  flush=True)
            for n in range(args.rounds):
                one_round(c, args.warm + n)
                if (n + 1) % 10 == 0:
                    print(f"  round {args.warm + n + 1}: {rss_mib():.0f} MiB", flush=True)
            gc.collect()
            end_mib = rss_mib()
            arenas = os.environ.get("MALLOC_ARENA_MAX", "-")
            print(f"after {args.rounds} more rounds ({time.perf_counter() - t0:.0f} s): {end_mib:.0f} MiB, "
                  f"{(end_mib / warm_mib - 1) * 100:+.1f}% (MALLOC_ARENA_MAX={arenas})")
            if before is not None:
                after = tracemalloc.take_snapshot()
                traced, peak = tracemalloc.get_traced_memory()
                print(f"traced Python allocations: {traced / 2**20:.1f} MiB (peak {peak / 2**20:.1f} MiB)")
                for stat in after.compare_to(before, "traceback")[: args.top]:
                    print(f"  {stat.size_diff / 1024:+9.0f} KiB {stat.count_diff:+7d} blocks")
                    for line in stat.traceback.format(limit=4)[-8:]:
                        print("     ", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
