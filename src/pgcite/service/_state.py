"""What the service holds for its lifetime, and the per-request lookups built on it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from pgcite import (
    AsyncClient,
    AsyncCollection,
    Client,
    Collection,
    CollectionInfo,
    CollectionNotFound,
    ConfigError,
    Generator,
    GeneratorConfig,
)
from pgcite._async import DEFAULT_WORKERS, async_client
from pgcite._client import on_replica
from pgcite.answer import ChatGenerator, make_generator
from pgcite.llm import llm_config
from pgcite.service._access import Grant, not_found
from pgcite.service._metrics import Metrics
from pgcite.service._roles import AsyncRoleScopedConnection, RoleCache, RoleScopedConnection
from pgcite.store import ReplicaBehind, aget_collection, get_collection

T = TypeVar("T")
MAX_UPLOAD_BYTES = 50 * 1024 * 1024
MAX_UPLOAD_FILES = 20
# Search/answer bodies: the largest valid one (32 predicates x 100 values x 1000 chars) is
# ~3.3 MB; anything past this bound is refused before it is parsed.
MAX_JSON_BYTES = 4 * 1024 * 1024


class ServiceConfig(BaseModel):
    """How the service runs (``pgcite serve`` options)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    auth: bool = Field(default=True, description="require API keys (off: loopback only)")
    generator: GeneratorConfig = Field(default_factory=GeneratorConfig)
    threshold: float | None = Field(default=None, description="default abstention threshold")
    max_upload_bytes: int = Field(default=MAX_UPLOAD_BYTES, ge=1)
    max_upload_files: int = Field(default=MAX_UPLOAD_FILES, ge=1, le=1000)
    max_json_bytes: int = Field(default=MAX_JSON_BYTES, ge=1,
                                description="bound on every request body but an upload's")
    upload_budget_s: float = Field(
        default=300.0, gt=0, description="seconds of work (reading and OCR, embedding) one "
        "upload's ingest may take; past it nothing is stored and the upload is a 413")
    header_timeout_s: float = Field(
        default=10.0, gt=0, description="a connection must send a whole request head within "
        "this many seconds (slowloris); `pgcite serve` closes it otherwise")
    idle_timeout_s: float = Field(
        default=30.0, gt=0, description="a request body that sends nothing for this many "
        "seconds is cut")
    key_recheck_s: float = Field(
        default=2.0, gt=0, description="how often an open MCP stream (GET /mcp) checks its key "
        "again: a revoked key closes it")
    watch_database_s: float = Field(
        default=2.0, ge=0, description="how often the service checks the embedded database "
        "itself, restarting a dead postmaster with no request needed (0: off)")
    warm_up: bool = Field(default=True, description="load embedders at start-up")
    workers: int = Field(default=DEFAULT_WORKERS, ge=1, le=256,
                         description="threads for model work: query embedding, answers")


@dataclass
class ServiceState:
    client: Client
    config: ServiceConfig
    owns_client: bool
    metrics: Metrics = field(default_factory=Metrics)
    generator: Generator | None = None
    roles: RoleCache | None = None
    # The async API search and answer run on: made on the event loop that serves (the
    # lifespan's), again if a test client serves from another loop.
    _async: tuple[asyncio.AbstractEventLoop, AsyncClient] | None = None

    def __post_init__(self) -> None:
        # One LLM per process: when the client's configured LLM is the generator's model (as
        # create_app arranges), generation, the stages and the self-checks' judge share it.
        wanted = self.config.generator.llm()
        chat = (self.client.llm() if wanted is not None
                and llm_config(self.client.settings) == wanted else None)
        self.generator = (ChatGenerator(chat, max_tokens=self.config.generator.max_tokens)
                          if chat is not None else make_generator(self.config.generator))
        self.roles = RoleCache(self.client)

    def lookup(self, name: str) -> CollectionInfo:
        """The registry entry for ``name``; schema names come from here, never from the URL.
        Read on a replica when there is one (a name it has not replayed: on the primary)."""
        try:
            return self.client.read(lambda: self._lookup(name))
        except (CollectionNotFound, ConfigError):
            # No hint: the registry's list of names is not for every key holder to read.
            raise not_found(name) from None

    async def alookup(self, name: str) -> CollectionInfo:
        """:meth:`lookup` on the async pool (the request path: no thread hop); with read
        replicas, the sync lookup that routes to them, in a thread."""
        if self.replicated:
            return await run_in_threadpool(self.lookup, name)
        try:
            async with (await self.async_client()).connection() as conn:
                return await aget_collection(conn, name)
        except (CollectionNotFound, ConfigError):
            raise not_found(name) from None

    def _lookup(self, name: str) -> CollectionInfo:
        with self.client.connection() as conn:
            try:
                return get_collection(conn, name)
            except CollectionNotFound:
                if on_replica():
                    raise ReplicaBehind(f"collection {name!r} not replayed") from None
                raise

    @property
    def replicated(self) -> bool:
        """Whether reads may go to replicas: then search and answer take the sync path that
        routes them (``Client.read``), in a thread; the async API runs on the primary only."""
        return bool(self.client.replicas)

    def reader(self, info: CollectionInfo, grant: Grant | None = None) -> Collection:
        """``info``'s collection as ``grant`` may read it (None: anything; a reader key: the
        active snapshot only), every query of it run under its read-only role."""
        assert self.roles is not None
        role = self.roles.ensure(info)
        return (grant or Grant()).open(self.client, info,
                                       connection=RoleScopedConnection(self.client, role))

    async def async_client(self) -> AsyncClient:
        """The async client on this event loop (opened on first use). One made on a loop that
        has stopped (a test client's, which serves each request from a loop of its own) is
        let go: its model threads are stopped now, and its pool, which only that loop could
        close, closes its connections when it is collected."""
        loop = asyncio.get_running_loop()
        if self._async is None or self._async[0] is not loop:
            if self._async is not None and not self._async[0].is_running():
                self._async[1].offload.close()
            self._async = (loop, await async_client(self.client, workers=self.config.workers))
        return self._async[1]

    async def close_async(self) -> None:
        if self._async is not None:
            await self._async[1].close()  # its sync client is this state's, closed by it
            self._async = None

    async def offload(self, fn: Callable[[], T]) -> T:
        """``fn`` (blocking) in the async client's bounded executor."""
        return await (await self.async_client()).offload(fn)

    async def areader(self, info: CollectionInfo, grant: Grant | None = None) -> AsyncCollection:
        """:meth:`reader`, awaited: the same role scoping on the async pool."""
        assert self.roles is not None
        aclient = await self.async_client()
        ready = self.roles.ready(info)
        reader = (self.reader(info, grant) if ready
                  else await aclient.offload(lambda: self.reader(info, grant)))
        role = self.roles.ensure(info)  # ensured above: no I/O
        return AsyncCollection(aclient, reader,
                               connection=AsyncRoleScopedConnection(aclient, role))


async def get_state(request: Request) -> ServiceState:  # async: no thread hop for a lookup
    state: ServiceState = request.app.state.pgcite
    return state
