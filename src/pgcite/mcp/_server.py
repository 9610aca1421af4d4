"""The MCP server (official SDK, ``mcp`` 2.x: ``MCPServer``, formerly ``FastMCP``): tools to list
collections, search, answer, read a passage by citation id and rank entities (who/where/how often); each collection as a resource.

The tool descriptions are written for a model: what a citation id is, that filters are hard.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import psycopg
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from psycopg_pool import PoolTimeout
from pydantic import BaseModel, ConfigDict, Field

from pgcite import EntitiesResult, Generator, PgciteError, __version__
from pgcite._inputs import excerpt
from pgcite.mcp import _exhibits, _tools
from pgcite.mcp._access import Access

Resolver = Callable[[Context], Access]
T = TypeVar("T")
_log = logging.getLogger("pgcite.mcp")

INSTRUCTIONS = """\
pgcite searches document collections (diaries, papers, manuals…) stored in PostgreSQL and returns
passages, each with a citation id: a stable string such as "d-1666-09-02-a" that names exactly one
passage. Cite passages by that id in square brackets, [d-1666-09-02-a], and cite only ids that a
tool returned. Start with list_collections to see each collection's date range, corpora and
metadata fields. Filters are hard: with cutoff=1666-12-31 no passage dated after that day can be
returned, so use a cutoff whenever the question is "as of" a date (e.g. what someone knew then)."""

_CUTOFF = ("Hard date cutoff (YYYY-MM-DD): only passages whose date ends on or before it are "
           "returned; undated passages are excluded when it is set.")
_CORPORA = "Only passages from these corpora (tiers, e.g. ['A']); see list_collections."
_METADATA = ("Hard metadata predicates, e.g. [{'key': 'place', 'op': 'eq', 'value': 'London'}];"
             " ops: eq, in (a list value), lt, lte, gt, gte, exists. Unknown keys are an error.")
_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False,
                             open_world_hint=False)



class MetadataArg(BaseModel):
    """A metadata predicate as the tools take it: its schema for the model, its values checked
    by pgcite.Filters (pgcite/_inputs.py), so that a bad one is a tool error in pgcite's words,
    not the SDK's dump of pydantic's."""

    model_config = ConfigDict(extra="forbid")

    key: str
    op: Literal["eq", "in", "lt", "lte", "gt", "gte", "exists"] = "eq"
    value: Any = None


Cutoff = Annotated[dt.date | None, Field(description=_CUTOFF)]
Corpora = Annotated[list[str] | None, Field(description=_CORPORA)]
Metadata = Annotated[list[MetadataArg] | None, Field(description=_METADATA)]
Snapshot = Annotated[int | None, Field(
    description="A snapshot id to search (default: the collection's active snapshot).")]
TopK = Annotated[int, Field(ge=1, le=50, description="How many passages to return.")]


def _checked(call: Callable[[], T]) -> T:
    """A pgcite error is the caller's to fix: its message (and hint) as the tool's error. Any
    other error says what kind of failure it was and nothing more, as the HTTP API's 5xx do
    (the SDK's own message for an escaped exception is a bare "Error executing tool")."""
    try:
        return call()
    except PgciteError as exc:
        raise ToolError(excerpt(str(exc), 500)) from exc
    except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as exc:
        _log.error("database unavailable: %s", type(exc).__name__)
        raise ToolError("database unavailable (retry in a few seconds)") from exc
    except Exception as exc:
        _log.error("unhandled error in an MCP tool", exc_info=exc)
        raise ToolError("internal error (the server log has the details)") from exc


def build_server(resolve: Resolver, *, generator: Generator | None = None,
                 threshold: float | None = None) -> MCPServer:
    """An MCP server whose every call runs as ``resolve(ctx)`` allows; ``generator`` writes
    answers (None: the extractive default) and ``threshold`` is their abstention threshold
    (None: the embedding model's documented one)."""
    server = MCPServer("pgcite", version=__version__, instructions=INSTRUCTIONS)

    @server.tool(annotations=_READ_ONLY)
    def list_collections(ctx: Context) -> list[_tools.CollectionSummary]:
        """The collections you may search, each with its active snapshot's first and last
        passage date, corpora, metadata fields (for filters), passage count and language."""
        return _checked(lambda: _tools.list_collections(resolve(ctx)))

    @server.tool(annotations=_READ_ONLY)
    def search(
        ctx: Context,
        collection: Annotated[str, Field(description="A name from list_collections.")],
        query: Annotated[str, Field(min_length=1, max_length=2000,
                                    description="What to look for, in plain words.")],
        top_k: TopK = 5,
        mode: Annotated[Literal["hybrid", "keyword", "vector"], Field(
            description="hybrid (default) fuses keyword (BM25) and vector search.")] = "hybrid",
        cutoff: Cutoff = None,
        corpora: Corpora = None,
        metadata: Metadata = None,
        entity: Annotated[list[str] | None, Field(description=(
            "Only passages that mention all these entities, in any spelling the collection's "
            "aliases know, e.g. ['Sir W. Penn']."))] = None,
        snapshot_id: Snapshot = None,
    ) -> _tools.SearchOut:
        """Search a collection: passages ranked by relevance, each with its citation_id (cite it
        as [citation_id]), dates, author and source. Filters are hard, applied in the database:
        nothing outside them is ever returned."""
        return _checked(lambda: _tools.search(
            resolve(ctx), collection, query, top_k=top_k, mode=mode,
            filters=_tools.filters_of(cutoff, corpora, metadata, entity),
            snapshot_id=snapshot_id))

    @server.tool(annotations=_READ_ONLY)
    def answer(
        ctx: Context,
        collection: Annotated[str, Field(description="A name from list_collections.")],
        question: Annotated[str, Field(min_length=1, max_length=2000)],
        top_k: TopK = 5,
        cutoff: Cutoff = None,
        corpora: Corpora = None,
        metadata: Metadata = None,
        entity_facts: Annotated[bool, Field(description=(
            "who/where/how-often questions: state the entity graph's facts first (in "
            "`entities`)"))] = True,
        neighbours: Annotated[int | None, Field(ge=0, le=5, description=(
            "also give the answerer, after each retrieved passage, this many passages before "
            "and after it in its document, within the same filters (null: the default, 1; 0: "
            "none)"))
        ] = None,
    ) -> _tools.AnswerOut:
        """Answer a question from a collection's passages, with checked citations: every id in
        `citations` is one of `sources` (ids the guard could not check are removed and said so
        in `notes`). When the passages do not support an answer it abstains (`abstained`).
        Who/where/how-often questions also get the entity graph's facts (`entities`: people
        or places named with the question's entity, each with the ids it cites)."""
        return _checked(lambda: _tools.answer(
            resolve(ctx), collection, question, top_k=top_k,
            filters=_tools.filters_of(cutoff, corpora, metadata),
            generator=generator, threshold=threshold, entity_facts=entity_facts,
            neighbours=neighbours))

    @server.tool(annotations=_READ_ONLY)
    def get_passage(
        ctx: Context,
        collection: Annotated[str, Field(description="A name from list_collections.")],
        citation_id: Annotated[str, Field(min_length=1, max_length=500, description=(
            "A citation id exactly as search or answer returned it."))],
        neighbours: Annotated[int, Field(ge=0, le=10, description=(
            "How many passages of the same document to include before and after."))] = 1,
        cutoff: Cutoff = None,
        snapshot_id: Snapshot = None,
    ) -> _tools.PassageWindowOut:
        """Read one passage by its citation id, with its neighbours in the same document (for
        context around a cited passage). A cutoff hides neighbours dated after it."""
        return _checked(lambda: _tools.get_passage(
            resolve(ctx), collection, citation_id, neighbours=neighbours,
            filters=_tools.filters_of(cutoff, None, None), snapshot_id=snapshot_id))

    @server.tool(annotations=_READ_ONLY)
    def entities(
        ctx: Context,
        collection: Annotated[str, Field(description="A name from list_collections.")],
        near: Annotated[str | None, Field(max_length=200, description=(
            "A person, place or organisation, in any spelling (e.g. 'Sir W. Penn'): rank the "
            "entities named in the same passages. Omit it for the most mentioned."))] = None,
        kind: Annotated[Literal["any", "person", "place", "organisation"], Field(
            description="Only entities of this kind.")] = "any",
        limit: Annotated[int, Field(ge=1, le=100, description="How many entities.")] = 20,
        cutoff: Cutoff = None,
        corpora: Corpora = None,
        snapshot_id: Snapshot = None,
    ) -> EntitiesResult:
        """Who, where, how often: entities ranked by how many passages mention them (with
        `near`: mention them together with that entity), each with the citation ids of those
        passages (cite them as [citation_id]). Filters are hard: with a cutoff, nothing after
        it counts."""
        return _checked(lambda: _tools.entities(
            resolve(ctx), collection, near=near, kind=kind, limit=limit,
            filters=_tools.filters_of(cutoff, corpora, None), snapshot_id=snapshot_id))

    _exhibits.register(server, resolve, generator=generator, threshold=threshold,
                       checked=_checked)

    @server.resource(_tools.COLLECTION_URI, mime_type="application/json",
                     description="A collection: language, model, date range, corpora, fields.")
    def collection_resource(name: str, ctx: Context) -> str:
        summary = _checked(lambda: _tools.describe(resolve(ctx), name))
        return json.dumps(summary.model_dump(mode="json"), indent=2)

    return server
