"""The FastAPI application: ``create_app()`` wires state, auth, routes, errors and metrics."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from pgcite import __version__
from pgcite._client import Client
from pgcite.config import Settings
from pgcite.embed._registry import embedder_for_key
from pgcite.service import _admin, _documents, _routes
from pgcite.service._errors import install_error_handlers
from pgcite.service._state import ServiceConfig, ServiceState
from pgcite.store._collections import list_collections
from pgcite.store._snapshots import active_snapshot

_log = logging.getLogger("pgcite.service")


def _warm_up(state: ServiceState) -> None:
    """Load every live snapshot's embedder and read role now, not on the first request."""
    with state.client.connection() as conn:
        infos = list_collections(conn)
        live = [(info, active_snapshot(conn, info)) for info in infos]
    for info, snap in live:
        state.reader(info)
        if snap is not None:
            try:
                embedder_for_key(snap.embed_model, state.client.settings)
            except Exception as exc:  # a broken model must not stop the other collections
                _log.warning("cannot load %s for %s: %s", snap.embed_model, info.name, exc)


def _route_template(request: Request) -> str:
    route = request.scope.get("route")
    return getattr(route, "path", "unmatched")


def create_app(
    settings: Settings | None = None,
    *,
    config: ServiceConfig | None = None,
    client: Client | None = None,
) -> FastAPI:
    """The HTTP service. Pass ``client`` to share an open one (it is then not closed)."""
    config = config or ServiceConfig()
    state = ServiceState(client=client or Client(settings), config=config,
                         owns_client=client is None)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if config.warm_up:
            _warm_up(state)
        yield
        if state.owns_client:
            state.client.close()

    app = FastAPI(title="pgcite", version=__version__, lifespan=lifespan,
                  description="Grounded retrieval and answers with checked citations.")
    app.state.pgcite = state
    install_error_handlers(app)
    app.include_router(_routes.router)
    app.include_router(_admin.router)
    app.include_router(_documents.router)
    app.include_router(_routes.ops)

    @app.middleware("http")
    async def observe(request: Request,
                      call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if _too_large(request, config):
            return JSONResponse({"detail": f"upload larger than {config.max_upload_bytes} "
                                 "bytes"}, status_code=413)
        started = time.perf_counter()
        response = await call_next(request)
        state.metrics.observe_request(request.method, _route_template(request),
                                      response.status_code, time.perf_counter() - started)
        return response

    return app


def _too_large(request: Request, config: ServiceConfig) -> bool:
    """Refuse an oversized body before reading it (when the client says its size)."""
    length = request.headers.get("content-length", "")
    slack = 1 << 20  # multipart framing and form fields
    return length.isdigit() and int(length) > config.max_upload_bytes + slack
