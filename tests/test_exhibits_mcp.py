"""Exhibits over MCP, through the SDK's HTTP client against ``pgcite serve``'s app: a visitor key
asks its exhibit (under the exhibit's cutoff, whatever the call says) and opens its citations,
and is refused by every other tool, resource and exhibit."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

import pgcite

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install 'pgcite[mcp]')")

import httpx2  # noqa: E402  (the MCP SDK's HTTP client)
from mcp import Client  # noqa: E402

from pgcite.mcp._http import mount_mcp  # noqa: E402
from pgcite.service import ServiceConfig, create_app  # noqa: E402
from pgcite.service._keys import create_key  # noqa: E402
from tests.live_server import live_server  # noqa: E402
from tests.test_mcp_http import _transport  # noqa: E402

CUTOFF = "1665-12-31"


@pytest.fixture(scope="module")
def tokens(client: pgcite.Client, diary: pgcite.Collection) -> dict[str, str]:
    settings = pgcite.ExhibitSettings(persona="Samuel Pepys", cutoff=CUTOFF, corpora=["A"])
    pgcite.Exhibit.create(diary, "mcp-pepys", settings, replace=True)
    pgcite.Exhibit.create(diary, "mcp-other", settings, replace=True)
    with client.db.transaction() as conn:
        return {"visitor": create_key(conn, diary.name, "visitor", exhibit="mcp-pepys").token,
                "reader": create_key(conn, diary.name, "reader").token}


@pytest.fixture(scope="module")
def base_url(client: pgcite.Client, diary: pgcite.Collection) -> Iterator[str]:
    app = create_app(client=client, config=ServiceConfig(warm_up=False))
    mount_mcp(app)
    with live_server(app) as url:
        yield url


def _session(url: str, token: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    async def main() -> list[Any]:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
                Client(_transport(url, http)) as session:
            out: list[Any] = []
            for tool, args in calls:
                if tool == "resource":
                    try:
                        out.append(await session.read_resource(args["uri"]))
                    except Exception as exc:  # the SDK raises a refused read
                        out.append(exc)
                else:
                    out.append(await session.call_tool(tool, args))
            return out
    return asyncio.run(main())


def test_a_visitor_key_asks_its_exhibit_under_its_cutoff(
    base_url: str, tokens: dict[str, str], diary: pgcite.Collection,
) -> None:
    asked, lifted, plague = _session(base_url, tokens["visitor"], [
        ("ask_exhibit", {"exhibit": "mcp-pepys", "question": "Where did the great fire begin?"}),
        ("ask_exhibit", {"exhibit": "mcp-pepys", "question": "Where did the great fire begin?",
                         "cutoff": "1700-01-01", "corpora": ["B"]}),
        ("ask_exhibit", {"exhibit": "mcp-pepys", "question": "the plague"}),
    ])
    for result in (asked, lifted, plague):
        assert not result.is_error, result.content
        data = result.structured_content
        assert all(s["date"] is not None and s["date"] <= CUTOFF
                   and s["corpus"] == "A" for s in data["sources"])
    assert plague.structured_content["sources"]  # the check above saw a source
    # without the exhibit the same question does find the 1666 fire: the cutoff is what held
    assert any(s.date and s.date > CUTOFF
               for s in diary.answer("Where did the great fire begin?").sources)
    hit = diary.search("plague red cross", top_k=1, filters={"cutoff": CUTOFF}).hits[0]
    opened = _session(base_url, tokens["visitor"], [
        ("open_citation", {"exhibit": "mcp-pepys", "citation_id": hit.id})])[0]
    assert not opened.is_error and opened.structured_content["passage"]["body"] == hit.body
    assert all(p["date_end"] <= CUTOFF for p in opened.structured_content["after"])


def test_a_visitor_key_is_refused_by_everything_else(
    base_url: str, tokens: dict[str, str], diary: pgcite.Collection,
) -> None:
    later = diary.search("the great fire in the City", top_k=1).hits[0]
    assert later.date_start and later.date_start.isoformat() > CUTOFF
    results = _session(base_url, tokens["visitor"], [
        ("list_collections", {}),
        ("search", {"collection": diary.name, "query": "fire"}),
        ("answer", {"collection": diary.name, "question": "fire"}),
        ("get_passage", {"collection": diary.name, "citation_id": later.id}),
        ("entities", {"collection": diary.name}),
        ("ask_exhibit", {"exhibit": "mcp-other", "question": "fire"}),
        ("open_citation", {"exhibit": "mcp-other", "citation_id": later.id}),
        ("open_citation", {"exhibit": "mcp-pepys", "citation_id": later.id}),
        ("resource", {"uri": f"pgcite://collections/{diary.name}"}),
    ])
    listed, *refused, resource = results
    assert not listed.is_error and listed.structured_content["result"] == []
    for result in refused:
        assert result.is_error, result.content
    assert isinstance(resource, Exception) or getattr(resource, "is_error", False) \
        or not getattr(resource, "contents", None)
    # a reader of the collection may use the exhibit's tools (to preview it)
    ok = _session(base_url, tokens["reader"], [
        ("ask_exhibit", {"exhibit": "mcp-pepys", "question": "the plague"})])[0]
    assert not ok.is_error


def test_pgcite_mcp_over_stdio_with_a_visitor_key(client: pgcite.Client,
                                                  tokens: dict[str, str],
                                                  diary: pgcite.Collection) -> None:
    """The same rule where no HTTP service is in between: `pgcite mcp --key` (service/_access.py
    is what both surfaces call)."""
    import os
    import sys

    from mcp import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from pgcite.cli import main; main()", "--database-url", client.db.url,
              "mcp", "--key", tokens["visitor"]],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})

    async def main() -> list[Any]:
        async with Client(params) as session:
            return [await session.call_tool("ask_exhibit", {
                        "exhibit": "mcp-pepys", "question": "the plague"}),
                    await session.call_tool("search", {"collection": diary.name,
                                                       "query": "plague"}),
                    await session.call_tool("ask_exhibit", {
                        "exhibit": "mcp-other", "question": "the plague"})]
    asked, searched, other = asyncio.run(main())
    assert not asked.is_error, asked.content
    sources = asked.structured_content["sources"]
    assert sources and all(s["date"] <= CUTOFF for s in sources)
    assert searched.is_error and "a visitor key may only ask its exhibit" in \
        searched.content[0].text
    assert other.is_error and "no exhibit named 'mcp-other'" in other.content[0].text
