"""Every surface as hard as the HTTP API: the same hostile input gets the same refusal on the HTTP
API, the inspector's API, MCP, the CLI and Python (a 422, a tool error, one line, a typed error;
never a 5xx or a traceback), and one access rule holds on all of them (a reader key reads the
active snapshot only; errors list nothing the caller may not see)."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import pgcite
from pgcite.cli import app as cli_app
from pgcite.config import Settings
from pgcite.retrieve._filters import coerce_predicates
from pgcite.service import ServiceConfig, create_app, create_key
from pgcite.ui import mount_ui

# (what, body fields of a search) -- each refused whatever the collection holds
HOSTILE: list[tuple[str, dict[str, Any]]] = [
    ("NUL in the query", {"query": "fi\x00re"}),
    ("lone surrogate in the query", {"query": "fire \ud800"}),
    ("query over 2000 characters", {"query": "fire " * 500}),
    ("NUL in a corpus", {"query": "fire", "corpora": ["A\x00"]}),
    ("lone surrogate in a corpus", {"query": "fire", "corpora": ["\udfff"]}),
    ("metadata key over 200 characters", {"query": "fire", "filter": ("k" * 201, "1")}),
    ("NUL in a metadata value", {"query": "fire", "filter": ("place", "Lon\x00don")}),
    ("a cutoff that is no date", {"query": "fire", "cutoff": "1666-13-01"}),
]


def _http_body(fields: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in fields.items() if k != "filter"}
    if "filter" in fields:
        key, value = fields["filter"]
        body["filters"] = {"metadata": [{"key": key, "value": value}]}
    return body


def _inspect_body(fields: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in fields.items() if k != "filter"}
    if "filter" in fields:
        key, value = fields["filter"]
        body["filters"] = [f"{key}={value}"]
    return body


def _python_call(col: pgcite.Collection, fields: dict[str, Any]) -> None:
    filters: dict[str, Any] = {k: v for k, v in fields.items() if k in ("corpora", "cutoff")}
    if "filter" in fields:
        key, value = fields["filter"]
        filters["metadata"] = [{"key": key, "value": value}]
    col.search(fields["query"], filters=filters)


@pytest.fixture(scope="module")
def api(client: pgcite.Client, diary: pgcite.Collection) -> Iterator[TestClient]:
    app = create_app(client=client, config=ServiceConfig(warm_up=False))
    mount_ui(app)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def _token(client: pgcite.Client, collection: str, role: str) -> str:
    with client.db.transaction() as conn:
        return create_key(conn, collection, role).token


@pytest.fixture(scope="module")
def reader(client: pgcite.Client, diary: pgcite.Collection) -> dict[str, str]:
    return {"Authorization": f"Bearer {_token(client, diary.name, 'reader')}"}


@pytest.mark.parametrize(("what", "fields"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_http_and_inspector_refuse_alike(api: TestClient, reader: dict[str, str],
                                         diary: pgcite.Collection, what: str,
                                         fields: dict[str, Any]) -> None:
    headers = {**reader, "content-type": "application/json"}  # json.dumps escapes surrogates
    search = api.post(f"/v1/collections/{diary.name}/search", headers=headers,
                      content=json.dumps(_http_body(fields)))
    inspect = api.post(f"/ui/api/collections/{diary.name}/inspect", headers=headers,
                       content=json.dumps(_inspect_body(fields)))
    assert search.status_code == 422, (what, search.text)
    assert inspect.status_code == 422, (what, inspect.text)
    for resp in (search, inspect):  # short, and never the value that broke the rule
        assert len(resp.content) < 2000 and "\\u0000" not in resp.text and "\\ud800" not in resp.text


@pytest.mark.parametrize(("what", "fields"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_python_raises_invalid_input(diary: pgcite.Collection, what: str,
                                     fields: dict[str, Any]) -> None:
    with pytest.raises(pgcite.InvalidInput):
        _python_call(diary, fields)


def test_python_checks_every_text_it_sends_to_the_database(diary: pgcite.Collection) -> None:
    with pytest.raises(pgcite.InvalidInput, match="query: text contains a NUL"):
        diary.answer("where did the fire \x00 begin?")
    with pytest.raises(pgcite.InvalidInput, match="near"):
        diary.entities(near="Sir W. \x00Penn")
    with pytest.raises(pgcite.InvalidInput, match="document id"):
        diary.delete_documents(["e-\ud800"], activate=False)
    with pytest.raises(pgcite.InvalidInput, match="query is empty"):
        diary.search("   ")
    with pytest.raises(pgcite.InvalidFilter):  # a FilterError too, as before
        diary.search("fire", filters={"metadata": [{"key": "year", "value": math.nan}]})
    with pytest.raises(pgcite.FilterError, match="not a finite number"):
        coerce_predicates([pgcite.MetadataPredicate(key="year", op="gte", value="1e999999")],
                          {"year": ["number"]})


@pytest.fixture()
def cli_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)


@pytest.mark.parametrize("args", [
    ["--filter", "k" * 201 + "=1"],
    ["--filter", "year>=nan"],
    ["--filter", "year>=" + "9" * 5000],
    ["--corpus", "\udcff"],  # undecodable command-line bytes become lone surrogates
    ["--entity", "x" * 201],
], ids=["long key", "nan", "huge number", "surrogate corpus", "long entity"])
def test_cli_says_one_line(cli_env: None, diary: pgcite.Collection, args: list[str]) -> None:
    result = CliRunner().invoke(cli_app, ["search", diary.name, "fire", *args])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.output.startswith("error: ") and "Traceback" not in result.output


def test_cli_query_with_a_lone_surrogate(cli_env: None, diary: pgcite.Collection) -> None:
    result = CliRunner().invoke(cli_app, ["search", diary.name, "fire \udcff"])
    assert result.exit_code == 2 and "lone surrogate" in result.output, result.output


# MCP ------------------------------------------------------------------------------------------

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")


def _mcp_calls(client: pgcite.Client, token: str | None,
               calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    from mcp import Client

    from pgcite.mcp import build_server, open_access

    access = open_access(client, token)
    server = build_server(lambda ctx: access)

    async def main() -> list[Any]:
        async with Client(server) as session:
            return [await session.call_tool(tool, args) for tool, args in calls]
    return asyncio.run(main())


def _mcp_search_args(collection: str, fields: dict[str, Any]) -> dict[str, Any]:
    args = {"collection": collection, **_http_body(fields)}
    if "filters" in args:
        args["metadata"] = args.pop("filters")["metadata"]
    return args


def test_mcp_refuses_alike_with_a_clear_message(client: pgcite.Client,
                                                diary: pgcite.Collection) -> None:
    results = _mcp_calls(client, None, [
        ("search", _mcp_search_args(diary.name, fields)) for _, fields in HOSTILE] + [
        ("answer", {"collection": diary.name, "question": "fire \x00?"}),
        ("get_passage", {"collection": diary.name, "citation_id": "d-\x00"}),
        ("entities", {"collection": diary.name, "near": "Penn\x00"}),
        ("search", {"collection": diary.name, "query": "fire",
                    "metadata": [{"key": "year", "value": math.inf}]}),
    ])
    for (what, _), result in zip([*HOSTILE, *[("other", {})] * 4], results, strict=True):
        assert result.is_error, what
        text = result.content[0].text
        assert "Error executing tool" not in text or ":" in text.split("Error executing tool")[1]
        assert len(text) < 1500, (what, text)
    nul = results[0].content[0].text
    assert "NUL" in nul, nul


# One access rule ------------------------------------------------------------------------------

DOCS = [{"_id": "keep", "date": "1700-01-01", "text": "The harbour master kept a ledger."},
        {"_id": "gone", "date": "1700-01-02", "text": "A secret of the quokka vault, deleted."}]


@pytest.fixture(scope="module")
def two_snapshots(client: pgcite.Client, tmp_path_factory: pytest.TempPathFactory
                  ) -> dict[str, Any]:
    """A collection whose document 'gone' was deleted: snapshot 1 holds it, the active one not."""
    path = tmp_path_factory.mktemp("surfaces") / "docs.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    client.drop_collection("acc_two", missing_ok=True)
    col = client.create_collection("acc_two")
    first = col.ingest([path]).snapshot_id
    gone = next(h.id for h in col.search("quokka vault", mode="keyword").hits
                if h.document_id == "gone")
    removed = col.delete_documents(["gone"])
    assert removed.activated and removed.snapshot_id != first
    return {"col": col, "old": first, "active": removed.snapshot_id, "gone": gone,
            "reader": _token(client, "acc_two", "reader"),
            "admin": _token(client, "acc_two", "admin")}


def test_a_reader_key_reads_the_active_snapshot_only_over_mcp(
        client: pgcite.Client, two_snapshots: dict[str, Any]) -> None:
    name, old, gone = "acc_two", two_snapshots["old"], two_snapshots["gone"]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("search", {"collection": name, "query": "quokka vault", "snapshot_id": old}),
        ("get_passage", {"collection": name, "citation_id": gone, "snapshot_id": old}),
        ("entities", {"collection": name, "snapshot_id": old}),
        ("search", {"collection": name, "query": "quokka vault", "snapshot_id": 999}),
    ]
    refused = _mcp_calls(client, two_snapshots["reader"], calls)
    texts = [r.content[0].text for r in refused]
    assert all(r.is_error for r in refused), texts
    assert all("only an admin key" in t for t in texts), texts
    # an unknown id and a known one look the same, on every tool
    assert len({t.split(": ", 1)[1] for t in texts}) == 1, texts
    # the active snapshot, named or not, is the reader's
    (named, plain) = _mcp_calls(client, two_snapshots["reader"], [
        ("search", {"collection": name, "query": "quokka vault ledger",
                    "snapshot_id": two_snapshots["active"]}),
        ("search", {"collection": name, "query": "quokka vault ledger"})])
    for result in (named, plain):
        assert not result.is_error
        assert [p["citation_id"] for p in result.structured_content["passages"]] != []
        assert gone not in json.dumps(result.structured_content)
    # an admin key may read the old snapshot; an unknown id lists no others
    found, unknown = _mcp_calls(client, two_snapshots["admin"], [
        ("search", {"collection": name, "query": "quokka vault", "snapshot_id": old}),
        ("search", {"collection": name, "query": "quokka vault", "snapshot_id": 999})])
    assert gone in json.dumps(found.structured_content)
    text = unknown.content[0].text
    assert unknown.is_error and "no snapshot 999" in text and "snapshots:" not in text, text


def test_the_same_rule_over_http_inspector_python_and_integrations(
        client: pgcite.Client, api: TestClient, two_snapshots: dict[str, Any]) -> None:
    from pgcite.service import open_collection

    old, headers = two_snapshots["old"], {"Authorization": f"Bearer {two_snapshots['reader']}"}
    for snapshot in (old, 999):
        for resp in (
            api.post("/v1/collections/acc_two/search", headers=headers,
                     json={"query": "quokka", "snapshot": snapshot}),
            api.post("/ui/api/collections/acc_two/inspect", headers=headers,
                     json={"query": "quokka", "snapshot_id": snapshot}),
            api.get("/v1/collections/acc_two/entities", headers=headers,
                    params={"snapshot": snapshot}),
            api.get("/v1/collections/acc_two/documents", headers=headers,
                    params={"snapshot": snapshot}),
        ):
            assert resp.status_code == 403, resp.text
            assert resp.json()["detail"] == ("only an admin key may query a snapshot that is "
                                             "not the active one")
    col = open_collection(client, "acc_two", key=two_snapshots["reader"])
    with pytest.raises(pgcite.AccessDenied):
        col.search("quokka", snapshot_id=old)
    with pytest.raises(pgcite.AccessDenied):
        col.answer("what is in the quokka vault?", snapshot_id=old)
    assert col.search("quokka ledger", snapshot_id=two_snapshots["active"]).hits
    with pytest.raises(pgcite.CollectionNotFound, match="no collection named 'diary_fixture'"):
        open_collection(client, "diary_fixture", key=two_snapshots["reader"])
    pytest.importorskip("langchain_core", reason="the langchain extra is not installed")
    from pgcite.integrations.langchain import PgciteRetriever

    with pytest.raises(pgcite.AccessDenied):
        PgciteRetriever(collection=col, snapshot_id=old).invoke("quokka")


def test_pgcite_mcp_over_stdio_with_a_reader_key(client: pgcite.Client,
                                                 two_snapshots: dict[str, Any]) -> None:
    import os
    import sys

    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from pgcite.cli import main; main()", "--database-url", client.db.url,
              "mcp", "--key", two_snapshots["reader"]],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})

    async def main() -> Any:
        async with Client(params) as session:
            return await session.call_tool("search", {
                "collection": "acc_two", "query": "quokka", "snapshot_id": two_snapshots["old"]})
    result = asyncio.run(main())
    assert result.is_error and "only an admin key" in result.content[0].text


def test_an_upload_and_an_ingest_fail_only_the_file_with_a_bad_number(
        client: pgcite.Client, api: TestClient, cli_env: None, tmp_path: Path) -> None:
    client.drop_collection("acc_nan", missing_ok=True)
    client.create_collection("acc_nan")
    admin = {"Authorization": f"Bearer {_token(client, 'acc_nan', 'admin')}"}
    good = b'{"_id": "g", "date": "1700-01-01", "text": "a good record"}\n'
    for bad in (b'{"_id": "n", "text": "x", "m": NaN}\n',
                b'{"_id": "i", "text": "x", "m": 1e999999}\n',
                b'{"_id": "z", "text": "x", "m": {"deep": [-Infinity]}}\n'):
        resp = api.post("/v1/collections/acc_nan/documents", headers=admin,
                        files=[("files", ("good.jsonl", good)), ("files", ("bad.jsonl", bad))])
        assert resp.status_code == 201, resp.text
        report = resp.json()["report"]
        assert [f["path"] for f in report["failed"]] == ["bad.jsonl"]
        assert "NaN or Infinity" in report["failed"][0]["reason"]
        assert "jsonb" not in resp.text.lower() and "invalid input syntax" not in resp.text
        (tmp_path / "good.jsonl").write_bytes(good.replace(b'"g"', b'"g2"'))
        (tmp_path / "bad.jsonl").write_bytes(bad)
        result = CliRunner().invoke(cli_app, ["ingest", "acc_nan", str(tmp_path),
                                              "--no-progress"])
        assert result.exit_code == 1 and result.exception is None or isinstance(
            result.exception, SystemExit), result.output
        assert "failed:" in result.output and "bad.jsonl" in result.output
        assert "Traceback" not in result.output
    docs = {d.id for d in client.collection("acc_nan").documents()}
    assert docs == {"g2"}  # the CLI ingests activated; the uploads built inactive snapshots


def test_an_ingest_over_its_time_budget_stores_nothing(client: pgcite.Client,
                                                        tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(json.dumps(DOCS[0]) + "\n")
    client.drop_collection("acc_budget", missing_ok=True)
    col = client.create_collection("acc_budget")
    with pytest.raises(pgcite.TimeBudgetExceeded, match="nothing was stored"):
        col.ingest([tmp_path / "a.jsonl"], time_budget_s=1e-6)
    assert col.snapshots() == []
    assert col.ingest([tmp_path / "a.jsonl"], time_budget_s=600).activated


def test_pgcite_mcp_over_stdio_answers_every_hostile_line(client: pgcite.Client,
                                                          diary: pgcite.Collection) -> None:
    """A raw client, as a hostile one writes: a lone surrogate escape (which the SDK's parser
    refuses, and used to drop unanswered, leaving the client waiting) gets an error answer."""
    import os
    import select
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", "from pgcite.cli import main; main()", "--database-url",
         client.db.url, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True, env={**os.environ})
    assert proc.stdin is not None and proc.stdout is not None

    def call(message: dict[str, Any]) -> dict[str, Any]:
        proc.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        while select.select([proc.stdout], [], [], 120)[0]:
            answer = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
            if answer.get("id") == message["id"]:
                return dict(answer)
        raise AssertionError(f"no answer to {message['id']} within 120 s")

    def search(call_id: int, query: str) -> dict[str, Any]:
        return call({"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": {
            "name": "search", "arguments": {"collection": diary.name, "query": query}}})

    try:
        call({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}})
        proc.stdin.write(json.dumps({"jsonrpc": "2.0",
                                     "method": "notifications/initialized"}) + "\n")
        surrogate = search(1, "fire \ud800")
        assert "lone surrogate" in surrogate["error"]["message"], surrogate
        nul = search(2, "fi\x00re")["result"]
        assert nul["isError"] and "NUL" in nul["content"][0]["text"]
        assert not search(3, "fire")["result"]["isError"]  # and it still serves
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
