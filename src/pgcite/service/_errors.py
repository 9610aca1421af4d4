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

from pgcite._errors import (
    CollectionNotFound,
    ConfigError,
    DatabaseError,
    EmbedderError,
    FilterError,
    PgciteError,
)

_log = logging.getLogger("pgcite.service")
MAX_EXCERPT = 120  # characters of any client-supplied text an error body may carry
MAX_ERRORS = 10  # validation errors listed (the count says how many there were)


class ApiError(Exception):
    """An HTTP error raised on purpose."""

    def __init__(self, status: int, detail: str, *, hint: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.hint, self.headers = status, detail, hint, headers


def _status(exc: PgciteError) -> int:
    if isinstance(exc, CollectionNotFound):
        return 404
    if isinstance(exc, DatabaseError | EmbedderError):
        return 503  # the server's setup, not the request
    if isinstance(exc, FilterError | ConfigError):
        return 400
    return 400


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
    return JSONResponse(_body(exc.message, exc.hint), status_code=status)


def excerpt(text: object, limit: int = MAX_EXCERPT) -> str:
    """``text`` cut to ``limit`` characters, lone surrogates escaped: JSON can always carry it."""
    raw = str(text)
    cut = raw[:limit] + ("…" if len(raw) > limit else "")
    return cut.encode("utf-8", "backslashreplace").decode("utf-8")


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
