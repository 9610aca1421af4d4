"""The command line as a new user meets it: clear one-line errors, non-zero exits, nothing lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import pgcite
from pgcite.cli import app
from pgcite.config import Settings

from .conftest import DIARY, FIXTURES

runner = CliRunner()


@pytest.fixture()
def cli_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def test_help_lists_commands() -> None:
    code, out = run("--help")
    assert code == 0
    for command in ("collection", "ingest", "search", "eval", "demo"):
        assert command in out


@pytest.mark.parametrize("name", ['bad"name', "has space", "Upper"])
def test_bad_collection_name(cli_env: None, name: str) -> None:
    code, out = run("collection", "create", name)
    assert code == 2 and "invalid collection name" in out


def test_unknown_collection(cli_env: None) -> None:
    code, out = run("search", "no_such_collection", "fire")
    assert code == 1 and "no collection named 'no_such_collection'" in out


def test_ingest_errors_change_nothing(cli_env: None, client: pgcite.Client) -> None:
    code, _ = run("collection", "create", "cli_bad", "--json")
    assert code == 0
    assert run("ingest", "cli_bad", str(DIARY), "--no-progress")[0] == 0
    col = client.collection("cli_bad")
    before = (col.active_snapshot().snapshot_id, col.stats()["stored"])
    for path, message in [
        (FIXTURES / "missing.jsonl", "no such file or directory"),
        (FIXTURES / "sources" / "corrupt.pdf", "not a readable PDF"),
        (FIXTURES / "diary" / "bad.jsonl", "line 2: not valid JSON"),
    ]:
        code, out = run("ingest", "cli_bad", str(path), "--no-progress")
        assert code == 1 and message in out, out
        assert (col.active_snapshot().snapshot_id, col.stats()["stored"]) == before
    code, out = run("collection", "drop", "cli_bad", "--yes")
    assert code == 0


def test_search_json_and_bad_filter(cli_env: None, diary: pgcite.Collection) -> None:
    code, out = run("search", diary.name, "cheese", "--json", "--cutoff", "1666-12-31")
    assert code == 0
    payload = json.loads(out)
    assert payload["hits"] and all(h["dateEnd"] <= "1666-12-31" for h in payload["hits"])
    code, out = run("search", diary.name, "cheese", "--filter", "yeer=1666")
    assert code == 2 and "unknown metadata field 'yeer'" in out
    code, out = run("search", diary.name, "cheese", "--filter", "year>=1666", "--json")
    assert code == 0 and all(h["metadata"]["year"] >= 1666 for h in json.loads(out)["hits"])


def test_unreachable_database_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGCITE_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    code, out = run("collection", "list")
    assert code == 1 and "cannot connect" in out


def test_search_defaults_per_collection(cli_env: None, client: pgcite.Client) -> None:
    assert run("collection", "create", "cli_weights")[0] == 0
    assert run("ingest", "cli_weights", str(DIARY), "--no-progress")[0] == 0
    code, out = run("collection", "set", "cli_weights", "--fusion", "rrf", "--weights", "2,1")
    assert code == 0, out
    col = client.collection("cli_weights")
    assert (col.info.settings.fusion, col.info.settings.weights) == ("rrf", (2.0, 1.0))
    result = col.search("the plague in London", explain=True, stages={"route": False})
    for hit in [*result.hits, *result.dropped]:  # the collection's RRF with 2:1 weights
        parts = [(2.0, hit.keyword_rank), (1.0, hit.vector_rank)]
        assert hit.score == pytest.approx(sum(w / (60 + r) for w, r in parts if r))
    # a few bare terms: keyword-heavy (the entity boost, which would multiply the fused
    # scores of passages naming London, off)
    routed = col.search("the plague in London", explain=True, stages={"entity_boost": 0})
    assert routed.stages[0].detail.startswith("keyword")
    for hit in [*routed.hits, *routed.dropped]:  # the route tilts 2:1 by 0.8:0.2
        parts = [(2.0 * 0.8, hit.keyword_rank), (1.0 * 0.2, hit.vector_rank)]
        assert hit.score == pytest.approx(sum(w / (60 + r) for w, r in parts if r))
    assert run("collection", "set", "cli_weights", "--term-depth", "1")[0] == 0
    shallow = client.collection("cli_weights").search("the fire in the city", mode="keyword",
                                                       top_k=50)
    assert 0 < len(shallow.hits) <= 2  # one posting per query term counts
    assert run("collection", "set", "cli_weights", "--term-depth", "0")[0] == 0
    assert client.collection("cli_weights").info.settings.term_depth is None
    code, out = run("collection", "set", "cli_weights", "--weights", "-1,1")
    assert code == 2 and "invalid setting weights" in out
    code, out = run("collection", "set", "cli_weights", "--weights", "abc")
    assert code == 2 and "cannot read weights" in out
    assert run("collection", "drop", "cli_weights", "--yes")[0] == 0


@pytest.mark.parametrize(("var", "value"), [("PGCITE_LLM_CONCURRENCY", "0"),
                                            ("PGCITE_LLM_TIMEOUT_S", "soon")])
def test_bad_setting_in_the_environment_is_one_line(
        cli_env: None, monkeypatch: pytest.MonkeyPatch, var: str, value: str) -> None:
    monkeypatch.setenv(var, value)
    code, out = run("collection", "list")
    assert code == 2 and f"{var}='{value}'" in out and "Traceback" not in out, out


def test_collection_optimize(cli_env: None, client: pgcite.Client, tmp_path: Path) -> None:
    """Two ingests make two segments; a full optimize merges them into one, reported in
    camelCase JSON; an unknown snapshot is a one-line error."""
    col = client.create_collection("cli_optimize")
    try:
        lines = DIARY.read_text().splitlines()
        for i, part in enumerate((lines[:4], lines[4:8])):
            (tmp_path / f"{i}.jsonl").write_text("\n".join(part) + "\n")
            col.ingest([tmp_path / f"{i}.jsonl"])
        code, out = run("collection", "optimize", "cli_optimize", "--full", "--json")
        assert code == 0, out
        report = json.loads(out)
        assert (report["segmentsBefore"], report["segmentsAfter"], report["merges"]) == (2, 1, 1)
        code, out = run("collection", "optimize", "cli_optimize", "--snapshot", "999")
        assert code == 1 and "no snapshot 999" in out and "Traceback" not in out
    finally:
        client.drop_collection("cli_optimize")
