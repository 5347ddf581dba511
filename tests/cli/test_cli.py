"""The llm-deploy-advisor command, run for real: in-process (click's runner, the real app on the API tests'
database) and as a subprocess against a service it started with ``serve``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result
from fastapi.testclient import TestClient

from service.cli.main import cli
from tests.ports import free_port

CHAT_8B: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 50},
    "sla": {"ttft_ms": 500, "tpot_ms": 50, "percentile": "p95"},
    "constraints": {"gpus": ["a10", "l4", "a100-80gb-sxm", "h100-sxm"], "max_gpus": 8},
}
CHAT_8B_FLAGS = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--input-tokens", "1024", "--output-tokens", "256",
                 "--concurrency", "50", "--ttft-ms", "500", "--tpot-ms", "50", "--percentile", "p95",
                 "--gpus", "a10,l4,a100-80gb-sxm,h100-sxm", "--max-gpus", "8"]
PREDICT_BODY: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "deployment": {"gpu": "l4", "tp": 1, "weight_dtype": "fp8", "kv_dtype": "fp8", "engine": "vllm"},
    "workload": {"input_tokens": 512, "output_tokens": 128, "concurrency": 8},
}
# Ports this suite's server may take (the first free one): CLI_TEST_PORT, and the 99 after it.
FIRST_PORT = int(os.environ.get("CLI_TEST_PORT", "8500"))
SERVER_START_S = 300.0


@pytest.fixture(scope="module")
def db_env(client: TestClient) -> dict[str, str]:
    """The environment that points the command at the API tests' database (migrated and calibrated)."""
    url = client.app.state.app_state.engine.url.render_as_string(hide_password=False)  # type: ignore[attr-defined]
    return {"DATABASE_URL": url, "CALIBRATION_CV": "off", "LOG_LEVEL": "WARNING"}


def invoke(db_env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=db_env, catch_exceptions=False)


def without_volatile(answer: dict[str, Any]) -> dict[str, Any]:
    """A recommendation answer less what differs between two identical requests (id, timing)."""
    return {k: v for k, v in answer.items() if k not in ("id", "links", "search")} | {
        "search": {k: v for k, v in answer["search"].items() if k != "elapsed_ms"}}


def test_gpus_and_models_json_are_the_services_answers(db_env: dict[str, str], client: TestClient) -> None:
    for command, path in (("gpus", "/v1/gpus"), ("models", "/v1/models")):
        r = invoke(db_env, command, "--json")
        assert r.exit_code == 0, r.stderr
        assert json.loads(r.stdout) == client.get(path).json()


def test_in_process_waits_for_start_up_whatever_the_servers_default(db_env: dict[str, str],
                                                                    client: TestClient) -> None:
    # the tests' environment asks for blocking start-up; a user's has no STARTUP_MODE, and a server's default
    # opens the port (here: the app) before the catalog is loaded
    r = invoke({**db_env, "STARTUP_MODE": None}, "models", "--json")  # type: ignore[dict-item]
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout) == client.get("/v1/models").json()


def test_gpus_table_has_a_row_per_gpu(db_env: dict[str, str], client: TestClient) -> None:
    r = invoke(db_env, "gpus")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["id", "name", "memory"]
    ids = [g["id"] for g in client.get("/v1/gpus").json()["items"]]
    assert [line.split()[0] for line in lines[2:]] == ids


def test_recommend_from_a_file_and_from_flags_ask_the_same(db_env: dict[str, str], client: TestClient,
                                                           tmp_path: Path) -> None:
    body_file = tmp_path / "chat.json"
    body_file.write_text(json.dumps(CHAT_8B))
    from_file = invoke(db_env, "recommend", str(body_file), "--json")
    from_flags = invoke(db_env, "recommend", *CHAT_8B_FLAGS, "--json")
    assert from_file.exit_code == 0 and from_flags.exit_code == 0, from_file.stderr + from_flags.stderr
    served = client.post("/v1/recommendations", json=CHAT_8B).json()
    a, b = json.loads(from_file.stdout), json.loads(from_flags.stdout)
    assert without_volatile(a) == without_volatile(b) == without_volatile(served)
    # the answer was stored by the app the command ran: the service returns it by its id
    assert client.get(f"/v1/recommendations/{a['id']}").json()["recommendations"] == a["recommendations"]


def test_recommend_table_lists_the_ranked_deployments(db_env: dict[str, str], client: TestClient) -> None:
    r = invoke(db_env, "recommend", *CHAT_8B_FLAGS)
    assert r.exit_code == 0, r.stderr
    recs = client.post("/v1/recommendations", json=CHAT_8B).json()["recommendations"]
    rows = [line.split() for line in r.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert [(int(row[0]), int(row[1]), row[4], row[5], row[6]) for row in rows] == [
        (x["rank"], x["deployment"]["gpu_count"], x["deployment"]["gpu"],
         f"{x['deployment']['weight_dtype']}/{x['deployment']['kv_dtype']}", x["deployment"]["engine"])
        for x in recs]
    assert f"#1 launch: {recs[0]['launch']['command']}" in r.stdout


def test_flags_override_the_file(db_env: dict[str, str], tmp_path: Path) -> None:
    body_file = tmp_path / "chat.json"
    body_file.write_text(json.dumps({**CHAT_8B, "workload": {**CHAT_8B["workload"], "concurrency": 50}}))
    r = invoke(db_env, "recommend", str(body_file), "--request-rate", "2", "--max-gpus", "1", "--json")
    assert r.exit_code == 0, r.stderr
    ans = json.loads(r.stdout)
    assert ans["applied"]["constraints"]["max_gpus"] == 1
    assert all(x["deployment"]["gpu_count"] == 1 for x in ans["recommendations"])


def test_predict_json_is_the_services_answer(db_env: dict[str, str], client: TestClient, tmp_path: Path) -> None:
    body_file = tmp_path / "predict.json"
    body_file.write_text(json.dumps(PREDICT_BODY))
    r = invoke(db_env, "predict", str(body_file), "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout) == client.post("/v1/predictions", json=PREDICT_BODY).json()
    table = invoke(db_env, "predict", str(body_file), "--concurrency", "16")
    expected = client.post("/v1/predictions", json={**PREDICT_BODY, "workload": {
        **PREDICT_BODY["workload"], "concurrency": 16}}).json()
    assert table.exit_code == 0, table.stderr
    figures = dict(line.split()[:2] for line in table.stdout.splitlines()[3:12] if len(line.split()) == 2)
    assert float(figures["output_tok_s"]) == pytest.approx(expected["predicted"]["output_tok_s"], abs=0.01)
    mem = expected["memory_per_gpu_gb"]
    assert f"memory per GPU, GB: weights {mem['weights']}, kv_cache {mem['kv_cache']}" in table.stdout
    assert "kv_bytes_per_token" not in table.stdout              # not a GB figure


def test_service_errors_exit_1_with_the_problem_on_stderr(db_env: dict[str, str]) -> None:
    r = invoke(db_env, "recommend", *CHAT_8B_FLAGS, "--model", "no-such/model")
    assert r.exit_code == 1 and r.stdout == ""
    assert "HTTP 422 Unknown model" in r.stderr and "field: model" in r.stderr
    r = invoke(db_env, "predict", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "l4",
               "--input-tokens", "10", "--output-tokens", "10")
    assert r.exit_code == 1 and "give exactly one of concurrency" in r.stderr
    r = invoke(db_env, "recommend", *CHAT_8B_FLAGS, "--gpus", "h100-sxn")
    assert r.exit_code == 1 and "field: constraints.gpus.0" in r.stderr
    assert r.stderr.count("h100-sxm") == 1                      # the valid ids once, not again after the detail


def test_usage_errors_exit_2(db_env: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = invoke(db_env, "recommend", str(bad))
    assert r.exit_code == 2 and "not JSON" in r.stderr
    assert invoke(db_env, "recommend", "--scenario", "nightly").exit_code == 2


def test_pareto_picture_is_written_as_the_service_draws_it(db_env: dict[str, str], client: TestClient,
                                                           tmp_path: Path) -> None:
    out = tmp_path / "front.svg"
    r = invoke(db_env, "recommend", *CHAT_8B_FLAGS, "--json", "--pareto", str(out))
    assert r.exit_code == 0, r.stderr
    ans = json.loads(r.stdout)
    assert out.read_text() == client.get(ans["links"]["pareto_svg"]).text
    labels = [t for t in ET.parse(out).iter("{http://www.w3.org/2000/svg}text") if t.get("class") == "label"]
    assert len(labels) == 2 * len(ans["recommendations"])          # one per recommendation in each panel


# --- a real server and the command as a subprocess -------------------------------------------------------------


def command(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service.cli", *args], capture_output=True, text=True,
                          timeout=SERVER_START_S, env={**os.environ, **(env or {})}, check=False)




@pytest.fixture(scope="module")
def served(db_env: dict[str, str]) -> Iterator[str]:
    """``llm-deploy-advisor serve`` on the API tests' database; its URL once it is ready."""
    port = free_port(range(FIRST_PORT, FIRST_PORT + 100))
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(port),
                             "--log-level", "warning"], env={**os.environ, **db_env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            raise RuntimeError(f"serve did not become ready: {proc.stderr.read() if proc.stderr else ''}")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_commands_against_a_served_url(served: str, client: TestClient) -> None:
    r = command("models", "--json", "--url", served)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == client.get("/v1/models").json()
    r = command("recommend", *CHAT_8B_FLAGS, "--json", "--url", served)
    assert r.returncode == 0, r.stderr
    assert without_volatile(json.loads(r.stdout)) == without_volatile(
        client.post("/v1/recommendations", json=CHAT_8B).json())


def test_url_errors_exit_1_with_the_detail(served: str) -> None:
    r = command("recommend", *CHAT_8B_FLAGS, "--top-k", "0", "--url", served)
    assert r.returncode == 1 and r.stdout == ""
    assert "HTTP 422" in r.stderr and "top_k" in r.stderr
    closed = free_port(range(FIRST_PORT, FIRST_PORT + 100))
    r = command("gpus", "--url", f"http://127.0.0.1:{closed}")
    assert r.returncode == 1 and "cannot reach" in r.stderr


def test_batch_job_flags_and_table(db_env: dict[str, str], client: TestClient) -> None:
    flags = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--scenario", "batch", "--input-tokens", "1024",
             "--output-tokens", "256", "--offline", "--num-requests", "10000000", "--deadline-hours", "24"]
    r = invoke(db_env, "recommend", *flags)
    assert r.exit_code == 0, r.stderr
    ans = client.post("/v1/recommendations", json={
        "model": "meta-llama/Llama-3.1-8B-Instruct", "scenario": "batch", "sla": {"deadline_hours": 24},
        "workload": {"input_tokens": 1024, "output_tokens": 256, "offline": True, "num_requests": 10**7}}).json()
    s = ans["batch_job"]["smallest"]
    assert "batch job: 10,000,000 requests, 2,560,000,000 output tokens, deadline 24.0 h" in r.stdout
    assert f"smallest deployment meeting the deadline: {s['gpu_count']} GPU(s)" in r.stdout
    assert f"{s['job']['hours']:.2f} h" in r.stdout


def test_body_from_stdin(db_env: dict[str, str], client: TestClient) -> None:
    r = CliRunner().invoke(cli, ["recommend", "-", "--json"], input=json.dumps(CHAT_8B), env=db_env)
    assert r.exit_code == 0, r.stderr
    assert without_volatile(json.loads(r.stdout)) == without_volatile(
        client.post("/v1/recommendations", json=CHAT_8B).json())
