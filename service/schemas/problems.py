"""The body of every error answer: an RFC 9457 problem (``application/problem+json``), as service/api/problems.py
writes it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class FieldError(BaseModel):
    field: list[str | int] = Field(description="path of the field in the body (or `path`/`query` and the "
                                   "parameter's name); `[\"body\"]` when the body as a whole is wrong")
    message: str = Field(description="what is wrong with it")
    type: str = Field(description="pydantic's error type (missing, literal_error, less_than_equal, ...), or "
                      "empty_body / json_invalid")
    valid: Any | None = Field(default=None, description="the valid choices, where the field has a closed set")


class Problem(BaseModel):
    """RFC 9457 problem details, with the field that is wrong and the valid choices where they are known."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="always about:blank: the status and title say what happened")
    title: str = Field(description="short, the same for every occurrence of this kind of problem")
    status: int = Field(description="the HTTP status code, repeated")
    detail: str = Field(description="what is wrong in this request, and what would be accepted")
    instance: str = Field(description="the request path")
    field: list[str | int] | None = Field(default=None, description="path of the first field that is wrong")
    errors: list[FieldError] | None = Field(default=None, description="every field that is wrong (422)")
    valid: Any | None = Field(default=None, description="the valid choices (ids, values or media types)")
    nearest: list[str] | None = Field(default=None, description="unknown id: the known ids nearest to it")
    known: list[str] | None = Field(default=None, description="unknown id: every known id, when there are at most "
                                    "100")
    line: int | None = Field(default=None, description="malformed JSON: line of the error, counted from 1")
    column: int | None = Field(default=None, description="malformed JSON: column of the error, counted from 1")
