"""Leave-one-source-out accuracy of the cost model on the stored measurements (not a test: it prints figures).

For every source in the measurement set: fit the calibration without it, predict its rows, and compare.
Prints the median and 90th-percentile absolute % error of throughput (output tok/s, or total tok/s where
only that is published), TTFT and TPOT/ITL, overall and by GPU, engine, dtype and mode, with row counts.

    python benchmarks/accuracy.py                 # quality=good rows of the shipped published.csv
    python benchmarks/accuracy.py --quality all   # good and weak rows
    python benchmarks/accuracy.py --json out.json # also write the full report
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

from gpu_catalog.loader import PUBLISHED_CSV, load_catalog, load_cost_constants
from service.core.calibration import METRICS, cross_validate, prepare
from service.core.costmodel import build_tables


def _line(label: str, stats: dict[str, dict[str, object]]) -> str:
    cells = []
    for m in METRICS:
        s = stats[m]
        cells.append(f"{m} {s['median_ape_pct']!s:>6}/{s['p90_ape_pct']!s:>6} (n={s['n']})" if s["n"] else
                     f"{m} {'-':>13} (n=0)")
    return f"  {label:<28} " + "   ".join(cells)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", type=Path, default=PUBLISHED_CSV)
    ap.add_argument("--quality", choices=["good", "all"], default="good")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--group", choices=["source", "family"], default="source",
                    help="hold out one source (the reported figure) or one model family at a time")
    args = ap.parse_args(argv)
    catalog, constants = load_catalog(), load_cost_constants()
    tables = build_tables(catalog, constants)
    with args.csv.open(encoding="utf-8", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if args.quality == "all" or r["quality"] == "good"]
    ms = prepare(rows, catalog, tables, constants)
    t0 = time.perf_counter()
    report = cross_validate(tables, ms, constants, group=args.group)
    elapsed = time.perf_counter() - t0
    print(f"leave-one-{args.group}-out over {report['sources']} sources, {report['rows']} rows "
          f"(quality={args.quality}; {sum(ms.skipped.values())} rows not scorable: {ms.skipped}); {elapsed:.0f} s")
    print("median / p90 absolute % error")
    print(_line("overall", report["overall"]))
    for name in ("engine", "mode", "dtype", "gpu"):
        print(f"by {name}:")
        for key, stats in report[f"by_{name}"].items():
            print(_line(key, stats))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
