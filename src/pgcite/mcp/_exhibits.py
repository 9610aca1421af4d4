"""Exhibits over MCP: ``ask_exhibit`` and ``open_citation``, under the exhibit's settings only
(docs/exhibits.md). A visitor key reaches these two tools for its own exhibit and nothing else
(the other tools check a reader's access, which a visitor key never has); readers and admins of
the exhibit's collection may use them too. Neither tool takes a cutoff, corpora or a snapshot to
read: the exhibit decides them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import AfterValidator, Field

from pgcite import CitedSource, CollectionNotFound, Exhibit, ExhibitNotFound, Generator
from pgcite._inputs import clean_text
from pgcite.mcp._access import Access
from pgcite.mcp._tools import AnswerOut, answer_out
from pgcite.store import directory_collection, get_collection, get_exhibit

ExhibitName = Annotated[str, Field(min_length=1, max_length=63, description=(
    "The exhibit's name (its page is /exhibit/NAME).")), AfterValidator(clean_text)]
Text500 = Annotated[str, Field(min_length=1, max_length=500), AfterValidator(clean_text)]


def open_exhibit(access: Access, name: str) -> Exhibit:
    """The exhibit ``name`` if this caller may visit it (service/_access.py, rule 5); an
    unknown exhibit and one the key may not visit get the same answer."""
    grant = access.grant
    try:
        if grant.visitor_of not in (None, name):  # decided before any lookup
            raise ExhibitNotFound(name)
        with access.client.connection() as conn:
            collection = directory_collection(conn, name)
            visiting = grant.visiting(collection, name)
            info = get_collection(conn, collection)
            stored = get_exhibit(conn, info, name)
    except (ExhibitNotFound, CollectionNotFound):
        raise ExhibitNotFound(f"no exhibit named {name!r}") from None
    return Exhibit(access.reader(info, visiting), stored)


def register(server: MCPServer, resolve: Callable[[Context], Access], *,
             generator: Generator | None, threshold: float | None,
             checked: Callable[[Callable[[], Any]], Any]) -> None:
    """Add the exhibit tools to ``server`` (``resolve`` and ``checked`` as in _server.py)."""
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False,
                                open_world_hint=False)

    @server.tool(annotations=read_only)
    def ask_exhibit(
        ctx: Context, exhibit: ExhibitName,
        question: Text500,
    ) -> AnswerOut:
        """Ask an exhibit (a historical figure's archive) a question: the answer speaks as the
        figure, quotes only passages within the exhibit's date cutoff and corpora, and cites
        them as [citation_id]; `snapshot_id` is what open_citation takes to check a citation."""
        def run() -> AnswerOut:
            found = open_exhibit(resolve(ctx), exhibit)
            return answer_out(found.answer(question, generator=generator, threshold=threshold))
        return checked(run)  # type: ignore[no-any-return]

    @server.tool(annotations=read_only)
    def open_citation(
        ctx: Context, exhibit: ExhibitName,
        citation_id: Text500,
        snapshot_id: Annotated[int | None, Field(ge=1, description=(
            "The snapshot_id of the answer that cited it: says whether the text is still the "
            "text that was cited."))] = None,
    ) -> CitedSource:
        """Open a citation of an exhibit's answer: the passage in its document with its
        neighbours (none after the exhibit's cutoff), the document's date, author, title and
        provenance, and for a scanned page where on the page it was read."""
        def run() -> CitedSource:
            found = open_exhibit(resolve(ctx), exhibit)
            return found.source(citation_id, snapshot_id=snapshot_id)
        return checked(run)  # type: ignore[no-any-return]
