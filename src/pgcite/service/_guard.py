"""Bounds on a request before any route reads it, and so before its API key is checked.

FastAPI parses a body (JSON or multipart) before it resolves the dependencies that authenticate,
so without a bound here an unauthenticated chunked body (no Content-Length) was read whole into
memory: 500 MB sent cost 2.5 GB of RSS. This ASGI middleware

* gives every request a byte budget by what it may carry: the upload route its upload limit
  (plus multipart framing), every other route ``max_json_bytes``;
* refuses a declared ``Content-Length`` over the budget at once (413), and stops a chunked body
  the moment it passes the budget (413, raised from ``receive`` as an HTTPException, which
  FastAPI lets through its body parsing);
* with auth on, refuses a request that carries no credential at all (401) before reading any of
  its body; a wrong key is still found by the route, after a body that is at most the budget.
"""

from __future__ import annotations

import json
import re

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pgcite.service._auth import NO_KEY_HINT
from pgcite.service._state import ServiceConfig

_UPLOAD = re.compile(r"^/v1/collections/[^/]+/documents/?$")
_FRAMING = 1 << 20  # multipart boundaries, part headers and the small form fields
_CREDENTIALS = (b"authorization", b"x-api-key")


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body larger than {limit} bytes")


class RequestGuard:
    def __init__(self, app: ASGIApp, config: ServiceConfig) -> None:
        self.app = app
        self.config = config

    def limit(self, scope: Scope) -> int:
        if scope["method"] == "POST" and _UPLOAD.match(scope["path"]):
            return self.config.max_upload_bytes + _FRAMING
        return self.config.max_json_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        limit = self.limit(scope)
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await _refuse(send, 413, f"request body larger than {limit} bytes")
            return
        if (self.config.auth and scope["path"].startswith("/v1/")
                and not any(name in headers for name in _CREDENTIALS)):
            await _refuse(send, 401, "an API key is required", hint=NO_KEY_HINT,
                          headers={"WWW-Authenticate": "Bearer"})
            return
        received = 0

        async def bounded() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > limit:
                raise BodyTooLarge(limit)
            return message

        await self.app(scope, bounded, send)


async def _refuse(send: Send, status: int, detail: str, *, hint: str | None = None,
                  headers: dict[str, str] | None = None) -> None:
    body = json.dumps({"detail": detail, **({"hint": hint} if hint else {})}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
           (b"connection", b"close")]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
