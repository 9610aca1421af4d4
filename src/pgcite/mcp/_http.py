"""The MCP server inside ``pgcite serve``: streamable HTTP at ``/mcp``, under the service's API
keys (``Authorization: Bearer pgc_…`` or ``X-API-Key``) and read-only collection roles.

A request without a valid key is refused with 401 before it reaches MCP; each tool call then
resolves its key again from its own request's headers, so a session cannot outlive or widen the
key it was opened with.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from pgcite.mcp._access import Access, open_access
from pgcite.mcp._server import build_server
from pgcite.service._keys import authenticate
from pgcite.service._state import ServiceState

PATH = "/mcp"


def _token(headers: Mapping[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return headers.get("x-api-key") or None


class _KeyGate:
    """ASGI: a 401 for a missing or unknown key, else the MCP session manager."""

    def __init__(self, state: ServiceState, inner: Any) -> None:
        self.state, self.inner = state, inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.state.config.auth and not await self._known(scope):
            body = json.dumps({"detail": "a valid API key is required for /mcp"}).encode()
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.inner(scope, receive, send)

    async def _known(self, scope: Scope) -> bool:
        from anyio import to_thread

        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        token = _token(headers)
        if token is None:
            return False

        def check() -> bool:
            with self.state.client.connection() as conn:
                return authenticate(conn, token) is not None
        return await to_thread.run_sync(check)


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
