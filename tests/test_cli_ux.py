"""What users expect of the command line: eval --strict failing CI, skipped stages said out
loud, the demo's data found (or refused before anything is created)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

import pgcite
from pgcite.cli import app
from pgcite.config import Settings

from .test_snapshots import write_golden

runner = CliRunner()


def cli(settings: Settings, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--data-dir", str(settings.data_dir), *args])
    return result.exit_code, result.stdout, result.stderr


def test_eval_strict_exits_1_naming_the_failed_floor(diary: pgcite.Collection,
                                                     settings: Settings,
                                                     tmp_path: Path) -> None:
    golden = str(write_golden(tmp_path))
    args = ("eval", diary.name, "--golden", golden, "--modes", "keyword", "--no-progress")
    # the house floors ask precision@10 >= 0.70: one relevant entry per query cannot reach it
    code, out, _ = cli(settings, *args)
    assert code == 0 and "keyword" in out  # without --strict, a report and exit 0
    code, out, err = cli(settings, *args, "--strict")
    assert code == 1 and "floors failed" in err and "keyword: precision@10 0." in err, err
    assert "keyword" in out  # the report is still printed
    code, out, err = cli(settings, *args, "--strict", "--json", "--floor", "precision@10=none",
                         "--floor", "recall@10=0.5", "--floor", "mrr@10=0.5",
                         "--floor", "pass_rate=0.5")
    assert code == 0, err
    assert json.loads(out)["configurations"]["keyword"] and "every floor met" in err
    code, _, err = cli(settings, *args, "--strict", "--floor", "ndcg@10=1")
    assert code == 1 and "ndcg@10" in err and "< floor 1.00" in err
    code, _, err = cli(settings, *args, "--strict", "--floor", "recall=2")
    assert code == 2 and "bad floor" in err and "Traceback" not in err


def test_a_stage_asked_for_but_skipped_says_so(diary: pgcite.Collection, settings: Settings,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("PGCITE_LLM", "PGCITE_LLM_BASE_URL", "PGCITE_RERANKER"):
        monkeypatch.delenv(var, raising=False)
    # the router is on by default: a long question without names is not the keyword route
    code, out, _ = cli(settings, "search", diary.name, "fire", "--hyde")
    assert code == 0 and "note: hyde skipped: no LLM configured" in out, out
    code, out, _ = cli(settings, "search", diary.name, "fire", "--hyde", "--no-route")
    assert code == 0 and "note: hyde skipped: no LLM configured" in out, out
    code, out, _ = cli(settings, "search", diary.name, "fire", "--rerank")
    assert "note: rerank skipped: no reranker configured" in out, out
    code, out, _ = cli(settings, "ask", diary.name, "What burned?", "--hyde", "--no-trace")
    assert code == 0 and "note: hyde skipped: no LLM configured" in out, out


def test_demo_refuses_missing_data_before_creating_anything(client: pgcite.Client,
                                                            settings: Settings,
                                                            tmp_path: Path) -> None:
    for args in (["--full", "--data", str(tmp_path / "nowhere")],
                 ["--source", str(tmp_path / "missing.jsonl")]):
        code, out, err = cli(settings, "demo", "--collection", "demo_missing", *args)
        assert code == 1 and "nothing was created" in err and "Traceback" not in out + err
        assert "demo_missing" not in {c.name for c in client.collections()}


def test_demo_finds_the_full_diary_from_anywhere(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    from pgcite.cli._demo import full_diary

    repo = Path(__file__).resolve().parents[1]
    if not (repo.parent / "shared/data/pepys-diary/entries.jsonl").is_file():
        pytest.skip("no shared/data beside this checkout")
    monkeypatch.chdir(tmp_path)  # not the repository root: found from the package's checkout
    found = full_diary(None)
    assert found.is_file() and found.parts[-4:] == ("shared", "data", "pepys-diary",
                                                    "entries.jsonl")
    assert full_diary(found.parent) == found  # --data takes the folder or the file


def test_demo_says_where_it_stored_data_and_what_to_try(client: pgcite.Client,
                                                        settings: Settings) -> None:
    from .conftest import DIARY

    code, out, err = cli(settings, "demo", "--collection", "demo_small", "--source", str(DIARY))
    try:
        assert code == 0, out + err
        assert f"stored in {settings.data_dir}" in out.replace("\n", "")
        assert "pgcite documents list demo_small" in out and "pgcite ask demo_small" in out
        code, out, _ = cli(settings, "demo", "--collection", "demo_small", "--source",
                           str(DIARY), "--json")
        assert code == 0 and len(json.loads(out)["next"]) == 3
    finally:
        client.drop_collection("demo_small", missing_ok=True)


def test_one_json_casing_for_search_ask_and_http(diary: pgcite.Collection, client: pgcite.Client,
                                                 settings: Settings) -> None:
    from fastapi.testclient import TestClient

    from pgcite.service import ServiceConfig, create_app

    code, out, _ = cli(settings, "search", diary.name, "cheese", "--json")
    cli_search = json.loads(out)
    code, out, _ = cli(settings, "ask", diary.name, "Where was the cheese buried?", "--json")
    cli_answer = json.loads(out)
    app = create_app(client=client, config=ServiceConfig(warm_up=False, auth=False))
    with TestClient(app) as api:
        url = f"/v1/collections/{diary.name}"
        http_search = api.post(f"{url}/search", json={"query": "cheese"}).json()
        http_answer = api.post(f"{url}/answer",
                               json={"question": "Where was the cheese buried?"}).json()
    # the same names for the same things: the CLI prints every HTTP field (and a few more)
    assert set(http_search) <= set(cli_search) and "snapshotId" in cli_search
    assert set(http_search["hits"][0]) <= set(cli_search["hits"][0])
    assert {"documentId", "timingsMs", "embeddingModel"} <= set(cli_search["hits"][0]) | set(
        cli_search)
    assert set(http_answer) == set(cli_answer) and "snapshotId" in cli_answer
    assert not [k for k in [*cli_search, *cli_search["hits"][0], *cli_answer] if "_" in k]


FILLER = ("Up early and to the office, where all the morning busy with accounts and letters "
          "to my Lord and the Duke. ") * 6


def test_snippets_highlight_the_matched_words(client: pgcite.Client, settings: Settings,
                                              tmp_path: Path) -> None:
    source = tmp_path / "long.jsonl"
    source.write_text(json.dumps({"_id": "long-1", "date": "1666-09-05", "text": FILLER + (
        "At night the fires still burned, and I buried my Parmazan cheese in the garden.")})
        + "\n" + json.dumps({"_id": "other-1", "date": "1666-09-06",
                             "text": "A quiet day at home with my wife."}) + "\n")
    col = client.create_collection("snippet_ux")
    try:
        assert col.ingest([source]).activated
        hit = col.search("Where did he bury the cheese during the fire?", top_k=1).hits[0]
        assert hit.snippet is not None and len(hit.snippet) < len(hit.body)
        marked = [hit.snippet[a:b].lower() for a, b in hit.highlights]
        # stemmed by the collection's text-search config: "fires" and "buried" match too
        assert {"fires", "buried", "cheese"} <= set(marked), marked
        assert "Parmazan cheese" in hit.snippet  # a window around the match, not the opening
        code, out, _ = cli(settings, "search", col.name, "cheese fire", "--json")
        top = json.loads(out)["hits"][0]
        assert [top["snippet"][a:b] for a, b in top["highlights"]] == ["fires", "cheese"]
        code, out, _ = cli(settings, "search", col.name, "Parmazan cheese")
        assert code == 0 and "Parmazan cheese in the garden" in out.replace("\n", " ")
        assert col.search("cheese", snippets=False).hits[0].snippet is None
    finally:
        client.drop_collection(col.name)


def test_only_the_first_hits_get_snippets_unless_asked(client: pgcite.Client,
                                                       tmp_path: Path) -> None:
    """A snippet parses the whole passage: the first DEFAULT_SNIPPETS hits get one by default,
    True gives every hit one, a number that many, False none -- in Python, async and HTTP."""
    import asyncio

    from fastapi.testclient import TestClient

    from pgcite.retrieve import DEFAULT_SNIPPETS
    from pgcite.service import ServiceConfig, create_app, create_key

    source = tmp_path / "many.jsonl"
    source.write_text("".join(json.dumps({"_id": f"fire-{i}", "date": "1666-09-05",
                                          "text": f"Entry {i}: the fire burned all night."})
                              + "\n" for i in range(14)))
    col = client.create_collection("snippet_limit")
    try:
        assert col.ingest([source]).activated

        def marked(result: pgcite.SearchResult) -> list[bool]:
            return [h.snippet is not None for h in result.hits]
        default = col.search("fire", mode="keyword", top_k=14)
        assert marked(default) == [True] * DEFAULT_SNIPPETS + [False] * (14 - DEFAULT_SNIPPETS)
        assert all(marked(col.search("fire", mode="keyword", top_k=14, snippets=True)))
        assert marked(col.search("fire", mode="keyword", top_k=14, snippets=3)) == (
            [True] * 3 + [False] * 11)
        assert not any(marked(col.search("fire", mode="keyword", top_k=14, snippets=False)))

        async def asynchronous() -> list[bool]:
            async with await pgcite.connect_async(client.db.url) as aclient:
                acol = await aclient.collection(col.name)
                return marked(await acol.search("fire", mode="keyword", top_k=14))
        assert asyncio.run(asynchronous()) == marked(default)
        with client.db.transaction() as conn:
            token = create_key(conn, col.name, "reader").token
        app = create_app(client=client, config=ServiceConfig(warm_up=False))
        with TestClient(app) as api:
            def http(**extra: object) -> list[bool]:
                resp = api.post(f"/v1/collections/{col.name}/search", headers={
                    "Authorization": f"Bearer {token}"}, json={
                    "query": "fire", "mode": "keyword", "top_k": 14, **extra})
                assert resp.status_code == 200, resp.text
                return [h["snippet"] is not None for h in resp.json()["hits"]]
            assert http() == marked(default)
            assert all(http(snippets=True)) and http(snippets=2) == [True] * 2 + [False] * 12
            assert api.post(f"/v1/collections/{col.name}/search", headers={
                "Authorization": f"Bearer {token}"}, json={
                "query": "fire", "snippets": -1}).status_code == 422
    finally:
        client.drop_collection(col.name)


def test_unmark_gives_plain_text_and_spans() -> None:
    from pgcite.retrieve._snippets import unmark

    text, spans = unmark("the \ue000fire\ue001 and \ue000cheese\ue001.")
    assert text == "the fire and cheese." and spans == [(4, 8), (13, 19)]
    assert unmark("no match") == ("no match", [])


@given(st.lists(st.sampled_from(["a", "bc", " ", "é", "\ue000", "\ue001"]), max_size=30))
def test_unmark_matches_a_scan_of_every_character(parts: list[str]) -> None:
    from pgcite.retrieve._snippets import unmark

    marked = "".join(parts)
    text: list[str] = []
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for char in marked:  # the reference: what unmark did before it split at the markers
        if char == "\ue000":
            start = len(text)
        elif char == "\ue001":
            if start is not None and len(text) > start:
                spans.append((start, len(text)))
            start = None
        else:
            text.append(char)
    assert unmark(marked) == ("".join(text), spans)
