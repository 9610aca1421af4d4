"""Errors as JSON ``{"detail": …, "hint": …}`` with the right status: a user's mistake is a 4xx
with a message saying what to fix, never a 500."""

from __future__ import annotations

import logging

import psycopg
from fastapi import FastAPI, Request
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


async def _database_gone(_: Request, exc: Exception) -> JSONResponse:
    """A connection lost mid-request (the server died or restarts), or none to be had: the
    service is unavailable for a moment, not broken."""
    _log.error("database unavailable: %s: %s", type(exc).__name__, exc)
    return JSONResponse(_body(f"database unavailable: {type(exc).__name__}",
                              "retry in a few seconds"), status_code=503)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(PgciteError, _pgcite_error)
    app.add_exception_handler(psycopg.OperationalError, _database_gone)
    app.add_exception_handler(PoolTimeout, _database_gone)
