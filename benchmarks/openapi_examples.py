"""Write service/api/openapi_examples.json: the examples /docs shows, taken from real answers of the service.

    python benchmarks/openapi_examples.py            # rewrite the file
    python benchmarks/openapi_examples.py --check    # exit 1 if the file differs from what it would write

Starts the real app on a fresh SQLite file (migrations, catalog, shipped measurements, calibration), sends each
operation its documented request example (or a typical read), and keeps the answers; long lists and maps are cut
to their first few entries (the example's summary says so). Error examples are real answers to bad requests.
Rerun it when an answer's shape or the cost model changes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from service.main import create_app
from service.schemas.benchmarks import ROWS_EXAMPLE
from service.schemas.predictions import PredictionRequest
from service.schemas.recommendations import RecommendationRequest
from service.settings import Settings

OUT = Path(__file__).resolve().parent.parent / "service" / "api" / "openapi_examples.json"
KEY = "example-write-key"
# entries kept of each list and map of records below the top level of an answer
KEEP = 2
MAP_FIELDS_MAX = 4


def abridge(value: Any, depth: int = 0) -> tuple[Any, bool]:
    """The value with lists and maps below the top level cut to KEEP entries; whether anything was cut."""
    cut = False
    if isinstance(value, list):
        # lists of records (GPUs, segments, recommendations...) below the top level: their first few; lists of
        # scalars (a command's args, notes) whole
        records = depth >= 1 and all(isinstance(v, dict) for v in value)
        items = value[:KEEP] if records else value
        cut = len(items) < len(value)
        out = []
        for v in items:
            a, c = abridge(v, depth + 1)
            out.append(a)
            cut |= c
        return out, cut
    if isinstance(value, dict):
        result = {}
        entries = list(value.items())
        # a map of records below the top level (by GPU, by segment...): its first few records; a model's fields
        # are never all records past MAP_FIELDS_MAX (MetricErrors has three)
        if depth >= 2 and len(entries) > MAP_FIELDS_MAX and all(isinstance(v, dict) for _, v in entries):
            entries, cut = entries[:KEEP], True
        for k, v in entries:
            a, c = abridge(v, depth + 1)
            result[k] = a
            cut |= c
        return result, cut
    return value, False


def example(answer: Any, what: str, abridged_lists: bool = True) -> dict[str, Any]:
    value, cut = abridge(answer) if abridged_lists else (answer, False)
    summary = f"{what} (real answer{', lists cut to their first entries' if cut else ''})"
    return {"summary": summary, "value": value}


def first_request_example(model: type[Any]) -> dict[str, Any]:
    examples: list[dict[str, Any]] = model.model_config["json_schema_extra"]["examples"]
    return examples[0]


def collect(client: TestClient) -> dict[str, Any]:
    auth = {"Authorization": f"Bearer {KEY}"}
    ok: dict[str, dict[str, Any]] = {}

    def keep(op: str, r: Any, what: str, status: int = 200, abridged_lists: bool = True) -> Any:
        assert r.status_code == status, (op, r.status_code, r.text)
        ok[op] = {"status": status, **example(r.json(), what, abridged_lists)}
        return r.json()

    keep("GET /healthz", client.get("/healthz"), "alive")
    keep("GET /readyz", client.get("/readyz"), "ready")
    keep("GET /v1/gpus", client.get("/v1/gpus"), "the GPU catalog")
    keep("GET /v1/gpus/{gpu_id}", client.get("/v1/gpus/h100-sxm"), "GET /v1/gpus/h100-sxm")
    keep("GET /v1/models", client.get("/v1/models"), "the model catalog")
    keep("GET /v1/models/{model_id}", client.get("/v1/models/meta-llama/Llama-3.1-8B-Instruct"),
         "GET /v1/models/meta-llama/Llama-3.1-8B-Instruct")
    keep("GET /v1/quantizations", client.get("/v1/quantizations"), "dtypes and their support")
    prediction = first_request_example(PredictionRequest)
    keep("POST /v1/predictions", client.post("/v1/predictions", json=prediction),
         "the answer to the request example", abridged_lists=False)
    recommendation = first_request_example(RecommendationRequest)
    rec = keep("POST /v1/recommendations", client.post("/v1/recommendations", json=recommendation),
               "the answer to the request example")
    keep("GET /v1/recommendations/{rec_id}", client.get(f"/v1/recommendations/{rec['id']}"),
         "the stored answer to the request example of POST /v1/recommendations")
    svg = client.get(f"/v1/recommendations/{rec['id']}/pareto.svg")
    assert svg.status_code == 200, svg.text
    ok["GET /v1/recommendations/{rec_id}/pareto.svg"] = {
        "status": 200, "media_type": svg.headers["content-type"].split(";")[0],
        "summary": "the Pareto front of the answer to the request example of POST /v1/recommendations (real answer)",
        "value": svg.text}
    keep("GET /v1/benchmarks", client.get("/v1/benchmarks", params={"gpu": "h100-sxm", "limit": 2}),
         "GET /v1/benchmarks?gpu=h100-sxm&limit=2")
    keep("POST /v1/benchmarks", client.post("/v1/benchmarks", json=ROWS_EXAMPLE, headers=auth),
         "the answer to the rows example", status=201)
    keep("GET /v1/calibration", client.get("/v1/calibration"), "the calibration after that ingest")
    keep("GET /v1/calibration/{version}", client.get("/v1/calibration/1"), "GET /v1/calibration/1")

    problems: dict[str, list[dict[str, Any]]] = {}

    def problem(r: Any, what: str) -> None:
        assert r.headers["content-type"] == "application/problem+json", r.text
        problems.setdefault(str(r.status_code), []).append({"summary": what, "value": r.json()})

    def predict_with(**deployment: Any) -> Any:
        return client.post("/v1/predictions", json={**prediction, "deployment": {**prediction["deployment"],
                                                                                  **deployment}})

    problem(predict_with(gpu="h100-sx"), "an unknown GPU id")
    problem(predict_with(engine="sglang"), "a value outside its choices")
    problem(predict_with(tp=3, gpu_count=3), "a layout the model cannot take")
    problem(client.post("/v1/predictions", content=b'{"model": "meta-llama/Llama-3.1-8B",}',
                        headers={"Content-Type": "application/json"}), "malformed JSON")
    problem(client.post("/v1/predictions", headers={"Content-Type": "application/json"}), "an empty body")
    problem(client.get("/v1/gpus/h100"), "GET /v1/gpus/h100: no such GPU")
    problem(client.post("/v1/benchmarks", json=ROWS_EXAMPLE), "a write without a key")
    problem(client.post("/v1/benchmarks", json=ROWS_EXAMPLE, headers={"Authorization": "Bearer wrong"}),
            "a write with a key that is not valid")
    conflicting = {"format": "rows", "rows": [{**ROWS_EXAMPLE["rows"][0], "output_tok_s": 1300.0}]}
    problem(client.post("/v1/benchmarks", json=conflicting, headers=auth),
            "a row_id stored before with other content")
    problem(client.post("/v1/predictions", content=b"{" + b" " * (9 << 20) + b"}",
                        headers={"Content-Type": "application/json"}), "a body over MAX_BODY_BYTES")
    problem(client.post("/v1/predictions", content=json.dumps(prediction).encode(),
                        headers={"Content-Type": "application/x-www-form-urlencoded"}),
            "JSON sent as a form (curl -d without -H 'Content-Type: application/json')")
    return {"responses": ok, "problems": dict(sorted(problems.items()))}


def generate() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        settings = Settings(database_url=f"sqlite:///{d}/examples.db", advisor_api_key=KEY, calibration_cv="off",
                            startup_mode="blocking", log_level="WARNING")
        with TestClient(create_app(settings)) as client:
            doc = collect(client)
            doc["problems"]["503"] = [database_gone(client, Path(d) / "examples.db")]
            return doc


def database_gone(client: TestClient, db: Path) -> dict[str, Any]:
    """The answer of a read that needs the database while the database is gone: its file moved away under the
    running service (a new connection then opens an empty database, with none of the tables)."""
    client.app.state.app_state.engine.dispose()          # type: ignore[attr-defined]
    for f in db.parent.glob(db.name + "*"):            # the database and its -wal, -shm
        f.rename(f.with_name("moved-" + f.name))
    r = client.get("/v1/benchmarks", params={"limit": 1})
    assert r.status_code == 503 and r.headers["content-type"] == "application/problem+json", r.text
    return {"summary": "the database cannot be reached", "value": r.json()}


VOLATILE_KEYS = {"id", "created_at", "elapsed_ms", "fit_s", "elapsed_s", "ingest_id", "measurement_ids", "instance"}


# an answer's id inside text: its links and the Pareto picture's caption name it
ANSWER_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def volatile(v: Any) -> Any:
    """The document without what differs from run to run (ids, times, elapsed)."""
    if isinstance(v, dict):
        return {k: volatile(x) for k, x in v.items() if k not in VOLATILE_KEYS}
    if isinstance(v, list):
        return [volatile(x) for x in v]
    if isinstance(v, str):
        return ANSWER_ID.sub("<id>", v)
    return v


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the stored file instead of writing")
    args = parser.parse_args()
    doc = generate()
    if args.check:
        stored = json.loads(OUT.read_text())
        same = volatile(stored) == volatile(doc)
        print(f"{OUT.name}: {'up to date' if same else 'differs from the answers the service gives now'}")
        return 0 if same else 1
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes): {len(doc['responses'])} answers, "
          f"{len(doc['problems'])} problems ({', '.join(doc['problems'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
