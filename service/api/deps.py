"""Request dependencies: the one transaction per request (its only owner), the app state, and the keys."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from service.api.problems import ProblemError
from service.db.session import finish
from service.state import AppState


# Dependencies that neither block nor wait are coroutines: FastAPI runs a plain function dependency in a worker
# thread, and each hop there and back adds to every request's latency.
async def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.app_state
    return state


StateDep = Annotated[AppState, Depends(get_state)]


async def get_session(state: StateDep) -> AsyncIterator[Session]:
    """The request's one transaction: committed when the route returns, before the answer is sent (scope
    "function" below), and rolled back when it raises. Ending it is database work, done in a worker thread;
    a route that never touched the database costs no thread hop."""
    session = state.sessions()
    try:
        yield session
    except BaseException:
        await _end(session, ok=False)
        raise
    await _end(session, ok=True)


async def _end(session: Session, ok: bool) -> None:
    if session.in_transaction() or session.info:
        await run_in_threadpool(finish, session, ok)
    else:
        session.close()


SessionDep = Annotated[Session, Depends(get_session, scope="function")]

# Two names for the one Bearer header, so that the OpenAPI document can tell the operations that need a write key
# from those that need a read key only when one is set (service/api/openapi.py).
WRITE_SCHEME = "WriteKey"
READ_SCHEME = "ReadKey"
_write_bearer = HTTPBearer(auto_error=False, scheme_name=WRITE_SCHEME,
                           description="a key from ADVISOR_API_KEY (writes are disabled when it is unset)")
_read_bearer = HTTPBearer(auto_error=False, scheme_name=READ_SCHEME,
                          description="when the operator sets ADVISOR_READ_KEY: one of its keys, or a write key")
WriteBearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_write_bearer)]
ReadBearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_read_bearer)]


def _matches(given: str, keys: list[str]) -> bool:
    # Compare with every key, in constant time, so timing tells nothing about which one nearly matched.
    ok = False
    for key in keys:
        ok |= hmac.compare_digest(given.encode(), key.encode())
    return ok


async def require_write_key(state: StateDep, creds: WriteBearerDep) -> str:
    keys = state.settings.write_keys()
    if not keys:        # no key would be accepted: say so rather than ask for one
        raise ProblemError(403, "Forbidden", "writes are disabled: the operator set no ADVISOR_API_KEY")
    if creds is None:
        raise ProblemError(401, "Unauthorized", "this endpoint needs 'Authorization: Bearer <key>'")
    if not _matches(creds.credentials, keys):
        raise ProblemError(403, "Forbidden", "the key is not valid for writes")
    # Who sent it, without storing the key: a short digest of it.
    return "key-" + hashlib.sha256(creds.credentials.encode()).hexdigest()[:12]


async def require_read_key(state: StateDep, creds: ReadBearerDep) -> None:
    read = state.settings.advisor_read_key
    if read is None:
        return
    keys = [k.strip() for k in read.get_secret_value().split(",") if k.strip()] + state.settings.write_keys()
    if creds is None:
        raise ProblemError(401, "Unauthorized", "reads need 'Authorization: Bearer <key>'")
    if not _matches(creds.credentials, keys):
        raise ProblemError(403, "Forbidden", "the key is not valid")


WriterDep = Annotated[str, Depends(require_write_key)]
