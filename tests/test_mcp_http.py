"""MCP over streamable HTTP inside ``pgcite serve``'s app, through the SDK's HTTP client and a
real server: the service's keys apply (401 without one; a key for one collection sees only it)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import pgcite

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install 'pgcite[mcp]')")

import httpx2  # noqa: E402  (the MCP SDK's HTTP client)
from mcp import Client  # noqa: E402

from pgcite.mcp._http import mount_mcp  # noqa: E402
from pgcite.service import ServiceConfig, create_app  # noqa: E402
from pgcite.service._keys import create_key  # noqa: E402
from tests.live_server import live_server  # noqa: E402
from tests.small_collection import one_passage_collection  # noqa: E402


@pytest.fixture(scope="module")
def other(client: pgcite.Client, tmp_path_factory: pytest.TempPathFactory) -> pgcite.Collection:
    return one_passage_collection(client, tmp_path_factory.mktemp("mcp_http"),
                                  "mcp_http_other")


@pytest.fixture(scope="module")
def base_url(client: pgcite.Client, diary: pgcite.Collection,
             other: pgcite.Collection) -> Iterator[str]:
    app = create_app(client=client, config=ServiceConfig(warm_up=False))
    mount_mcp(app)
    with live_server(app) as url:
        yield url


def _call(url: str, token: str, tool: str, args: dict[str, Any]) -> Any:
    async def main() -> Any:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
                Client(_transport(url, http)) as session:
            return await session.call_tool(tool, args)
    return asyncio.run(main())


def _transport(url: str, http: Any) -> Any:
    from mcp.client.streamable_http import streamable_http_client

    return streamable_http_client(f"{url}/mcp", http_client=http)


def test_mcp_needs_a_key(base_url: str) -> None:
    resp = httpx.post(f"{base_url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                      headers={"Accept": "application/json, text/event-stream"})
    assert resp.status_code == 401
    bad = httpx.post(f"{base_url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                     headers={"Authorization": "Bearer pgc_000000000000_" + "x" * 43})
    assert bad.status_code == 401


def test_mcp_over_http_is_scoped_by_the_key(
    base_url: str, client: pgcite.Client, diary: pgcite.Collection, other: pgcite.Collection,
) -> None:
    with client.connection() as conn:
        token = create_key(conn, diary.name, "reader").token
    listed = _call(base_url, token, "list_collections", {})
    assert not listed.is_error
    assert [c["name"] for c in listed.structured_content["result"]] == [diary.name]
    found = _call(base_url, token, "search", {"collection": diary.name, "query": "fire",
                                              "cutoff": "1665-12-31"})
    assert not found.is_error and found.structured_content["passages"]
    assert all(p["date_end"] <= "1665-12-31" for p in found.structured_content["passages"])
    refused = _call(base_url, token, "search", {"collection": other.name, "query": "harbour"})
    assert refused.is_error and "no collection named" in refused.content[0].text


def test_a_revoked_key_ends_its_open_stream(client: pgcite.Client,
                                             diary: pgcite.Collection) -> None:
    import time

    from pgcite.service._keys import revoke_key

    app = create_app(client=client, config=ServiceConfig(warm_up=False, key_recheck_s=0.3))
    mount_mcp(app)
    with client.connection() as conn:
        new = create_key(conn, diary.name, "reader")
    headers = {"Authorization": f"Bearer {new.token}", "Accept": "text/event-stream"}
    with live_server(app) as url, httpx.Client(timeout=30) as http:
        with http.stream("GET", f"{url}/mcp", headers=headers) as stream:
            assert stream.status_code == 200, stream.read()
            with client.connection() as conn:
                revoke_key(conn, new.key.key_id)
            revoked = time.monotonic()
            for _ in stream.iter_bytes():  # returns once the server ends the stream
                pass
            assert time.monotonic() - revoked < 5.0
        # and a new one is refused
        assert http.get(f"{url}/mcp", headers=headers).status_code == 401
