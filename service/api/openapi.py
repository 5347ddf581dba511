"""The OpenAPI document as the service behaves: every error status an operation sends, documented as an RFC 9457
``application/problem+json`` body (in place of FastAPI's default 422 schema, which the service never sends); the
key requirement only on the operations that need a key; examples taken from real answers
(``openapi_examples.json``, written by ``benchmarks/openapi_examples.py``).
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

from fastapi import FastAPI

from service.api.deps import READ_SCHEME, WRITE_SCHEME
from service.api.problems import PROBLEM_JSON
from service.schemas.problems import Problem
from service.settings import Settings

EXAMPLES_FILE = "openapi_examples.json"
_REF = "#/components/schemas/{model}"

# What each error status means, as the handlers and dependencies send it (service/api/problems.py, deps.py,
# operations.py); an operation's own ``responses`` description wins.
_MEANING = {
    401: "no key sent: this operation needs 'Authorization: Bearer <key>'",
    403: "the key is not valid here",
    404: "no such item: the problem names the nearest known ids",
    413: "the body is larger than MAX_BODY_BYTES (with or without Content-Length)",
    415: "the body is not sent as application/json",
    422: "invalid request: `field` and `errors` name each wrong field, `valid` the valid choices; an empty or "
         "malformed body is named as such",
    503: "unavailable: the database cannot be reached, or the service is not ready yet; retry later "
         "(after Retry-After seconds when the answer gives it)",
}
_WRITE_403 = "the key is not valid for writes, or writes are disabled (the operator set no ADVISOR_API_KEY)"


def install(app: FastAPI, settings: Settings) -> None:
    """Rewrite the app's generated document once, on first request of /openapi.json."""
    generate = app.openapi
    examples = json.loads((files("service.api") / EXAMPLES_FILE).read_text(encoding="utf-8"))
    done: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        if not done:
            done.update(truthful(generate(), settings, examples))
        return done

    app.openapi = openapi  # type: ignore[method-assign]


def truthful(doc: dict[str, Any], settings: Settings, examples: dict[str, Any]) -> dict[str, Any]:
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    problem = Problem.model_json_schema(ref_template=_REF)
    schemas.update(problem.pop("$defs", {}))
    schemas["Problem"] = problem
    read_key = settings.advisor_read_key is not None
    for path, item in doc["paths"].items():
        for method, op in item.items():
            schemes = {name for requirement in op.get("security", []) for name in requirement}
            writes = WRITE_SCHEME in schemes
            if READ_SCHEME in schemes and not read_key:
                op.pop("security")              # reads need no key unless the operator set one: no padlock
            responses = op.setdefault("responses", {})
            statuses = _statuses(path, op)
            for unsent in [s for s in responses if s.isdigit() and int(s) >= 400 and int(s) not in statuses]:
                del responses[unsent]
            for status in sorted(statuses):
                meaning = _WRITE_403 if status == 403 and writes else _MEANING.get(status, "")
                _problem_response(responses.setdefault(str(status), {}), meaning, status, path,
                                  examples["problems"])
            _answer_example(responses, f"{method.upper()} {path}", examples["responses"])
    used = json.dumps(doc["paths"])
    for name in ("HTTPValidationError", "ValidationError"):
        if f"schemas/{name}\"" not in used:
            schemas.pop(name, None)
    if not read_key:
        components.get("securitySchemes", {}).pop(READ_SCHEME, None)
    return doc


def _statuses(path: str, op: dict[str, Any]) -> set[int]:
    given = {int(s) for s in op.get("responses", {}) if s.isdigit() and int(s) >= 400}
    if op.get("security"):
        given |= {401, 403}
    if "requestBody" in op:
        given |= {413, 415, 422}
    if "requestBody" not in op and all(_always_valid(p) for p in op.get("parameters", [])):
        given.discard(422)                  # FastAPI lists a 422 for any parameter, even one no value fails
    # every route with a path parameter looks an item up and answers 404 when there is none
    if any(p["in"] == "path" for p in op.get("parameters", [])):
        given.add(404)
    if path.startswith("/v1/") or path == "/readyz":
        given.add(503)                      # the database, reached by every /v1 route and by /readyz
    return given


def _always_valid(parameter: dict[str, Any]) -> bool:
    """A path segment taken as any string: no value of it fails validation (an unknown id is a 404)."""
    schema = parameter.get("schema", {})
    constraints = {"pattern", "minLength", "maxLength", "enum", "format"}
    return parameter["in"] == "path" and schema.get("type") == "string" and not constraints & set(schema)


def _problem_response(response: dict[str, Any], meaning: str, status: int, path: str,
                      problems: dict[str, list[dict[str, Any]]]) -> None:
    if not response.get("description") or response["description"] == "Validation Error":
        response["description"] = meaning
    media: dict[str, Any] = {"schema": {"$ref": "#/components/schemas/Problem"}}
    samples = problems.get(str(status), [])
    own = [s for s in samples if s["value"].get("instance") == path]
    chosen = own or samples
    if chosen:
        media["examples"] = {f"example{i + 1}": s for i, s in enumerate(chosen)}
    response["content"] = {PROBLEM_JSON: media}


def _answer_example(responses: dict[str, Any], key: str, answers: dict[str, Any]) -> None:
    sample = answers.get(key)
    if sample is None:
        return
    response = responses.get(str(sample["status"]))
    if response is None:
        return
    media_type = sample.get("media_type", "application/json")
    media = response.setdefault("content", {}).setdefault(media_type, {})
    media["examples"] = {"real": {"summary": sample["summary"], "value": sample["value"]}}
