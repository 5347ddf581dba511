"""The domain's error: a request the catalog or the engines cannot serve.

The routes turn it into a 422 problem naming the field; nothing below the routes knows of HTTP.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def nearest_known(value: str, known: Iterable[str]) -> list[str]:
    """Up to five known ids nearest to ``value`` (case-insensitive), nearest first."""
    known_list = sorted(set(known))
    by_lower = {k.lower(): k for k in known_list}
    nearest = difflib.get_close_matches(value.lower(), [k.lower() for k in known_list], n=5, cutoff=0.4)
    return [by_lower[n] for n in nearest]


def unknown_id_detail(kind: str, value: str, known: Iterable[str]) -> tuple[str, list[str]]:
    """What an unknown id's answer says: the message and the nearest known ids (all, when none is near, at most
    60 in the message)."""
    known_list = sorted(set(known))
    nearest_ids = nearest_known(value, known_list)
    hint = f"nearest known: {', '.join(nearest_ids)}" if nearest_ids else f"known: {', '.join(known_list[:60])}"
    return f"unknown {kind} '{value}'; {hint}", nearest_ids


class InvalidRequest(ValueError):
    """A request the catalog or the engines cannot serve: answered with 422 naming the field."""

    def __init__(self, field: list[str | int], message: str, title: str = "Deployment cannot run",
                 valid: list[str] | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.title = title
        self.valid = valid
