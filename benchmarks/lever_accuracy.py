"""Accuracy of the speculative-decoding lever (not a test: it prints figures): predicted against measured MTP
speed-ups on InferenceX's DeepSeek-R1 pairs.

The pairs (docs/levers.md, "Measured MTP speed-ups") are in gpu_catalog/data/benchmarks/inferencex_mtp_pairs.csv,
rows copied unchanged from InferenceX's published runs: each MTP row (``spec: mtp`` in its notes) is paired with
the rows without MTP of the same engine version, GPU, dtypes, layout, ISL/OSL, concurrency and TPOT statistic;
the measured speed-up is the median TPOT without over the TPOT with. An MTP row with no such row of its own
engine version is paired with those of the other versions, and reported apart (cross-version pairs). The
prediction is POST /v1/predictions (in process, the real app on a fresh SQLite file) of the same deployment
without and with
``speculative: {method: mtp, num_speculative_tokens: k}`` at the catalog's default acceptance; InferenceX does
not record k, so each k of ``--k`` is reported. Engines the service does not model (SGLang) are counted and
skipped.

The published pairs of gpu_catalog/data/benchmarks/lever_measurements.csv (TensorRT-LLM and vLLM speed-ups of
MTP, EAGLE-3 and n-gram lookup at a stated GPU, model, layout, batch and k; their sources in benchmarks/SOURCES.md)
are predicted the same way, at the row's own k and, where the source quotes a mean accepted length, its
acceptance rate (else the catalog default); a row's speed-up is of TPOT or of the whole request (prefill
included: TTFT + (output - 1) x TPOT), as it states. No prefix-cache TTFT or CPU-offload TPOT pair was found
(docs/levers.md lists what was searched), so those levers' errors are not reported.

    python benchmarks/lever_accuracy.py                # k = 1 and 3
    python benchmarks/lever_accuracy.py --k 1 2 3 --simulate
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAIRS_CSV = ROOT / "gpu_catalog" / "data" / "benchmarks" / "inferencex_mtp_pairs.csv"
LAYOUT = ("engine", "engine_version", "gpu", "model", "weight_dtype", "kv_dtype", "tp", "pp", "dp", "ep",
          "input_tokens", "output_tokens", "concurrency", "tpot_stat")
# the dtype ids InferenceX writes, as the catalog's
DTYPES = {"fp8": "fp8", "nvfp4": "nvfp4", "mxfp4": "mxfp4"}


def pairs(path: Path = PAIRS_CSV) -> list[tuple[dict[str, str], list[dict[str, str]], bool]]:
    """Each MTP row with the rows without MTP of its configuration: of its engine version where there are
    some, else of the other versions (a cross-version pair, the third item True: it measures MTP and the
    engine's change between the versions together)."""
    groups: dict[tuple[str, ...], dict[bool, list[dict[str, str]]]] = defaultdict(lambda: {True: [], False: []})
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["quality"] != "good" or not row["tpot_ms"]:
                continue
            groups[tuple(row[k] for k in LAYOUT if k != "engine_version")]["spec: mtp" in row["notes"]].append(row)
    out = []
    for g in groups.values():
        for m in g[True]:
            same = [p for p in g[False] if p["engine_version"] == m["engine_version"]]
            if same or g[False]:
                out.append((m, same or g[False], not same))
    return out


def body(row: dict[str, str], k: int | None, simulate: bool) -> dict[str, Any]:
    tp, ep = int(row["tp"]), int(row["ep"] or 1)
    dep: dict[str, Any] = {"gpu": row["gpu"], "tp": tp, "weight_dtype": DTYPES.get(row["weight_dtype"],
                                                                                   row["weight_dtype"]),
                           "engine": row["engine"]}
    if ep > 1:
        dep["ep"] = ep
    if k is not None:
        dep["speculative"] = {"method": "mtp", "num_speculative_tokens": k}
    return {"model": row["model"], "deployment": dep, "simulation": {"enabled": simulate},
            "workload": {"input_tokens": int(row["input_tokens"]), "output_tokens": int(row["output_tokens"]),
                         "concurrency": int(float(row["concurrency"]))}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, nargs="+", default=[1, 3], help="num_speculative_tokens to predict with")
    ap.add_argument("--simulate", action="store_true", help="simulated TPOT (default: the analytic mean)")
    args = ap.parse_args(argv)
    found = pairs()
    with tempfile.TemporaryDirectory() as d:
        os.environ.update({"DATABASE_URL": f"sqlite:///{d}/levers.db", "CALIBRATION_CV": "off",
                           "STARTUP_MODE": "blocking", "LOG_LEVEL": "WARNING"})
        from fastapi.testclient import TestClient

        from service.main import create_app

        with TestClient(create_app()) as client:
            def tpot_ms(b: dict[str, Any]) -> float | str:
                r = client.post("/v1/predictions", json=b)
                if r.status_code != 200:
                    return f"{r.status_code} {r.json().get('detail', '')[:60]}"
                p = r.json()
                return float(p["predicted"]["tpot_ms"]) if p["fits"] else "does not fit"

            errors: dict[int, list[float]] = {k: [] for k in args.k}
            cross_errors: dict[int, list[float]] = {k: [] for k in args.k}
            skipped: dict[str, int] = defaultdict(int)
            print(f"{'engine':<8} {'gpu':<9} {'dtype':<6} {'tp/ep':<6} {'ISL/OSL':<10} {'conc':>4} {'measured':>8} "
                  + " ".join(f"{'k=' + str(k):>14}" for k in args.k))
            for mtp, plain, cross in found:
                measured = statistics.median(float(r["tpot_ms"]) for r in plain) / float(mtp["tpot_ms"])
                layout = f"{mtp['tp']}/{mtp['ep'] or '1'}"
                lengths = f"{mtp['input_tokens']}/{mtp['output_tokens']}"
                head = (f"{mtp['engine']:<8} {mtp['gpu']:<9} {mtp['weight_dtype']:<6} {layout:<6} {lengths:<10} "
                        f"{int(float(mtp['concurrency'])):>4} {measured:>8.2f}{'x' if cross else ' '}")
                if mtp["engine"] not in ("vllm", "trtllm"):
                    skipped[f"engine {mtp['engine']} not modelled"] += 1
                    print(head + "  (engine not modelled)")
                    continue
                base = tpot_ms(body(mtp, None, args.simulate))
                if isinstance(base, str):
                    skipped[base] += 1
                    print(head + f"  ({base})")
                    continue
                cells = []
                for k in args.k:
                    with_k = tpot_ms(body(mtp, k, args.simulate))
                    if isinstance(with_k, str):
                        cells.append(f"{with_k[:14]:>14}")
                        continue
                    predicted = base / with_k
                    (cross_errors if cross else errors)[k].append(predicted / measured - 1.0)
                    cells.append(f"{predicted:>6.2f} {100 * (predicted / measured - 1):>+6.0f}%")
                print(head + " " + " ".join(cells))
            print(f"\n{len(found)} pairs ({sum(c for _, _, c in found)} cross-version, marked x); "
                  f"skipped: {dict(skipped) or 'none'}")
            for what, errs_by_k in (("same-version pairs", errors), ("cross-version pairs", cross_errors)):
                for k, errs in errs_by_k.items():
                    if errs:
                        med = 100 * statistics.median(abs(e) for e in errs)
                        print(f"k={k}, {what}: median |error| of the predicted speed-up {med:.0f}% over "
                              f"{len(errs)} pairs (median signed {100 * statistics.median(errs):+.0f}%)")
            print()
            published(client, args.simulate)
    # no pair with a stated GPU, engine and workload was found for these (docs/levers.md, "Measured")
    for lever in ("prefix cache TTFT", "cpu offload TPOT"):
        print(f"{lever}: no stored measurement, error not reported")
    return 0


def lever_body(row: Any, with_lever: bool, simulate: bool) -> dict[str, Any]:
    """The POST /v1/predictions body of a lever_measurements.csv row, with or without its speculation."""
    dep: dict[str, Any] = {"gpu": row.gpu, "tp": row.tp, "weight_dtype": row.weight_dtype, "engine": row.engine}
    if row.ep:
        dep["ep"] = row.ep
    if with_lever:
        spec: dict[str, Any] = {"method": row.method, "num_speculative_tokens": row.num_speculative_tokens}
        if row.acceptance_rate is not None:
            spec["acceptance_rate"] = row.acceptance_rate
        dep["speculative"] = spec
    return {"model": row.model, "deployment": dep, "simulation": {"enabled": simulate},
            "workload": {"input_tokens": row.input_tokens, "output_tokens": row.output_tokens,
                         "concurrency": row.concurrency}}


def published(client: Any, simulate: bool) -> None:
    """Predicted against measured speed-ups of the published pairs (lever_measurements.csv), per method and
    quality: median |error| of the speed-up and, where the source gives the throughputs, of them."""
    from gpu_catalog.levers import load_lever_measurements

    rows = load_lever_measurements()
    print(f"{'row':<8} {'q':<4} {'method':<7} {'engine':<7} {'gpu':<9} {'model':<34} {'tp/ep':<5} {'ISL/OSL':<10} "
          f"{'conc':>4} {'k':>2} {'a':>6} {'measured':>8} {'predicted':>9} {'error':>7}")
    errors: dict[tuple[str, str], list[float]] = defaultdict(list)
    tput_errors: list[float] = []
    for row in rows:
        out: list[dict[str, float]] = []
        for with_lever in (False, True):
            r = client.post("/v1/predictions", json=lever_body(row, with_lever, simulate))
            p = r.json()
            if r.status_code != 200 or not p["fits"]:
                break
            tpot_ms, ttft_ms = float(p["predicted"]["tpot_ms"]), float(p["predicted"]["ttft_ms"])
            latency_ms = ttft_ms + (row.output_tokens - 1) * tpot_ms
            out.append({"tpot_ms": tpot_ms, "latency_ms": latency_ms,
                        "tok_s": row.concurrency * row.output_tokens / (latency_ms / 1000.0)})
        accept = f"{row.acceptance_rate:.3f}" if row.acceptance_rate is not None else "dflt"
        head = (f"{row.row_id:<8} {row.quality:<4} {row.method:<7} {row.engine:<7} {row.gpu:<9} {row.model:<34} "
                f"{row.tp}/{row.ep or 1:<3} {row.input_tokens}/{row.output_tokens:<5} {row.concurrency:>4} "
                f"{row.num_speculative_tokens:>2} {accept:>6} {row.speedup:>8.2f}")
        if len(out) < 2:
            print(head + f"  (not predicted: {r.status_code} {str(p.get('detail', 'does not fit'))[:60]})")
            continue
        key = "tpot_ms" if row.metric == "tpot" else "latency_ms"
        predicted = out[0][key] / out[1][key]
        err = predicted / row.speedup - 1.0
        errors[(row.method, row.quality)].append(err)
        extra = ""
        if row.value_without is not None and row.value_with is not None:
            e0, e1 = out[0]["tok_s"] / row.value_without - 1.0, out[1]["tok_s"] / row.value_with - 1.0
            tput_errors += [e0, e1]
            extra = (f"   output tok/s without {out[0]['tok_s']:.1f} vs {row.value_without:g} ({100 * e0:+.0f}%), "
                     f"with {out[1]['tok_s']:.1f} vs {row.value_with:g} ({100 * e1:+.0f}%)")
        print(head + f" {predicted:>9.2f} {100 * err:>+6.0f}%" + extra)
    print(f"\n{len(rows)} published pairs ({sum(r.quality == 'good' for r in rows)} good, "
          f"{sum(r.quality == 'weak' for r in rows)} weak: configuration partly inferred, see notes)")
    for (method, quality), errs in sorted(errors.items()):
        print(f"{method}, {quality}: median |error| of the predicted speed-up "
              f"{100 * statistics.median(abs(e) for e in errs):.0f}% over {len(errs)} pairs "
              f"(median signed {100 * statistics.median(errs):+.0f}%)")
    if tput_errors:
        print(f"output tok/s where the source gives it: median |error| "
              f"{100 * statistics.median(abs(e) for e in tput_errors):.0f}% over {len(tput_errors)} runs")


if __name__ == "__main__":
    raise SystemExit(main())
