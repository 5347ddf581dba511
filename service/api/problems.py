"""RFC 9457 problem details for every error the API returns."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.errors import unknown_id_detail

log = logging.getLogger(__name__)
PROBLEM_JSON = "application/problem+json"


class ProblemError(Exception):
    """Raise from anywhere below a route to answer with a problem body."""

    def __init__(self, status: int, title: str, detail: str, *, field: Sequence[str | int] | None = None,
                 errors: list[dict[str, Any]] | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.field = list(field) if field else None
        self.errors = errors
        self.extra = extra


def unknown_id(kind: str, value: str, known: Iterable[str], field: Sequence[str | int],
               status: int = 422) -> ProblemError:
    known_list = sorted(set(known))
    detail, nearest_ids = unknown_id_detail(kind, value, known_list)
    return ProblemError(status, f"Unknown {kind}", detail, field=field,
                        nearest=nearest_ids, known=known_list if len(known_list) <= 100 else None)


JSON_MEDIA_TYPE = "application/json"


def empty_body() -> ProblemError:
    return ProblemError(422, "Empty body", "the request body is empty: send a JSON object "
                        f"(Content-Type: {JSON_MEDIA_TYPE}); /docs shows an example for each endpoint",
                        field=["body"], errors=[{"field": ["body"], "message": "empty", "type": "empty_body"}])


def invalid_json(reason: str, doc: str | bytes, pos: int) -> ProblemError:
    """A body that does not parse: where (line and column, counted from 1) and why, as json.loads says."""
    text = doc.decode("utf-8", "replace") if isinstance(doc, bytes) else doc
    line = text.count("\n", 0, pos) + 1
    column = pos - text.rfind("\n", 0, pos)
    message = f"{reason} at line {line}, column {column}"
    return ProblemError(422, "Malformed JSON", f"the body is not valid JSON: {message}", field=["body"],
                        errors=[{"field": ["body"], "message": message, "type": "json_invalid"}],
                        line=line, column=column)


def not_json_text(exc: ValueError) -> ProblemError:
    """Bytes that json.loads cannot even decode as text (not UTF-8, -16 or -32)."""
    return ProblemError(422, "Malformed JSON", f"the body is not valid JSON: it is not UTF-8 text ({exc})",
                        field=["body"], errors=[{"field": ["body"], "message": str(exc), "type": "json_invalid"}])


def unsupported_media_type(content_type: str, valid: Sequence[str] = (JSON_MEDIA_TYPE,)) -> ProblemError:
    media = content_type.split(";")[0].strip().lower()
    given = f"not {media}" if media else "and this request names none"
    return ProblemError(415, "Unsupported media type",
                        f"send the body as {' or '.join(valid)} (Content-Type header), {given}", valid=list(valid))


def _whole_body_problem(exc: RequestValidationError, content_type: str) -> ProblemError | None:
    """The body as a whole is wrong (empty, not JSON, or sent as another media type): one problem that says so,
    instead of pydantic's "Field required" or "valid dictionary" at an empty field path."""
    for e in exc.errors():
        loc = tuple(e.get("loc", ()))
        if e.get("type") == "json_invalid" and loc[:1] == ("body",):
            if isinstance(exc.body, str | bytes) and not exc.body.strip():
                return empty_body()
            pos = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else 0
            return invalid_json(str((e.get("ctx") or {}).get("error", "JSON decode error")), exc.body or "", pos)
        if loc == ("body",) and e.get("type") == "missing":
            return empty_body()
        # FastAPI parses JSON only when the Content-Type names it; otherwise the route receives the raw bytes
        if loc == ("body",) and isinstance(e.get("input"), bytes | bytearray):
            return unsupported_media_type(content_type)
    return None


def _problem(status: int, title: str, detail: str, instance: str, **extra: Any) -> JSONResponse:
    body: dict[str, Any] = {"type": "about:blank", "title": title, "status": status, "detail": detail,
                            "instance": instance}
    body.update({k: v for k, v in extra.items() if v is not None})
    return JSONResponse(jsonable_encoder(body), status_code=status, media_type=PROBLEM_JSON)


def _answer(request: Request, exc: ProblemError) -> JSONResponse:
    response = _problem(exc.status, exc.title, exc.detail, request.url.path, field=exc.field, errors=exc.errors,
                        **exc.extra)
    if exc.status == 401:       # RFC 9110 section 15.5.2: a 401 names the scheme to authenticate with
        response.headers["WWW-Authenticate"] = "Bearer"
    return response


def _valid(err: dict[str, Any]) -> Any:
    """The valid choices pydantic names: ``expected`` of a literal, ``expected_tags`` of a tagged union."""
    ctx = err.get("ctx") or {}
    return ctx.get("expected", ctx.get("expected_tags"))


def _describe(err: dict[str, Any]) -> str:
    loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
    msg = err.get("msg", "invalid")
    ctx = err.get("ctx") or {}
    if "expected" in ctx:
        msg = f"{msg} (valid: {ctx['expected']})"
    return f"{loc}: {msg}" if loc else msg


def install(app: FastAPI) -> None:
    @app.exception_handler(ProblemError)
    async def _problem_error(request: Request, exc: ProblemError) -> JSONResponse:
        return _answer(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        whole = _whole_body_problem(exc, request.headers.get("content-type", ""))
        if whole is not None:
            return _answer(request, whole)
        errors = [
            {"field": [p for p in e.get("loc", ()) if p != "body"], "message": e.get("msg"),
             "type": e.get("type"), **({"valid": _valid(e)} if _valid(e) is not None else {})}
            for e in exc.errors()
        ]
        detail = "; ".join(_describe(e) for e in exc.errors()[:5])
        first = errors[0]["field"] if errors else None
        return _problem(422, "Invalid request", detail, request.url.path, field=first, errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # FastAPI's body reader answers 400 for any error but a JSONDecodeError; bytes that are not text are one
        if exc.status_code == 400 and isinstance(exc.__cause__, ValueError):
            return _answer(request, not_json_text(exc.__cause__))
        title = {404: "Not found", 405: "Method not allowed", 401: "Unauthorized", 403: "Forbidden",
                 413: "Request body too large"}.get(exc.status_code, "Error")
        return _problem(exc.status_code, title, str(exc.detail), request.url.path)

    @app.exception_handler(OperationalError)
    async def _db_down(request: Request, exc: OperationalError) -> JSONResponse:
        log.warning("database unavailable: %s", exc.orig)
        return _problem(503, "Database unavailable", "the database cannot be reached; retry later",
                        request.url.path)
