"""JSON columns through the real migrations, on SQLite and PostgreSQL."""

from __future__ import annotations

import json

from sqlalchemy import Engine, text

from service.db import migrate
from service.db.models import RecommendationRecord
from service.db.session import JSONText, make_sessionmaker, transaction


def test_json_text_is_stored_as_the_document_it_encodes(engine: Engine) -> None:
    # the recommendation endpoint stores its answer's JSON text as encoded for the response (JSONText); it
    # must read back as the document, as a dict written by the same column does, not as a JSON string
    migrate.upgrade(engine)
    sessions = make_sessionmaker(engine)
    doc = {"feasible": True, "ttft_ms": 12.5, "notes": ["a", "b"], "nested": {"k": None}}
    with transaction(sessions) as session:
        session.add(RecommendationRecord(id="as-text", request={}, response=JSONText(json.dumps(doc))))
        session.add(RecommendationRecord(id="as-dict", request={}, response=doc))
    with transaction(sessions) as session:
        assert session.get(RecommendationRecord, "as-text").response == doc      # type: ignore[union-attr]
        assert session.get(RecommendationRecord, "as-dict").response == doc      # type: ignore[union-attr]
    with engine.connect() as conn:       # the column holds the document itself, not a quoted string
        raw = conn.execute(text("SELECT response FROM recommendation_requests WHERE id = 'as-text'")).scalar_one()
    assert (json.loads(raw) if isinstance(raw, str) else raw) == doc
