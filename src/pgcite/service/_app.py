"""The FastAPI application: ``create_app()`` wires state, auth, routes, errors and metrics."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pgcite import Client, DatabaseError, __version__
from pgcite.config import Settings
from pgcite.embed import embedder_for_key
from pgcite.llm import with_llm
from pgcite.service import _admin, _documents, _exhibits, _routes
from pgcite.service._errors import install_error_handlers
from pgcite.service._guard import RequestGuard
from pgcite.service._metrics import Metrics
from pgcite.service._state import ServiceConfig, ServiceState
from pgcite.service._upload import remove_stale_folders
from pgcite.service._visitor import no_visitors
from pgcite.store import active_snapshot, list_collections

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


async def _watch_database(client: Client, every_s: float) -> None:
    """Look at the embedded server every ``every_s`` seconds: a dead postmaster is restarted
    (in the background) whether or not any request comes (a look is one read of /proc)."""
    while True:
        await asyncio.sleep(every_s)
        with contextlib.suppress(DatabaseError):  # its restart is under way (503s till then)
            client.db.check_alive()


def create_app(
    settings: Settings | None = None,
    *,
    config: ServiceConfig | None = None,
    client: Client | None = None,
) -> FastAPI:
    """The HTTP service. Pass ``client`` to share an open one (it is then not closed)."""
    config = config or ServiceConfig()
    if client is None:  # the generator's model is the client's one LLM (docs/configuration.md)
        client = Client(with_llm(settings or Settings(), config.generator.llm()))
        owns = True
    else:
        owns = False
    state = ServiceState(client=client, config=config, owns_client=owns)
    if client.replicas:
        state.metrics.watch_replicas(client.replica_lag, lambda: dict(client.replicas.served))

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        remove_stale_folders()  # uploads of a service killed mid-way
        if config.warm_up:
            _warm_up(state)
        await state.async_client()  # the async pool, on the serving loop
        watch = (asyncio.create_task(_watch_database(state.client, config.watch_database_s))
                 if config.watch_database_s and state.client.db.supervisor is not None else None)
        yield
        if watch is not None:
            watch.cancel()
        await state.close_async()
        if state.owns_client:
            state.client.close()

    app = FastAPI(title="pgcite", version=__version__, lifespan=lifespan,
                  description="Grounded retrieval and answers with checked citations.")
    app.state.pgcite = state
    install_error_handlers(app)
    keyed = [Depends(no_visitors)]  # a visitor key reaches its exhibit's routes only
    app.include_router(_routes.router, dependencies=keyed)
    app.include_router(_admin.router, dependencies=keyed)
    app.include_router(_documents.router, dependencies=keyed)
    app.include_router(_exhibits.router)
    app.include_router(_routes.ops)

    app.add_middleware(RequestGuard, config=config)
    app.add_middleware(Observe, metrics=state.metrics)  # outermost: it sees every refusal
    return app


class Observe:
    """Counts every request by route template and status, a 500 included.

    A pure ASGI middleware rather than ``@app.middleware("http")``: an unhandled exception
    propagates through it (it is answered further out, by the server-error handler), so it is
    recorded here as the 500 the client gets instead of skipping the count.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 500

        async def recording(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, recording)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.observe_request(scope["method"], route, status,
                                         time.perf_counter() - started)
