"""The MCP server through the official SDK's in-process client, against the real database:
tools listed, a cutoff holding, answers citing only their sources, keys scoping collections."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import pgcite

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install 'pgcite[mcp]')")

from mcp import Client  # noqa: E402

from pgcite.mcp import build_server, open_access  # noqa: E402
from pgcite.service._keys import create_key  # noqa: E402

from .small_collection import one_passage_collection  # noqa: E402


@pytest.fixture(scope="module")
def other(client: pgcite.Client, tmp_path_factory: pytest.TempPathFactory) -> pgcite.Collection:
    """A second collection, for key scoping."""
    return one_passage_collection(client, tmp_path_factory.mktemp("mcp"), "mcp_other")


def _session(client: pgcite.Client, token: str | None,
             body: Callable[[Client], Awaitable[Any]]) -> Any:
    access = open_access(client, token)
    server = build_server(lambda ctx: access)

    async def main() -> Any:
        async with Client(server) as session:
            return await body(session)
    return asyncio.run(main())


def _data(result: Any) -> Any:
    assert not result.is_error, result.content
    data = result.structured_content
    return data["result"] if isinstance(data, dict) and set(data) == {"result"} else data


def test_tools_are_listed_with_model_facing_descriptions(
    client: pgcite.Client, diary: pgcite.Collection,
) -> None:
    async def body(session: Client) -> Any:
        return (await session.list_tools()).tools
    tools = {t.name: t for t in _session(client, None, body)}
    assert set(tools) == {"list_collections", "search", "answer", "get_passage", "entities",
                          "ask_exhibit", "open_citation"}
    assert "citation_id" in (tools["search"].description or "")
    assert "hard" in (tools["search"].description or "").lower()
    assert "cutoff" in tools["search"].input_schema["properties"]


def test_list_collections_reports_dates_and_corpora(
    client: pgcite.Client, diary: pgcite.Collection,
) -> None:
    async def body(session: Client) -> Any:
        return _data(await session.call_tool("list_collections", {}))
    listed = {c["name"]: c for c in _session(client, None, body)}
    profile = listed[diary.name]["active_snapshot"]
    assert profile["first_date"] == "1660-01-01" and profile["corpora"] == ["A", "B", "C"]
    assert profile["undated_passages"] >= 1 and "place" in profile["metadata_fields"]


def test_search_with_a_cutoff_returns_nothing_later(
    client: pgcite.Client, diary: pgcite.Collection,
) -> None:
    async def body(session: Client) -> Any:
        return _data(await session.call_tool("search", {
            "collection": diary.name, "query": "the great fire in the City", "top_k": 20,
            "cutoff": "1665-12-31"}))
    out = _session(client, None, body)
    expected = diary.search("the great fire in the City", top_k=20,
                            filters={"cutoff": "1665-12-31"})
    assert [p["citation_id"] for p in out["passages"]] == [h.id for h in expected.hits]
    assert out["passages"]
    assert all(p["date_end"] is not None and p["date_end"] <= "1665-12-31"
               for p in out["passages"])


def test_answer_cites_only_its_sources(client: pgcite.Client, diary: pgcite.Collection) -> None:
    async def body(session: Client) -> Any:
        return _data(await session.call_tool("answer", {
            "collection": diary.name, "question": "Where did the great fire begin?"}))
    out = _session(client, None, body)
    assert not out["abstained"] and out["citations"]
    assert set(out["citations"]) <= {s["citation_id"] for s in out["sources"]}


def test_get_passage_with_neighbours_and_cutoff(
    client: pgcite.Client, diary: pgcite.Collection,
) -> None:
    hit = diary.search("the great fire in the City", top_k=1).hits[0]

    async def body(session: Client) -> Any:
        whole = _data(await session.call_tool("get_passage", {
            "collection": diary.name, "citation_id": hit.id, "neighbours": 2}))
        hidden = await session.call_tool("get_passage", {
            "collection": diary.name, "citation_id": hit.id, "cutoff": "1665-01-01"})
        return whole, hidden
    whole, hidden = _session(client, None, body)
    assert whole["passage"]["citation_id"] == hit.id and whole["passage"]["text"] == hit.body
    assert hidden.is_error and "no passage" in hidden.content[0].text


def test_a_key_for_one_collection_cannot_see_another(
    client: pgcite.Client, diary: pgcite.Collection, other: pgcite.Collection,
) -> None:
    with client.connection() as conn:
        token = create_key(conn, diary.name, "reader").token

    async def body(session: Client) -> Any:
        listed = _data(await session.call_tool("list_collections", {}))
        mine = await session.call_tool("search", {"collection": diary.name, "query": "fire"})
        theirs = await session.call_tool("search", {"collection": other.name,
                                                    "query": "ledger"})
        passage = await session.call_tool("get_passage", {"collection": other.name,
                                                          "citation_id": "mcp_other-1"})
        return listed, mine, theirs, passage
    listed, mine, theirs, passage = _session(client, token, body)
    assert [c["name"] for c in listed] == [diary.name]
    assert not mine.is_error
    for refused in (theirs, passage):
        assert refused.is_error and "no collection named 'mcp_other'" in refused.content[0].text
    # without a key both are visible
    assert other.name in [c["name"] for c in _session(
        client, None, lambda s: _list(s))]


async def _list(session: Client) -> Any:
    return _data(await session.call_tool("list_collections", {}))


def test_bad_arguments_are_tool_errors_not_crashes(
    client: pgcite.Client, diary: pgcite.Collection,
) -> None:
    async def body(session: Client) -> Any:
        return [await session.call_tool("search", args) for args in (
            {"collection": diary.name, "query": "fire", "cutoff": "soon"},
            {"collection": diary.name, "query": "fire",
             "metadata": [{"key": "nope", "value": 1}]},
            {"collection": "missing", "query": "fire"},
        )]
    for result in _session(client, None, body):
        assert result.is_error and result.content[0].text


def test_unknown_key_is_refused(client: pgcite.Client) -> None:
    with pytest.raises(pgcite.PgciteError, match="unknown or revoked"):
        open_access(client, "pgc_000000000000_" + "x" * 43)


def test_pgcite_mcp_serves_over_stdio(client: pgcite.Client, diary: pgcite.Collection) -> None:
    """The real command, as an MCP client launches it: a subprocess speaking on stdin/stdout."""
    import os
    import sys

    from mcp import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from pgcite.cli import main; main()", "--database-url", client.db.url,
              "mcp"],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})

    async def main() -> Any:
        async with Client(params) as session:
            return await session.call_tool("search", {
                "collection": diary.name, "query": "plague", "cutoff": "1665-12-31"})
    result = asyncio.run(main())
    assert not result.is_error, result.content
    ids = [p["citation_id"] for p in result.structured_content["passages"]]
    assert ids == [h.id for h in diary.search("plague", filters={"cutoff": "1665-12-31"}).hits]


def test_an_empty_collection_is_listed_without_a_snapshot(client: pgcite.Client) -> None:
    client.drop_collection("mcp_empty", missing_ok=True)
    client.create_collection("mcp_empty")
    listed = {c["name"]: c for c in _session(client, None, _list)}
    assert listed["mcp_empty"]["active_snapshot"] is None
    client.drop_collection("mcp_empty")
