"""Errors as JSON ``{"detail": …, "hint": …}`` with the right status: a user's mistake is a 4xx
with a message saying what to fix, never a 500.

An error body never echoes the request: a validation error names the field and the rule, and
every string that came from the client (a location, a message built from it) is cut to a short
excerpt, lone surrogates escaped. Echoing inputs is how a 5 MB query became a 5 MB response, and how a NaN or a
lone surrogate in a body turned a 422 into a 500 (neither can be written as JSON).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from psycopg_pool import PoolTimeout

from pgcite import (
    AccessDenied,
    CollectionNotFound,
    DatabaseError,
    EmbedderError,
    InvalidInput,
    PgciteError,
    SnapshotNotFound,
    TimeBudgetExceeded,
)
from pgcite._inputs import excerpt

_log = logging.getLogger("pgcite.service")
MAX_ERRORS = 10  # validation errors listed (the count says how many there were)
MAX_MESSAGE = 500  # characters of a PgciteError's message in a body (it may quote input)


class ApiError(Exception):
    """An HTTP error raised on purpose."""

    def __init__(self, status: int, detail: str, *, hint: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.hint, self.headers = status, detail, hint, headers


def _status(exc: PgciteError) -> int:
    if isinstance(exc, CollectionNotFound | SnapshotNotFound):
        return 404
    if isinstance(exc, AccessDenied):
        return 403
    if isinstance(exc, TimeBudgetExceeded) or getattr(exc, "kind", None) == "too_large":
        return 413  # more work than the request may cost (a scan over an OCR limit)
    if isinstance(exc, InvalidInput):
        return 422  # as pydantic's request validation: malformed whatever the collection
    if isinstance(exc, DatabaseError | EmbedderError):
        return 503  # the server's setup, not the request
    return 400  # a filter or option this collection cannot apply, a bad setting


def _body(detail: str, hint: str | None) -> dict[str, str]:
    return {"detail": detail, **({"hint": hint} if hint else {})}


async def _api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return JSONResponse(_body(exc.detail, exc.hint), status_code=exc.status, headers=exc.headers)


async def _pgcite_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, PgciteError)
    status = _status(exc)
    if status >= 500:
        _log.error("service unavailable: %s", exc)
    # a message may quote the request (a filter value): cut, and always writable as JSON
    return JSONResponse(_body(excerpt(exc.message, MAX_MESSAGE),
                              excerpt(exc.hint, MAX_MESSAGE) if exc.hint else None),
                        status_code=status)


def _location(loc: Sequence[Any]) -> list[str | int]:
    return [part if isinstance(part, int) else excerpt(part, 40) for part in loc]


def _message(error: dict[str, Any]) -> str:
    """pydantic's message, without objects: a rule given as a callable (functools.partial of a
    validator) prints its repr, so a message with one is replaced by the error type."""
    msg = str(error.get("msg", ""))
    if "<function" in msg or "functools.partial" in msg:
        msg = str(error.get("type", "invalid value")).replace("_", " ")
    return excerpt(msg)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    shown = [{"loc": _location(e.get("loc", ())), "msg": _message(e), "type": excerpt(
        e.get("type", ""), 40)} for e in errors[:MAX_ERRORS]]
    first = shown[0] if shown else {"loc": [], "msg": "invalid request"}
    where = ".".join(str(p) for p in first["loc"] if p != "body") or "body"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return JSONResponse({"detail": f"invalid request: {where}: {first['msg']}{more}",
                         "errors": shown}, status_code=422)


async def _database_down(_: Request, exc: Exception) -> JSONResponse:
    """The database went away under a request (a killed backend or server, a full pool): the
    server's state, not the request's fault, and worth a retry."""
    _log.error("database unavailable: %s", type(exc).__name__)
    return JSONResponse(_body("database unavailable", "retry in a few seconds"),
                        status_code=503, headers={"Retry-After": "2"})


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    """The last resort: a bug. Logged with its traceback; the client learns nothing of it."""
    _log.error("unhandled error", exc_info=exc)
    return JSONResponse(_body("internal error", "the server log has the details"),
                        status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(PgciteError, _pgcite_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    for error in (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout):
        app.add_exception_handler(error, _database_down)
    app.add_exception_handler(Exception, _unexpected)
