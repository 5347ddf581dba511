"""Held-out accuracy of the cost model on the stored measurements (not a test: it prints figures).

The headline is leave-one-model-family-out on the latency rows (service/core/calibration/heldout.py): for each model
family with TTFT/TPOT measurements, fit the calibration without that family and predict its rows; print the
signed and absolute median % error of TTFT, TPOT and throughput per family x concurrency bucket (1, 2-8,
9-64, >64), and check each one-client prediction against the datasheet floor.

Beside it, leave-one-source-out over all scored rows: for every source, fit without it, predict its rows;
the median and 90th-percentile absolute % error of throughput (output tok/s, or total tok/s where only that
is published), TTFT and TPOT/ITL, overall and by GPU, engine, dtype and mode, with row counts.

    python benchmarks/accuracy.py                 # both, quality=good rows of the shipped measurement CSVs
    python benchmarks/accuracy.py --group family  # only the headline (about 15 fits)
    python benchmarks/accuracy.py --group source  # only leave-one-source-out (GET /v1/calibration's figures)
    python benchmarks/accuracy.py --quality all   # good and weak rows
    python benchmarks/accuracy.py --json out.json # also write the full report
    python benchmarks/accuracy.py --group family --rows rows.csv  # also each latency row's held-out prediction
    python benchmarks/accuracy.py --database-url "$DATABASE_URL"  # the service's stored rows (shipped + users')
    python benchmarks/accuracy.py --simulate 300  # scheduler simulation vs analytic on 300 loaded rows (in-sample)

GET /v1/calibration's held-out report is this report (the same rows, quality=good, through the same
``prepare`` and ``cross_validate``): ``--database-url`` reproduces it for the data the service holds.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from gpu_catalog.loader import SHIPPED_CSVS, Catalog, load_catalog, load_cost_constants, read_shipped_rows
from gpu_catalog.schema import CostConstants
from service.calibration.fit import FITTED_QUALITY
from service.core.calibration import METRICS, MeasurementSet, ape, cross_validate, prepare, summarise
from service.core.calibration.errors import layout_labels
from service.core.calibration.heldout import (
    bucket_labels,
    family_table,
    floor_check,
    format_table,
    held_out_by_family,
    latency_rows,
)
from service.core.costmodel import Tables, build_tables
from service.db.session import make_engine, make_sessionmaker, transaction
from service.repository.calibrations import measurement_rows
from service.repository.catalog import read_catalog
from service.settings import Settings


def _line(label: str, stats: dict[str, dict[str, object]]) -> str:
    cells = []
    for m in METRICS:
        s = stats[m]
        cells.append(f"{m} {s['median_ape_pct']!s:>6}/{s['p90_ape_pct']!s:>6} (n={s['n']})" if s["n"] else
                     f"{m} {'-':>13} (n=0)")
    return f"  {label:<28} " + "   ".join(cells)


def layout_errors(ms: MeasurementSet, pred: NDArray[np.float64]) -> dict[str, dict[str, dict[str, object]]]:
    """Held-out error of the rows by layout class (``layout_labels``): MoE with attention DP / EP beside the rest."""
    errors = ape(pred, ms.y)
    lab = np.asarray(layout_labels(ms))
    return {v: {m: summarise(errors[lab == v, j]) for j, m in enumerate(METRICS)} for v in sorted(set(lab.tolist()))}


def csv_rows(paths: Path | list[Path], quality: str) -> list[dict[str, str]]:
    """The rows of one or more measurement CSVs of that quality (``all``: good and weak)."""
    rows = read_shipped_rows([paths] if isinstance(paths, Path) else paths)
    return [r for r in rows if quality == "all" or r["quality"] == FITTED_QUALITY]


def csv_measurements(paths: Path | list[Path], quality: str, catalog: Catalog, tables: Tables,
                     constants: CostConstants) -> MeasurementSet:
    return prepare(csv_rows(paths, quality), catalog, tables, constants)


def stored_measurements(database_url: str, quality: str, constants: CostConstants) -> tuple[Tables, MeasurementSet]:
    """The rows the service calibrates on, read as the service reads them (its catalog too)."""
    engine = make_engine(Settings(database_url=database_url).database_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            catalog = read_catalog(session)
            rows = measurement_rows(session, quality=None if quality == "all" else FITTED_QUALITY)
    finally:
        engine.dispose()
    tables = build_tables(catalog, constants)
    return tables, prepare(rows, catalog, tables, constants)


ROW_COLUMNS = ("row_id", "family", "source", "engine", "architecture", "gpu", "weight_dtype", "model_class", "tp", "pp",
               "dp", "ep", "mode", "load", "bucket", "input_tokens", "output_tokens", "throughput_is_total",
               "throughput_tok_s", "throughput_tok_s_predicted", "ttft_ms", "ttft_ms_predicted", "tpot_ms",
               "tpot_ms_predicted")


def write_rows(path: Path, ms: MeasurementSet, pred: NDArray[np.float64]) -> int:
    """One CSV line per latency row: what identifies it, its measured figures and the held-out prediction
    (throughput tok/s, output or total as measured; TTFT and TPOT ms; empty where not measured). Returns the
    number of lines written."""
    lat = np.flatnonzero(latency_rows(ms))
    buckets = bucket_labels(ms)
    c = ms.cand
    dp = c.dp_ranks

    def cell(v: float, scale: float) -> str:
        return f"{v * scale:.6g}" if np.isfinite(v) else ""

    with path.open("w", encoding="utf-8", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(ROW_COLUMNS)
        for i in lat:
            engine, arch, gpu, dtype = ms.keys[i]
            out.writerow([ms.row_ids[i], ms.families[i], ms.sources[i], engine, arch, gpu, dtype, ms.classes[i],
                          f"{c.tp[i]:g}", f"{c.pp[i]:g}", f"{dp[i]:g}", f"{c.ep[i]:g}", ms.modes[i], f"{c.load[i]:g}",
                          buckets[i], f"{c.input_tok[i]:g}", f"{c.output_tok[i]:g}", bool(ms.thr_is_total[i]),
                          cell(ms.y[i, 0], 1.0), cell(pred[i, 0], 1.0), cell(ms.y[i, 1], 1e3),
                          cell(pred[i, 1], 1e3), cell(ms.y[i, 2], 1e3), cell(pred[i, 2], 1e3)])
    return len(lat)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", type=Path, nargs="+", default=list(SHIPPED_CSVS),
                    help="measurement CSVs (default: every shipped file)")
    ap.add_argument("--database-url", help="score the measurements stored in this database (SQLAlchemy URL) "
                    "instead of --csv: the rows GET /v1/calibration reports on")
    ap.add_argument("--quality", choices=["good", "all"], default="good")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--rows", type=Path, metavar="CSV",
                    help="with --group family or both: write each latency row's held-out prediction to this CSV")
    ap.add_argument("--group", choices=["both", "source", "family"], default="both",
                    help="leave-one-family-out on the latency rows (the headline), leave-one-source-out on all rows "
                    "(GET /v1/calibration's held-out report), or both")
    ap.add_argument("--simulate", type=int, metavar="N",
                    help="instead of the leave-one-out run: fit once, then compare the scheduler simulation's means "
                    "and medians with the analytic model's on up to N rows measured under load (sim_accuracy.py)")
    ap.add_argument("--sim-requests", type=int, default=1000, help="requests per steady-state simulation")
    args = ap.parse_args(argv)
    if args.rows and (args.group == "source" or args.simulate):
        ap.error("--rows writes the leave-one-family-out predictions: use it with --group family or both")
    constants = load_cost_constants()
    if args.simulate:
        if args.database_url:
            ap.error("--simulate reads the rows of --csv")
        from sim_accuracy import print_report, simulate_report  # beside this script

        catalog = load_catalog()
        tables = build_tables(catalog, constants)
        rows = csv_rows(args.csv, args.quality)
        sim_report = simulate_report(tables, prepare(rows, catalog, tables, constants), constants, rows,
                                     args.simulate, args.sim_requests)
        print_report(sim_report)
        if args.json:
            args.json.write_text(json.dumps(sim_report, indent=1))
        return 0
    if args.database_url:
        tables, ms = stored_measurements(args.database_url, args.quality, constants)
    else:
        catalog = load_catalog()
        tables = build_tables(catalog, constants)
        ms = csv_measurements(args.csv, args.quality, catalog, tables, constants)
    out: dict[str, object] = {}
    print(f"quality={args.quality}: {len(ms)} rows scored; {sum(ms.skipped.values())} not scorable: {ms.skipped}")
    if args.group in ("both", "family"):
        t0 = time.perf_counter()
        pred = held_out_by_family(tables, ms, constants)
        table, floors = family_table(ms, pred), floor_check(tables, ms, pred)
        print("\n".join(format_table(table, floors)) + f"\n({time.perf_counter() - t0:.0f} s)\n")
        by_layout = layout_errors(ms, pred)
        print("leave-one-family-out by layout (median / p90 absolute % error):")
        for key, stats in by_layout.items():
            print(_line(key, stats))
        out["family"] = {**table, "floor": floors, "by_layout": by_layout}
        if args.rows:
            print(f"{write_rows(args.rows, ms, pred)} latency rows and their held-out predictions: {args.rows}")
    if args.group == "family":
        if args.json:
            args.json.write_text(json.dumps(out["family"], indent=1))
        return 0
    t0 = time.perf_counter()
    report = cross_validate(tables, ms, constants, group="source")
    elapsed = time.perf_counter() - t0
    print(f"leave-one-source-out over {report['groups']} sources, {report['rows']} rows; {elapsed:.0f} s")
    print("median / p90 absolute % error")
    print(_line("overall", report["overall"]))
    for name in ("engine", "mode", "dtype", "gpu", "layout"):
        print(f"by {name}:")
        for key, stats in report[f"by_{name}"].items():
            print(_line(key, stats))
    if args.json:
        # the leave-one-source-out report at the top level: GET /v1/calibration's held_out is the same
        args.json.write_text(json.dumps({**report, **({"family": out["family"]} if out else {})}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
