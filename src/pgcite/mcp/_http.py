"""The MCP server inside ``pgcite serve``: streamable HTTP at ``/mcp``, under the service's API
keys (``Authorization: Bearer pgc_…`` or ``X-API-Key``) and read-only collection roles.

A request without a valid key is refused with 401 before it reaches MCP; each tool call then
resolves its key again from its own request's headers, so a session cannot outlive or widen the
key it was opened with; an open GET stream checks its key again every few seconds and ends once
it is revoked.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import FastAPI
from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from pgcite.mcp._access import Access, open_access
from pgcite.mcp._server import build_server
from pgcite.service import ServiceState, aauthenticate

PATH = "/mcp"


def _token(headers: Mapping[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return headers.get("x-api-key") or None


class _KeyGate:
    """ASGI: a 401 for a missing or unknown key, else the MCP session manager. A GET opens a
    stream that may stay open for hours (server-to-client messages): its key is checked again
    every ``key_recheck_s`` seconds, and the stream ends once the key is revoked."""

    def __init__(self, state: ServiceState, inner: Any) -> None:
        self.state, self.inner = state, inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.state.config.auth:
            await self.inner(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        token = _token(headers)
        if token is None or not await self._known(token):
            await _unauthorized(send)
        elif scope.get("method") == "GET":
            await self._watched(scope, receive, send, token)
        else:
            await self.inner(scope, receive, send)

    async def _known(self, token: str) -> bool:
        async with (await self.state.async_client()).connection() as conn:
            return await aauthenticate(conn, token) is not None

    async def _watched(self, scope: Scope, receive: Receive, send: Send, token: str) -> None:
        started = revoked = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        async with anyio.create_task_group() as group:
            async def watch() -> None:
                nonlocal revoked
                while not revoked:
                    await anyio.sleep(self.state.config.key_recheck_s)
                    revoked = not await self._known(token)
                group.cancel_scope.cancel()  # ends the stream below

            group.start_soon(watch)
            await self.inner(scope, receive, sending)
            group.cancel_scope.cancel()  # the stream ended by itself: stop watching
        if not revoked:
            return
        if started:  # end the chunked response cleanly: the client sees the stream close
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            await _unauthorized(send)


async def _unauthorized(send: Send) -> None:
    body = json.dumps({"detail": "a valid API key is required for /mcp"}).encode()
    await send({"type": "http.response.start", "status": 401, "headers": [
        (b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
    await send({"type": "http.response.body", "body": body})


def mount_mcp(app: FastAPI) -> None:
    """Serve MCP at ``/mcp`` of a ``create_app()`` application, and run its session manager
    with the application's lifespan."""
    state: ServiceState = app.state.pgcite

    def resolve(ctx: Context) -> Access:
        token = _token({k.lower(): v for k, v in (ctx.headers or {}).items()})
        return open_access(state.client, token if state.config.auth else None, state.reader)

    server = build_server(resolve, generator=state.generator,
                          threshold=state.config.threshold)
    # With keys required, a key is the protection; with auth off (loopback only) the SDK's
    # DNS-rebinding check keeps web pages from reaching the local server through a hostname.
    security = (TransportSecuritySettings(enable_dns_rebinding_protection=False)
                if state.config.auth else None)
    # Stateless, JSON responses: every POST stands alone, so each carries (and is checked
    # against) its own key, and nothing is held per session between requests.
    server.streamable_http_app(streamable_http_path=PATH, stateless_http=True,
                               json_response=True, transport_security=security)
    manager = server.session_manager
    app.router.routes.append(Route(PATH, endpoint=_KeyGate(state, manager.handle_request),
                                   methods=["GET", "POST", "DELETE"]))
    outer = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(application: Any) -> AsyncIterator[Any]:
        async with outer(application) as value, manager.run():
            yield value
    app.router.lifespan_context = lifespan
