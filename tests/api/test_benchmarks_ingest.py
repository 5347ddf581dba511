"""POST /v1/benchmarks and GET /v1/calibration over HTTP on the real app, on SQLite and PostgreSQL.

One app per database for the module (start-up loads ~10k shipped measurements and fits the calibration); each test
reads the state it starts from, so the order of the tests does not matter.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import io
import json
import math
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.main import create_app
from service.settings import Settings

WRITE_KEY = "ingest-test-write-key"
AUTH = {"Authorization": f"Bearer {WRITE_KEY}"}
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bench"
# The deployment tests/fixtures/bench/README.md says the vLLM fixture simulates.
MODEL_8B = "meta-llama/Llama-3.1-8B-Instruct"
FIXTURE_DEPLOYMENT = {"gpu": "h100-sxm", "gpu_count": 1, "tp": 1, "pp": 1, "replicas": 1, "weight_dtype": "bf16",
                      "kv_dtype": "auto", "engine": "vllm", "engine_version": "0.11.0"}
# The fixture's run: --random-input-len 1024 --random-output-len 128 --max-concurrency 16.
FIXTURE_WORKLOAD = {"input_tokens": 1024, "output_tokens": 128, "concurrency": 16}
TRT_DEPLOYMENT = {**FIXTURE_DEPLOYMENT, "engine": "trtllm", "engine_version": None, "weight_dtype": "fp8",
                  "kv_dtype": "fp8"}
UNRELATED = {
    "70b-mi300x-vllm": {"model": "meta-llama/Llama-3.1-70B-Instruct",
                        "deployment": {"gpu": "mi300x", "weight_dtype": "bf16", "engine": "vllm"},
                        "workload": FIXTURE_WORKLOAD},
    "8b-a100-trtllm": {"model": MODEL_8B, "deployment": {"gpu": "a100-80gb-sxm", "weight_dtype": "fp16",
                                                         "engine": "trtllm"},
                       "workload": FIXTURE_WORKLOAD},
}
# Same GPU and engine, another dtype: no vLLM FP8 row on H100 is fitted (all 30 shipped ones use expert or attention
# data parallelism), so it inherits the H100 segment the new row refits; the residual correction stays in its dtype.
SAME_GPU_OTHER_DTYPE = {"model": MODEL_8B, "deployment": {"gpu": "h100-sxm", "weight_dtype": "fp8", "engine": "vllm"},
                        "workload": FIXTURE_WORKLOAD}


@pytest.fixture(scope="module")
def api(module_db_url: str) -> Iterator[TestClient]:
    # two ingests in flight at once in one worker (admission would shed the second at the default of one), so that
    # test_concurrent_ingests_build_on_each_other reaches the database lock that serialises them across workers
    settings = Settings(database_url=module_db_url, advisor_api_key=WRITE_KEY, calibration_cv="off",
                        max_ingests_in_flight=2)
    with TestClient(create_app(settings)) as c:
        yield c


def vllm_result() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / "vllm_bench_serve.json").read_text())
    return loaded


def vllm_body() -> dict[str, Any]:
    return {"format": "vllm_bench_serve", "model": MODEL_8B, "deployment": dict(FIXTURE_DEPLOYMENT),
            "result": vllm_result()}


def stored_count(api: TestClient) -> int:
    r = api.get("/v1/benchmarks", params={"limit": 1})
    assert r.status_code == 200, r.text
    total: int = r.json()["total"]
    return total


def calibration(api: TestClient, version: int | None = None) -> dict[str, Any]:
    r = api.get("/v1/calibration" if version is None else f"/v1/calibration/{version}")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def predict(api: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    r = api.post("/v1/predictions", json=body)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def post(api: TestClient, body: dict[str, Any], headers: dict[str, str] = AUTH) -> Any:
    return api.post("/v1/benchmarks", json=body, headers=headers)


# --- the vLLM result of a known deployment ----------------------------------------------------------------


def _log_errors(pred: dict[str, Any], result: dict[str, Any]) -> dict[str, float]:
    """|log(predicted / measured)| of throughput, TTFT and TPOT: the fit's own measure of error."""
    return {"throughput": abs(math.log(pred["output_tok_s"] / result["output_throughput"])),
            "ttft": abs(math.log(pred["ttft_ms"] / result["mean_ttft_ms"])),
            "tpot": abs(math.log(pred["tpot_ms"] / result["mean_tpot_ms"]))}


def searched_and_predicted(api: TestClient) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """A recommendation on the fixture's GPU, engine and dtype: its calibration version, the search's figures of
    its first deployment (its point of the Pareto front) and that deployment's prediction."""
    r = api.post("/v1/recommendations", json={
        "model": MODEL_8B, "workload": FIXTURE_WORKLOAD, "simulation": {"enabled": False}, "top_k": 1,
        "constraints": {"gpus": ["h100-sxm"], "engines": ["vllm"], "weight_dtypes": ["bf16"], "max_gpus": 1}})
    assert r.status_code == 200, r.text
    body = r.json()
    point = next(p for p in body["pareto"] if p["rank"] == 1)
    dep = body["recommendations"][0]["deployment"]
    # (the search's figures are analytic: the prediction's without its simulation, as the search asked)
    pred = predict(api, {"model": MODEL_8B, "workload": FIXTURE_WORKLOAD, "simulation": {"enabled": False},
                         "deployment": {k: v for k, v in dep.items() if k not in ("gpu_count", "multi_node")}})
    return body["calibration_version"], point, pred["predicted"]


def test_a_vllm_result_moves_its_own_configuration_toward_it_and_nothing_unrelated(api: TestClient) -> None:
    result = vllm_result()
    target = {"model": MODEL_8B, "deployment": {k: v for k, v in FIXTURE_DEPLOYMENT.items() if k != "gpu_count"},
              "workload": FIXTURE_WORKLOAD}
    before_cal = calibration(api)
    before = predict(api, target)
    searched_before = searched_and_predicted(api)
    before_unrelated = {name: predict(api, body) for name, body in UNRELATED.items()}
    other_gpu = {**target, "deployment": {**target["deployment"], "gpu": "h200-sxm"}}
    before_other_gpu = predict(api, other_gpu)["predicted"]
    before_other_dtype = predict(api, SAME_GPU_OTHER_DTYPE)["predicted"]
    count = stored_count(api)

    r = post(api, vllm_body())
    assert r.status_code == 201, r.text
    got = r.json()
    assert got["duplicate"] is False and len(got["measurement_ids"]) == 1
    assert got["calibration_version"] == before_cal["version"] + 1 == got["calibration"]["version"]
    assert got["calibration"]["previous_version"] == before_cal["version"]
    assert got["calibration"]["refitted_segments"] == ["vllm/hopper", "vllm/h100-sxm", "vllm/h100-sxm/bf16"]
    assert stored_count(api) == count + 1

    # the row as stored: the file's figures, who sent it (a digest of the key, never the key) and when
    rows = api.get("/v1/benchmarks", params={"source": got["source_id"]}).json()
    assert rows["total"] == 1
    row = rows["items"][0]
    assert row["id"] == got["measurement_ids"][0] and row["row_id"] == got["row_ids"][0]
    assert row["submitted_by"] == "key-" + hashlib.sha256(WRITE_KEY.encode()).hexdigest()[:12]
    assert WRITE_KEY not in json.dumps(rows) and WRITE_KEY not in r.text
    assert row["created_at"] and row["source_id"] == got["source_id"] == f"user:{got['ingest_id']}"
    assert (row["gpu"], row["model"], row["engine"], row["weight_dtype"], row["mode"]) == (
        "h100-sxm", MODEL_8B, "vllm", "bf16", "concurrency")
    assert row["output_tok_s"] == result["output_throughput"] and row["ttft_ms"] == result["mean_ttft_ms"]
    assert row["tpot_ms"] == result["mean_tpot_ms"] and row["concurrency"] == 16

    # a new version is current, the previous one stays readable and unchanged
    after_cal = calibration(api)
    assert after_cal["version"] == got["calibration_version"] and after_cal["method"] == "refit"
    assert after_cal["base_version"] == before_cal["version"]
    assert after_cal["n_measurements"] == before_cal["n_measurements"] + 1
    old = calibration(api, before_cal["version"])
    assert old["current"] is False and {**old, "current": True} == before_cal

    # this worker predicts with the new version at once, and the exact configuration moved toward the measurement
    after = predict(api, target)
    assert after["confidence"]["calibration_version"] == after_cal["version"]
    assert after["confidence"]["segment"] == "vllm/h100-sxm/bf16"
    assert after["confidence"]["measurements"] == before["confidence"]["measurements"] + 1
    e0, e1 = _log_errors(before["predicted"], result), _log_errors(after["predicted"], result)
    assert sum(v * v for v in e1.values()) < sum(v * v for v in e0.values())
    assert e1["throughput"] < e0["throughput"] and e1["tpot"] < e0["tpot"]
    # ... most of the way: within 10% of what was measured (the residual correction of users' measurements)
    assert after["predicted"]["ttft_ms"] == pytest.approx(result["mean_ttft_ms"], rel=0.10)
    assert after["predicted"]["tpot_ms"] == pytest.approx(result["mean_tpot_ms"], rel=0.10)
    assert after["predicted"]["output_tok_s"] == pytest.approx(result["output_throughput"], rel=0.10)
    # the same deployment on another GPU type moves by no more than 2%
    # the same deployment on another GPU type, or in another dtype, moves by no more than 2%
    other_after = predict(api, other_gpu)["predicted"]
    dtype_after = predict(api, SAME_GPU_OTHER_DTYPE)["predicted"]
    for field in ("ttft_ms", "tpot_ms", "output_tok_s"):
        assert other_after[field] == pytest.approx(before_other_gpu[field], rel=0.02), field
        assert dtype_after[field] == pytest.approx(before_other_dtype[field], rel=0.02), field

    # the search works with the new version too (the recommender keeps fitted parameters per calibration):
    # its figures of the deployment it ranks first are that deployment's prediction, and they moved
    version, point, pred = searched_and_predicted(api)
    assert version == after_cal["version"] != searched_before[0]
    for field in ("ttft_ms", "tpot_ms", "output_tok_s"):
        assert point[field] == pytest.approx(pred[field], rel=1e-3), field
    assert point != searched_before[1]

    # segments that hold none of the new rows predict exactly as before
    for name, body in UNRELATED.items():
        now = predict(api, body)
        assert now["predicted"] == before_unrelated[name]["predicted"], name
        assert now["memory_per_gpu_gb"] == before_unrelated[name]["memory_per_gpu_gb"], name
        assert now["confidence"]["segment"] == before_unrelated[name]["confidence"]["segment"], name

    # the same file again: stored once, and the answer says so (also when only its description differs)
    for again in (vllm_body(), {**vllm_body(), "source": "the same run, described differently"}):
        r2 = post(api, again)
        assert r2.status_code == 200, r2.text
        dup = r2.json()
        assert dup["duplicate"] is True and dup["calibration"] is None
        assert (dup["ingest_id"], dup["measurement_ids"], dup["calibration_version"]) == (
            got["ingest_id"], got["measurement_ids"], got["calibration_version"])
        # when it was first stored, as stored (with its UTC offset on both databases)
        assert datetime.fromisoformat(dup["created_at"]) == datetime.fromisoformat(got["created_at"])
    assert stored_count(api) == count + 1
    assert calibration(api)["version"] == after_cal["version"]


def test_genai_perf_and_trtllm_bench_results_are_ingested(api: TestClient) -> None:
    cases = [
        ("genai_perf_profile_export.json",
         {"format": "genai_perf", "deployment": {**FIXTURE_DEPLOYMENT, "engine_args": {"max_num_seqs": 256}}},
         {"mode": "concurrency", "concurrency": 32.0, "max_batch": 256}, "vllm/h100-sxm/bf16"),
        # trtllm-bench does not record --concurrency: without a hint the run is offline
        ("trtllm_bench_report.json", {"format": "trtllm_bench", "deployment": TRT_DEPLOYMENT},
         {"mode": "offline", "concurrency": None, "max_batch": 2048}, "trtllm/h100-sxm/fp8"),
    ]
    for name, body, expected, segment in cases:
        r = post(api, {**body, "model": MODEL_8B, "result": json.loads((FIXTURES / name).read_text())})
        assert r.status_code == 201, r.text
        got = r.json()
        assert got["calibration"]["refitted_segments"][-1] == segment and got["calibration"]["scored_rows"] == 1
        row = api.get("/v1/benchmarks", params={"source": got["source_id"]}).json()["items"][0]
        assert {k: row[k] for k in expected} == expected, name
        assert json.loads(row["notes"])["format"] == body["format"]


# --- rows, as JSON and as CSV ---------------------------------------------------------------------------------

L4_ROWS = [
    {"row_id": f"lab-l4-{c}", "source": "test lab, vllm bench serve on one L4", "engine": "vllm",
     "engine_version": "0.11.0", "gpu": "l4", "gpu_count": 1, "model": MODEL_8B, "weight_dtype": "fp8",
     "kv_dtype": "auto", "tp": 1, "pp": 1, "dp": 1, "mode": "concurrency", "input_tokens": 1024.0,
     "output_tokens": 128.0, "concurrency": float(c), "output_tok_s": tok_s, "ttft_ms": ttft_ms, "ttft_stat": "mean",
     "tpot_ms": tpot_ms, "tpot_stat": "mean"}
    for c, tok_s, ttft_ms, tpot_ms in ((8, 420.0, 310.0, 17.5), (32, 980.0, 1150.0, 27.0))
]


def _csv(rows: list[dict[str, Any]]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def test_rows_as_csv_then_json_are_one_content_and_fill_a_gpu_without_measurements(api: TestClient) -> None:
    l4_vllm = {"model": MODEL_8B, "deployment": {"gpu": "l4", "weight_dtype": "fp8", "engine": "vllm"},
               "workload": {"input_tokens": 1024, "output_tokens": 128, "concurrency": 8}}
    before_cal = calibration(api)
    fallback = [f for f in before_cal["no_measurements"] if (f["gpu"], f["engine"]) == ("l4", "vllm")]
    assert len(fallback) == 1 and fallback[0]["segment"] == "vllm/ada" and fallback[0]["level"] == "engine/arch"
    assert predict(api, l4_vllm)["confidence"]["segment"] == "vllm/ada"
    count = stored_count(api)

    r = api.post("/v1/benchmarks", content=_csv(L4_ROWS), headers={**AUTH, "Content-Type": "text/csv"})
    assert r.status_code == 201, r.text
    got = r.json()
    assert got["format"] == "rows" and len(got["measurement_ids"]) == 2
    assert got["row_ids"] == ["user:lab-l4-8", "user:lab-l4-32"]
    assert got["calibration"]["scored_rows"] == 2 and got["calibration"]["not_scored"] == {}
    assert got["calibration"]["refitted_segments"] == ["vllm/ada", "vllm/l4", "vllm/l4/fp8"]
    assert stored_count(api) == count + 2

    after_cal = calibration(api)
    assert after_cal["version"] == before_cal["version"] + 1
    assert not [f for f in after_cal["no_measurements"] if (f["gpu"], f["engine"]) == ("l4", "vllm")]
    seg = {s["key"]: s for s in after_cal["segments"]}["vllm/l4/fp8"]
    assert seg["level"] == "engine/gpu/dtype" and seg["measurements"] == 2 and seg["parent"] == "vllm/l4"
    conf = predict(api, l4_vllm)["confidence"]
    assert conf["segment"] == "vllm/l4/fp8" and conf["measurements"] == 2

    # the same rows as JSON are the same content
    r = post(api, {"format": "rows", "rows": L4_ROWS})
    assert r.status_code == 200, r.text
    assert r.json()["duplicate"] is True and r.json()["measurement_ids"] == got["measurement_ids"]

    # another measurement under a stored row_id: refused, nothing stored
    changed = copy.deepcopy(L4_ROWS)
    changed[1]["ttft_ms"] = 1400.0
    r = post(api, {"format": "rows", "rows": changed})
    assert r.status_code == 409, r.text
    problem = r.json()
    assert problem["field"] == ["rows", 0, "row_id"] and problem["measurement_id"] == got["measurement_ids"][0]
    assert stored_count(api) == count + 2 and calibration(api)["version"] == after_cal["version"]


# --- refusals -------------------------------------------------------------------------------------------------


def _vllm_with(**result_changes: Any) -> dict[str, Any]:
    body = vllm_body()
    body["result"].update(result_changes)
    return body


def _vllm_dep(**changes: Any) -> dict[str, Any]:
    body = vllm_body()
    body["deployment"].update(changes)
    return body


def _rows_with(i: int, **changes: Any) -> dict[str, Any]:
    rows = copy.deepcopy(L4_ROWS)
    for row in rows:
        row["row_id"] += "-refused"
    rows[i].update(changes)
    return {"format": "rows", "rows": rows}


def _genai_with(**ttft_changes: Any) -> dict[str, Any]:
    result = json.loads((FIXTURES / "genai_perf_profile_export.json").read_text())
    result["time_to_first_token"].update(ttft_changes)
    return {**vllm_body(), "format": "genai_perf", "result": result}


def _without(key: str) -> dict[str, Any]:
    body = vllm_body()
    del body["result"][key]
    return body


REFUSED: dict[str, tuple[dict[str, Any], list[str | int]]] = {
    "negative latency": (_vllm_with(mean_ttft_ms=-5.0), ["result", "mean_ttft_ms"]),
    "p99 below the median": (_vllm_with(p99_ttft_ms=50.0), ["result", "p99_ttft_ms"]),
    "first token after the request's end": (_vllm_with(mean_ttft_ms=2000.0), ["result"]),
    "required field missing": (_without("completed"), ["result", "completed"]),
    "unknown GPU": (_vllm_dep(gpu="h100-sxmm"), ["deployment", "gpu"]),
    "unknown model": ({**vllm_body(), "model": "meta-llama/Llama-9-8B"}, ["model"]),
    "layout does not multiply to gpu_count": (_vllm_dep(gpu_count=2), ["deployment", "gpu_count"]),
    "tp not dividing the heads": (_vllm_dep(tp=3, gpu_count=3), ["deployment", "tp"]),
    "hint contradicting the file": ({**vllm_body(), "workload": {"concurrency": 32}}, ["workload", "concurrency"]),
    "trtllm-bench report of a vLLM deployment": (
        {**vllm_body(), "format": "trtllm_bench",
         "result": json.loads((FIXTURES / "trtllm_bench_report.json").read_text())}, ["deployment", "engine"]),
    "unknown format": ({**vllm_body(), "format": "vllm"}, ["format"]),
    "max_num_seqs contradicting the report": (
        {**vllm_body(), "format": "trtllm_bench",
         "deployment": {**TRT_DEPLOYMENT, "engine_args": {"max_num_seqs": 256}},
         "result": json.loads((FIXTURES / "trtllm_bench_report.json").read_text())},
        ["deployment", "engine_args", "max_num_seqs"]),
    "genai-perf mean above its maximum": (_genai_with(avg=500.0), ["result", "time_to_first_token", "avg"]),
    "row: unknown GPU in the second row": (_rows_with(1, gpu="l4x"), ["rows", 1, "gpu"]),
    "row: negative throughput": (_rows_with(0, output_tok_s=-1.0), ["rows", 0, "output_tok_s"]),
    "row: tp*pp*dp != gpu_count": (_rows_with(0, gpu_count=2), ["rows", 0, "gpu_count"]),
    "row: mean TTFT above the mean latency": (_rows_with(0, e2e_ms=200.0, e2e_stat="mean"), ["rows", 0, "ttft_ms"]),
    "row: total below output throughput": (_rows_with(0, total_tok_s=100.0), ["rows", 0, "total_tok_s"]),
    "row: unknown mode": (_rows_with(0, mode="closed"), ["rows", 0, "mode"]),
    "row: a statistic's name longer than its column": (_rows_with(0, ttft_stat="m" * 500), ["rows", 0, "ttft_stat"]),
    "engine version longer than its column": (_vllm_dep(engine_version="0." * 100), ["deployment", "engine_version"]),
    "row: absurd layout": (_rows_with(0, tp=10**12, weight_dtype=None, gpu_count=None), ["rows", 0, "tp"]),
    "row: dtype the engine does not run": (_rows_with(0, weight_dtype="w4a8-awq"), ["rows", 0, "weight_dtype"]),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_bad_file_is_refused_with_the_field_named_and_nothing_stored(api: TestClient, case: str) -> None:
    body, field = REFUSED[case]
    count, version = stored_count(api), calibration(api)["version"]
    r = post(api, body)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    problem = r.json()
    assert problem["field"] == field, problem
    assert problem["title"] and problem["detail"]
    assert stored_count(api) == count and calibration(api)["version"] == version


def test_refusals_name_the_valid_choices(api: TestClient) -> None:
    r = post(api, _vllm_dep(gpu="h100-sxmm"))
    assert "h100-sxm" in r.json()["valid"] and "h100-sxm" in r.json()["detail"]
    r = post(api, {**vllm_body(), "format": "vllm"})
    assert set(r.json()["errors"][0]["valid"]) == {"rows", "vllm_bench_serve", "genai_perf", "trtllm_bench"}
    r = post(api, _rows_with(0, weight_dtype="w4a8-awq"))
    assert "fp8" in r.json()["valid"]


def test_bad_csv_and_bodies_are_refused(api: TestClient) -> None:
    count = stored_count(api)
    bad_value = copy.deepcopy(L4_ROWS)
    for row in bad_value:
        row["row_id"] += "-csv"
    bad_value[1]["ttft_ms"] = "fast"
    cases: list[tuple[bytes, str, int, list[str | int] | None]] = [
        (_csv(bad_value), "text/csv", 422, ["rows", 1, "ttft_ms"]),
        (_csv([{**L4_ROWS[0], "colour": "red"}]), "text/csv", 422, ["body", "header", "colour"]),
        (b"row_id,gpu\n", "text/csv", 422, ["rows"]),
        (b'{"format": "rows", "rows": [', "application/json", 422, ["body"]),
        (b"<rows/>", "application/xml", 415, None),
        (_csv([{**_row("lab-inf", "l4", "fp8"), "output_tok_s": "inf"}]), "text/csv", 422, ["rows", 0, "output_tok_s"]),
    ]
    for content, media, status, field in cases:
        r = api.post("/v1/benchmarks", content=content, headers={**AUTH, "Content-Type": media})
        assert r.status_code == status, (field, r.text)
        if field is not None:
            assert r.json()["field"] == field
    assert stored_count(api) == count


def test_an_oversized_body_is_refused(api: TestClient) -> None:
    limit_bytes = Settings(database_url="sqlite://").max_body_bytes     # the default the module's app runs with
    count = stored_count(api)
    r = api.post("/v1/benchmarks", content=b" " * (limit_bytes + 1), headers={**AUTH, "Content-Type": "text/csv"})
    assert r.status_code == 413 and r.json()["status"] == 413
    assert stored_count(api) == count


def test_writes_need_the_key(api: TestClient) -> None:
    count, version = stored_count(api), calibration(api)["version"]
    r = post(api, vllm_body(), headers={})
    assert r.status_code == 401 and r.json()["status"] == 401
    assert r.headers["WWW-Authenticate"] == "Bearer"
    r = post(api, vllm_body(), headers={"Authorization": "Bearer not-the-key"})
    assert r.status_code == 403 and r.json()["status"] == 403
    # the key is checked before the body: a bad body without a key is a 401, not a 422
    r = api.post("/v1/benchmarks", content=b"not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 401
    assert stored_count(api) == count and calibration(api)["version"] == version


# --- the report -----------------------------------------------------------------------------------------------


def test_calibration_report_shape(api: TestClient) -> None:
    cal = calibration(api)
    assert cal["current"] is True and len(cal["data_sha256"]) == 64 and cal["n_measurements"] > 1000
    assert cal["levels"] == ["global", "engine", "engine/arch", "engine/gpu", "engine/gpu/dtype"]
    names = set(cal["parameters"])
    assert {"eff_flops", "eff_bw", "step_overhead_s"} <= names
    by_key = {s["key"]: s for s in cal["segments"]}
    assert by_key["global"]["level"] == "global" and by_key["global"]["parent"] is None
    # a refit after an ingest leaves the global level as the last full fit made it
    assert by_key["global"]["measurements"] <= cal["n_measurements"]
    first = calibration(api, 1)
    assert first["method"] == "full" and first["segments"][0]["key"] == "global"
    # the global and engine levels are fitted on the same rows: all but the attention-DP / expert-parallel ones
    engines = sum(s["measurements"] for s in first["segments"] if s["level"] == "engine")
    assert engines == first["segments"][0]["measurements"] <= first["n_measurements"]
    for s in cal["segments"]:
        assert set(s["params"]) == names and s["measurements"] >= 0
        assert s["parent"] is None or s["parent"] in by_key, s
    assert set(cal["generation"]) >= {"vllm", "trtllm"}
    # calibration_cv=off: no held-out error; the in-sample one is served, labelled so
    assert cal["held_out"] is None and cal["error"]["kind"] == "in-sample" == cal["in_sample"]["kind"]
    err = cal["error"]
    for breakdown in ("by_gpu", "by_engine", "by_dtype"):
        assert err[breakdown]
        for stats in err[breakdown].values():
            assert set(stats) == {"throughput", "ttft", "tpot"}
    overall = err["overall"]["throughput"]
    assert overall["n"] > 1000 and 0 < overall["median_ape_pct"] <= overall["p90_ape_pct"]
    for f in cal["no_measurements"]:
        assert f["segment"] in by_key and by_key[f["segment"]]["level"] in ("global", "engine", "engine/arch")
    missing = {(f["gpu"], f["engine"]) for f in cal["no_measurements"]}
    # t4: no measurements at all; mi325x: no vLLM measurement yet; mi355x: AMD, which TensorRT-LLM does not run on;
    # gaudi3: no catalog engine runs it
    assert {("t4", "vllm"), ("t4", "trtllm"), ("mi325x", "vllm")} <= missing
    assert ("mi355x", "trtllm") not in missing and not [m for m in missing if m[0] == "gaudi3"]
    assert ("h100-sxm", "vllm") not in missing
    assert "benchmarks/accuracy.py" in cal["reproduce"]

    r = api.get("/v1/calibration/999999")
    assert r.status_code == 404 and r.json()["field"] == ["path", "version"]
    assert api.get(f"/v1/calibration/{2**40}").status_code == 422


def test_the_request_body_is_documented(api: TestClient) -> None:
    spec = api.get("/openapi.json").json()
    op = spec["paths"]["/v1/benchmarks"]["post"]
    content = op["requestBody"]["content"]
    assert set(content) == {"application/json", "text/csv"}
    ingest = spec["components"]["schemas"]["BenchmarkIngest"]
    refs = {one["$ref"].rsplit("/", 1)[1] for one in ingest["oneOf"]}
    assert refs == {"RowsIngest", "ToolIngest"} and refs <= set(spec["components"]["schemas"])
    assert set(content["application/json"]["examples"]) == {"rows", "vllm_bench_serve"}
    assert "/v1/calibration" in spec["paths"] and "/v1/calibration/{version}" in spec["paths"]


# --- two ingests at once --------------------------------------------------------------------------------------


def _row(row_id: str, gpu: str, dtype: str) -> dict[str, Any]:
    return {**L4_ROWS[0], "row_id": row_id, "gpu": gpu, "weight_dtype": dtype,
            "source": f"test lab, one {gpu}"}


def test_concurrent_ingests_build_on_each_other(api: TestClient) -> None:
    """Ingests are serialised: a refit starts from the version the previous one made, and one refit may cover both
    ingests; either way each answer's version holds its own rows' segment and the newest holds both (without the
    lock, two refits would start from the same version and the second would drop the first one's segment)."""
    from concurrent.futures import ThreadPoolExecutor

    start = calibration(api)["version"]
    # (GPUs without shipped vLLM rows that hold the 8B model: a run the modelled memory cannot hold without a queue
    # its TTFT does not show is not fitted, service/core/calibration.unqueued_overload)
    segments = ["vllm/rtx-6000-ada/fp16", "vllm/a10/bf16"]
    bodies = [{"format": "rows", "rows": [_row("lab-ada-1", "rtx-6000-ada", "fp16")]},
              {"format": "rows", "rows": [_row("lab-a10-1", "a10", "bf16")]}]
    with ThreadPoolExecutor(max_workers=2) as pool:
        answers = list(pool.map(lambda b: post(api, b), bodies))
    assert [a.status_code for a in answers] == [201, 201], [a.text for a in answers]
    for answer, segment in zip(answers, segments, strict=True):
        version = answer.json()["calibration_version"]
        assert version in (start + 1, start + 2)
        assert segment in {s["key"] for s in calibration(api, version)["segments"]}
    newest = calibration(api)
    assert newest["version"] == max(a.json()["calibration_version"] for a in answers)
    assert newest["version"] == start + 1 or newest["base_version"] == start + 1
    keys = {s["key"] for s in newest["segments"]}
    assert {"vllm/rtx-6000-ada/fp16", "vllm/a10/bf16"} <= keys
