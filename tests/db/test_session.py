"""The transaction boundary: what a failed transaction leaves (nothing), and when after-commit actions run."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from service.db import migrate
from service.db.session import after_commit, make_sessionmaker, transaction
from service.repository import recommendations as repo


class Boom(RuntimeError):
    pass


def test_a_committed_transaction_stores_its_rows_then_runs_its_actions(engine: Engine) -> None:
    migrate.upgrade(engine)
    sessions = make_sessionmaker(engine)
    seen: list[bool] = []

    def stored_when_run() -> None:
        with transaction(sessions) as other:          # another session sees the row: it is committed
            seen.append(repo.by_id(other, "a") is not None)

    with transaction(sessions) as session:
        repo.add(session, "a", {"asked": 1}, '{"answered": 1}', None)
        after_commit(session, stored_when_run)
        assert seen == []
    assert seen == [True]
    with transaction(sessions) as session:
        row = repo.by_id(session, "a")
        assert row is not None and row.response == {"answered": 1}


def test_a_failed_transaction_stores_nothing_and_runs_no_action(engine: Engine) -> None:
    migrate.upgrade(engine)
    sessions = make_sessionmaker(engine)
    ran: list[str] = []
    with pytest.raises(Boom), transaction(sessions) as session:
        repo.add(session, "b", {}, "{}", None)
        session.flush()                                # written to the database, not yet committed
        after_commit(session, lambda: ran.append("b"))
        raise Boom
    assert ran == []
    with transaction(sessions) as session:
        assert repo.by_id(session, "b") is None
