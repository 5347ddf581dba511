"""Do the search, the answer and POST /v1/predictions agree? (not a test: it prints figures)

The real app (in process, through its HTTP interface; a fresh SQLite file, calibrated at start-up) is asked
about random deployments x workloads (every workload mode, every SLA percentile) and about the search_speed
requirement set. Printed:

* percentile-order violations: a prediction whose p50 <= p90 <= p95 <= p99 fails for TTFT, TPOT or E2E, or
  whose mean lies outside its distribution (above its p99 or below its fastest possible, p50's floor: 0);
* analytic vs reference: the simulated figure (the reference) over the analytic one, per percentile, and the
  search's false rejects: candidates whose floors (space.floors, what the search prunes with) exceed the
  simulated figure, which the search could wrongly rule out (target 0);
* verdict mismatches: a random deployment whose prediction meets an SLA, searched with exactly its GPU type,
  GPU count, engine and dtypes allowed, must be feasible at no higher cost (target 0);
* unverified: per search_speed requirement, the candidates meeting every bound analytically that were not
  predicted and whose bounds do not rule out a place among the recommendations (search.unverified);
* answer vs prediction: the largest relative difference between a figure a recommendation (or a relaxation,
  a closest deployment or a Pareto point) reports and POST /v1/predictions for the same deployment and
  workload (target 0).

    python benchmarks/consistency.py                  # 300 deployments x workloads, 60 searches
    python benchmarks/consistency.py --samples 1000 --searches 0

Speculative deployments (``--spec-samples``, drawn after the others so that those stay the same): random
deployments with EAGLE-3 (any model, the catalog's method-wide default acceptance) or DeepSeek-R1 with its
MTP module, at k 1-5; their simulated / analytic ratios are printed apart, and their percentile order and
false rejects counted with the rest.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import tempfile
from typing import Any

import numpy as np
from fastapi.testclient import TestClient
from search_speed import REQUIREMENTS

from service.core.costmodel import step_model
from service.main import create_app
from service.prediction.analytic import QUANTILES, analytic_ttft_quantile_s
from service.recommendation.space import floors
from service.schemas.predictions import PredictionRequest
from service.settings import Settings

MODELS = ["meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-2-7b-hf",
          "Qwen/Qwen3-30B-A3B", "mistralai/Mistral-7B-Instruct-v0.3", "Qwen/Qwen2.5-7B-Instruct",
          "google/gemma-2-9b-it", "meta-llama/Llama-3.2-3B"]
GPUS = ["a10", "l4", "t4", "a100-80gb-sxm", "h100-sxm", "h200-sxm", "b200", "l40s", "rtx-4090", "gh200-96gb"]
PERCENTILES = ("p50", "p90", "p95", "p99")
LATENCY_FIELDS = ("ttft_ms", "tpot_ms", "e2e_ms", "output_tok_s", *(f"ttft_{q}_ms" for q in PERCENTILES),
                  *(f"tpot_{q}_ms" for q in PERCENTILES), "e2e_p95_ms")


def random_case(rng: random.Random) -> dict[str, Any]:
    mode = rng.choice(["concurrency", "concurrency", "request_rate", "offline"])
    load: dict[str, Any] = ({"concurrency": rng.choice([1, 2, 8, 32, 64, 128, 256])} if mode == "concurrency" else
                            {"request_rate": rng.choice([0.2, 1.0, 4.0, 16.0, 50.0])} if mode == "request_rate" else
                            {"offline": True})
    tp = rng.choice([1, 1, 2, 4])
    return {"model": rng.choice(MODELS),
            "deployment": {"gpu": rng.choice(GPUS), "tp": tp, "replicas": rng.choice([1, 1, 2, 3]),
                           "weight_dtype": rng.choice(["bf16", "fp8", "int4-awq", "int8-sq"]),
                           "kv_dtype": rng.choice(["auto", "fp8"]), "engine": rng.choice(["vllm", "trtllm"])},
            "workload": {"input_tokens": rng.choice([128, 512, 1024, 2048, 8000, 32000]),
                         "output_tokens": rng.choice([16, 128, 256, 1024]), **load}}


SPEC_MODELS = ["deepseek-ai/DeepSeek-R1"]
SPEC_GPUS = ["h200-sxm", "b200", "h100-sxm"]


def random_spec_case(rng: random.Random) -> dict[str, Any]:
    """A random deployment with speculative decoding: EAGLE-3 on a random case, or DeepSeek-R1's MTP on 8 GPUs."""
    if rng.random() < 0.3:
        body = random_case(rng)
        body["model"] = rng.choice(SPEC_MODELS)
        body["deployment"].update({"gpu": rng.choice(SPEC_GPUS), "tp": 8, "replicas": 1, "weight_dtype": "fp8",
                                   "kv_dtype": "auto"})
        body["workload"]["input_tokens"] = min(body["workload"]["input_tokens"], 8000)
        method = "mtp"
    else:
        body = random_case(rng)
        method = "eagle3"
    body["deployment"]["speculative"] = {"method": method, "num_speculative_tokens": rng.choice([1, 2, 3, 5])}
    return body


def rel(a: float | None, b: float | None) -> float:
    if a is None or b is None:
        return 0.0 if a == b else math.inf
    return abs(a - b) / max(abs(b), 1e-9)


def compare(pred: dict[str, Any], shown: dict[str, Any]) -> float:
    """Largest relative difference over the figures both carry."""
    return max((rel(shown[k], pred[k]) for k in LATENCY_FIELDS if k in shown and k in pred), default=0.0)


def order_violations(p: dict[str, Any]) -> list[str]:
    out = []
    for name in ("ttft", "tpot"):
        qs = [p[f"{name}_{q}_ms"] for q in PERCENTILES]
        if any(b < a for a, b in itertools.pairwise(qs)):
            out.append(f"{name} percentiles {qs}")
        if p[f"{name}_ms"] > qs[-1] * (1 + 1e-9) + 1e-6:
            out.append(f"heavy tail: {name} mean {p[f'{name}_ms']} above p99 {qs[-1]}")
    sim = p.get("simulation")
    if sim:
        for name in ("ttft_ms", "tpot_ms", "e2e_ms", "itl_ms", "queue_ms"):
            s = sim.get(name)
            if s and not (s["p50"] <= s["p90"] <= s["p95"] <= s["p99"]):
                out.append(f"simulation {name} {s}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=300, help="random deployments x workloads predicted")
    ap.add_argument("--searches", type=int, default=60, help="of those meeting an SLA, how many are searched")
    ap.add_argument("--spec-samples", type=int, default=60,
                    help="random deployments with speculative decoding predicted (after the others)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as d, TestClient(create_app(Settings(
            database_url=f"sqlite:///{d}/consistency.db", calibration_cv="off", log_level="WARNING",
            startup_mode="blocking"))) as client:
        adv = client.app.state.app_state.current().advisor        # type: ignore[attr-defined]
        ratios: dict[tuple[str, str], list[float]] = {}
        false_rejects: list[str] = []
        order_bad: list[str] = []
        fitting: list[tuple[dict[str, Any], dict[str, Any]]] = []
        n_pred = 0
        spec_rng = random.Random(args.seed + 1)
        spec_ratios: dict[tuple[str, str], list[float]] = {}
        n_spec = 0
        for i in range(args.samples + args.spec_samples):
            spec = i >= args.samples
            body = random_spec_case(spec_rng) if spec else random_case(rng)
            r = client.post("/v1/predictions", json=body)
            if r.status_code != 200 or not r.json()["fits"]:
                continue
            n_pred += not spec
            n_spec += spec
            p = r.json()["predicted"]
            order_bad += [f"{body}: {v}" for v in order_violations(p)]
            if p["simulation"] is None:
                continue
            # the analytic figures and the search's bounds for the same deployment (the search's own functions)
            req = PredictionRequest.model_validate(body)
            model = adv.model_for(req.model, None)
            static, params, res, _ = adv.analyse(model, req.workload, [req.deployment]).row(0)
            ttft_floor, tpot_floor = floors(params, step_model(static, params))
            for q_name, q in (("mean", None), *((k, QUANTILES[k]) for k in PERCENTILES)):
                ttft_a = res.ttft_s if q is None else analytic_ttft_quantile_s(
                    res.ttft_s, params.ttft_fixed_s, res.prefill_s, q)
                key = "" if q is None else f"_{q_name}"
                sim_ttft, sim_tpot = p[f"ttft{key}_ms"] / 1e3, p[f"tpot{key}_ms"] / 1e3
                into = spec_ratios if spec else ratios
                into.setdefault(("ttft", q_name), []).append(sim_ttft / float(ttft_a[0]))
                into.setdefault(("tpot", q_name), []).append(sim_tpot / float(res.tpot_s[0]))
                # rounding of the response's figures (0.01 ms TTFT, 0.001 ms TPOT) aside
                if float(ttft_floor[0]) > sim_ttft + 1e-5 or float(tpot_floor[0]) > sim_tpot + 1e-6:
                    false_rejects.append(f"{q_name} {body}: floor ttft {float(ttft_floor[0]) * 1e3:.2f} vs "
                                         f"{sim_ttft * 1e3:.2f}, tpot {float(tpot_floor[0]) * 1e3:.3f} vs "
                                         f"{sim_tpot * 1e3:.3f} ms")
            if not spec and body["workload"].get("offline") is None and not p["simulation"]["saturated"]:
                fitting.append((body, p))
        n_cmp = len(ratios.get(("ttft", "mean"), []))
        print(f"predictions: {n_pred} fitting deployments of {args.samples} random ones; {n_cmp} simulated")
        tails = [v for v in order_bad if "heavy tail" in v]
        print(f"percentile-order violations: {len(order_bad) - len(tails)}; means above their p99 (the slowest 1% "
              f"far slower than the rest, possible in one distribution): {len(tails)}")
        for v in order_bad[:5]:
            print("  ", v)
        print("simulated / analytic (the reference over the search's estimate), by percentile:")
        print_ratios(ratios)
        n_spec_cmp = len(spec_ratios.get(("ttft", "mean"), []))
        if args.spec_samples:
            print(f"speculative deployments: {n_spec} fitting of {args.spec_samples}; {n_spec_cmp} simulated; "
                  "simulated / analytic:")
            print_ratios(spec_ratios)
        print(f"false rejects (a floor the search prunes with above the simulated figure): {len(false_rejects)} of "
              f"{(n_cmp + n_spec_cmp) * 5} candidate x percentile")
        for v in false_rejects[:5]:
            print("  ", v)

        # verdicts: a deployment whose prediction meets an SLA, searched with exactly its layout's choices allowed
        mismatches: list[str] = []
        worst = (0.0, "")
        searched = 0
        for body, p in fitting[:args.searches]:
            q = rng.choice(["mean", *PERCENTILES])
            key = "" if q == "mean" else f"_{q}"
            sla = {"ttft_ms": round(p[f"ttft{key}_ms"] * 1.05 + 0.01, 2),
                   "tpot_ms": round(p[f"tpot{key}_ms"] * 1.05 + 0.001, 3), "percentile": q}
            dep = body["deployment"]
            gpus = dep["tp"] * dep["replicas"]
            req = {"model": body["model"], "workload": body["workload"], "sla": sla,
                   "constraints": {"gpus": [dep["gpu"]], "max_gpus": gpus, "engines": [dep["engine"]],
                                   "weight_dtypes": [dep["weight_dtype"]], "kv_dtypes": [dep["kv_dtype"]]}}
            r = client.post("/v1/recommendations", json=req)
            if r.status_code != 200:
                mismatches.append(f"{r.status_code} {req}")
                continue
            searched += 1
            ans = r.json()
            pred = client.post("/v1/predictions", json=body).json()
            cost = pred["cost"]["usd_per_hour"]
            if not ans["feasible"]:
                mismatches.append(f"infeasible: {req} ({ans['explanation']['summary'][:160]}; "
                                  f"notes {ans['notes'][:2]})")
            elif cost is not None and ans["recommendations"][0]["cost"]["usd_per_hour"] > cost + 1e-9:
                mismatches.append(f"costlier: {req}")
            worst = max(worst, check_answer(client, req, ans), key=lambda x: x[0])
        print(f"verdict mismatches: {len(mismatches)} of {searched} searches whose deployment's prediction meets "
              "the SLA")
        for v in mismatches[:5]:
            print("  ", v)

        # the search_speed requirement set: every figure shown against the prediction of its deployment
        unverified: list[int] = []
        for req in REQUIREMENTS:
            r = client.post("/v1/recommendations", json=req)
            assert r.status_code == 200, r.text
            worst = max(worst, check_answer(client, req, r.json()), key=lambda x: x[0])
            unverified.append(r.json()["search"]["unverified"])
        print(f"search_speed requirements whose ranking a candidate not predicted could change (search.unverified "
              f"> 0): {sum(u > 0 for u in unverified)} of {len(REQUIREMENTS)}; candidates: median "
              f"{np.median(unverified):.0f}, max {max(unverified)}")
        print(f"largest relative difference, answer vs POST /v1/predictions (recommendations, closest, "
              f"relaxations, Pareto points; {searched} searches + {len(REQUIREMENTS)} search_speed requirements): "
              f"{worst[0]:.3g} {worst[1]}")
    return 0


def print_ratios(ratios: dict[tuple[str, str], list[float]]) -> None:
    for (metric, q), v in sorted(ratios.items()):
        a = np.asarray(v)
        print(f"  {metric} {q:>4}: min {a.min():.3f}  p1 {np.percentile(a, 1):.3f}  p10 {np.percentile(a, 10):.3f}"
              f"  median {np.median(a):.3f}  p90 {np.percentile(a, 90):.3f}  max {a.max():.3f}  "
              f"median |error| {np.median(np.abs(1 / a - 1)) * 100:.1f}%")


def check_answer(client: TestClient, req: dict[str, Any], ans: dict[str, Any]) -> tuple[float, str]:
    """The largest relative difference between what the answer shows of a deployment and its prediction."""
    worst = (0.0, "")

    def predicted(dep: dict[str, Any], workload: dict[str, Any] | None = None) -> dict[str, Any]:
        r = client.post("/v1/predictions", json={"model": req.get("model"), "model_spec": req.get("model_spec"),
                                                 "deployment": dep, "workload": workload or req["workload"]})
        assert r.status_code == 200, r.text
        return {**r.json()["predicted"], "_cost": r.json()["cost"]}

    pct = ans["applied"]["sla"]["percentile"]
    key = "" if pct == "mean" else f"_{pct}"
    for rec in ans["recommendations"]:
        d = compare(predicted(rec["deployment"]), rec["predicted"])
        worst = max(worst, (d, f"recommendation {rec['deployment']}"), key=lambda x: x[0])
    ex = ans.get("explanation") or {}
    for c in ex.get("closest", []):
        p = predicted(c["deployment"])
        d = max(rel(c["predicted"]["ttft_ms"], p[f"ttft{key}_ms"]), rel(c["predicted"]["tpot_ms"], p[f"tpot{key}_ms"]))
        worst = max(worst, (d, f"closest {c['deployment']}"), key=lambda x: x[0])
    for pt in ans.get("pareto", []):
        p = predicted(pt["deployment_spec"])
        d = max(rel(pt["ttft_ms"], p[f"ttft{key}_ms"]), rel(pt["tpot_ms"], p[f"tpot{key}_ms"]),
                rel(pt["output_tok_s"], p["output_tok_s"]), rel(pt["usd_per_hour"], p["_cost"]["usd_per_hour"]))
        worst = max(worst, (d, f"pareto point {pt['deployment']}"), key=lambda x: x[0])
    for rx in ex.get("relaxations", []):
        if rx.get("deployment") is None or rx["value"] is None:
            continue
        kind = rx["kind"]
        if kind in ("ttft_ms", "tpot_ms", "e2e_ms"):
            p = predicted(rx["deployment"])
            shown = p[f"{kind.removesuffix('_ms')}{key}_ms"] if kind != "e2e_ms" else (
                p["e2e_ms"] if pct == "mean" else p["simulation"]["e2e_ms"][pct] if p["simulation"] else None)
            d = rel(rx["value"], shown)
            worst = max(worst, (d, f"relaxation {kind} {rx['deployment']}"), key=lambda x: x[0])
    return worst


if __name__ == "__main__":
    raise SystemExit(main())
