"""Stored recommendations: the answer's JSON text is stored as it was sent and read back as a document."""

from __future__ import annotations

import json

from sqlalchemy import Engine

from service.db import migrate
from service.db.session import make_sessionmaker, transaction
from service.repository import recommendations as repo


def test_an_answer_is_read_back_as_it_was_stored(engine: Engine) -> None:
    migrate.upgrade(engine)
    sessions = make_sessionmaker(engine)
    answer = {"feasible": True, "recommendations": [{"rank": 1, "gpu": "l4"}]}
    with transaction(sessions) as session:
        repo.add(session, "11111111-2222-3333-4444-555555555555", {"model": "m"}, json.dumps(answer), 7)
    with transaction(sessions) as session:
        row = repo.by_id(session, "11111111-2222-3333-4444-555555555555")
        assert row is not None
        assert (row.request, row.response, row.calibration_version) == ({"model": "m"}, answer, 7)
        assert repo.by_id(session, "00000000-0000-0000-0000-000000000000") is None
