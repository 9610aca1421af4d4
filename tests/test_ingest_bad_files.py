"""A bad file costs only itself: content that decodes but cannot be stored (a NUL, a lone
surrogate, JSON nested 100,000 deep) is reported by name and line, the run's good files are
ingested -- through the loaders, the Python API, the CLI and the HTTP upload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import pgcite
from pgcite._errors import LoadError
from pgcite.cli import app
from pgcite.config import Settings
from pgcite.ingest import iter_documents
from pgcite.service import ServiceConfig, create_app, create_key

DEEP = '{"_id": "d", "text": "deep", "m": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
GOOD = '{"_id": "good-1", "text": "The harbour master counted the ships at dawn."}\n'

# file name, content, the reason reported (after the file name)
BAD_FILES: list[tuple[str, bytes, str]] = [
    ("nul.jsonl", (GOOD.replace("good-1", "n1") + '{"_id": "n2", "text": "a\\u0000b"}\n').encode(),
     "line 2: text contains a NUL character (U+0000), which PostgreSQL cannot store"),
    ("nul.txt", b"first line\nsecond \x00 line\n",
     "line 2: contains a NUL byte, which PostgreSQL cannot store"),
    ("surrogate.jsonl", b'{"_id": "s", "text": "half a pair: \\ud800"}\n',
     "line 1: text contains a lone surrogate (U+D800), which is not valid Unicode"),
    ("deep.jsonl", DEEP.encode(), "line 1: JSON nested too deep"),
    ("deepish.jsonl", ('{"_id": "d", "text": "t", "m": ' + "[" * 100 + "]" * 100 + "}\n").encode(),
     "line 1: metadata nested deeper than 64 levels"),
    ("nul-meta.jsonl", b'{"_id": "m", "text": "t", "note": {"k": "\\u0000"}}\n',
     "line 1: metadata contains a NUL character (U+0000), which PostgreSQL cannot store"),
    ("nul-front.md", b'---\nauthor: "a\\0b"\n---\nbody\n',
     "author contains a NUL character (U+0000), which PostgreSQL cannot store"),
]
IDS = [name for name, _, _ in BAD_FILES]


def _folder(tmp_path: Path, name: str, content: bytes) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "a-good.jsonl").write_text(GOOD)
    (folder / name).write_bytes(content)
    (folder / "z-good.txt").write_text("The ships left the harbour at noon.")
    return folder


@pytest.mark.parametrize(("name", "content", "reason"), BAD_FILES, ids=IDS)
def test_loader_reports_the_bad_file_and_reads_the_rest(
        tmp_path: Path, name: str, content: bytes, reason: str) -> None:
    items = list(iter_documents([_folder(tmp_path, name, content)]))
    errors = [i for i in items if isinstance(i, LoadError)]
    assert [(Path(e.path).name, e.reason) for e in errors] == [(name, reason)]
    assert sorted(i.document_id for i in items if not isinstance(i, LoadError)) == [
        "good-1", "z-good-txt"]


@pytest.mark.parametrize(("name", "content", "reason"), BAD_FILES[:4], ids=IDS[:4])
def test_python_api_ingests_the_good_files(
        client: pgcite.Client, tmp_path: Path, name: str, content: bytes, reason: str) -> None:
    col = client.create_collection("bad_api")
    try:
        report = col.ingest([_folder(tmp_path, name, content)])
        assert [(Path(f.path).name, f.reason) for f in report.failed] == [(name, reason)]
        assert report.activated and report.documents == 2
        hits = col.search("ships harbour", mode="keyword").hits
        assert {h.document_id for h in hits} == {"good-1", "z-good-txt"}
    finally:
        client.drop_collection("bad_api")


@pytest.fixture()
def cli_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)


@pytest.mark.parametrize(("name", "content", "reason"), BAD_FILES[:4], ids=IDS[:4])
def test_cli_one_line_per_bad_file_exit_1_good_files_in(
        cli_env: None, client: pgcite.Client, tmp_path: Path, name: str, content: bytes,
        reason: str) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["collection", "create", "bad_cli"]).exit_code == 0
    try:
        folder = _folder(tmp_path, name, content)
        result = runner.invoke(app, ["ingest", "bad_cli", str(folder), "--no-progress"])
        assert result.exit_code == 1, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
        failed = [line for line in result.output.splitlines() if line.startswith("failed:")]
        assert failed == [f"failed: {folder / name}: {reason}"]
        assert "Traceback" not in result.output
        assert "2 documents" in result.output
        assert ("2 of 2 documents have undated passages: a --cutoff search leaves those out"
                in result.output)
        assert "2 of 2 documents have no author: answers name no writer" in result.output
        client.active_pointers().invalidate("bad_cli")  # the CLI ingested through its own client
        hits = client.collection("bad_cli").search("ships harbour", mode="keyword").hits
        assert {h.document_id for h in hits} == {"good-1", "z-good-txt"}
    finally:
        client.drop_collection("bad_cli")


def test_http_upload_of_bad_files_is_a_report_or_400_never_500(client: pgcite.Client) -> None:
    col = client.create_collection("bad_http")
    with client.db.transaction() as conn:
        headers = {"X-API-Key": create_key(conn, col.name, "admin").token}
    url = f"/v1/collections/{col.name}/documents"
    try:
        with TestClient(create_app(client=client, config=ServiceConfig(warm_up=False))) as api:
            only_bad = api.post(url, headers=headers, files=[
                ("files", ("nul.jsonl", BAD_FILES[0][1])), ("files", ("deep.jsonl", DEEP))])
            assert only_bad.status_code == 400, only_bad.text
            detail = json.dumps(only_bad.json())
            assert "nul.jsonl: line 2: text contains a NUL" in detail
            assert "deep.jsonl: line 1: JSON nested too deep" in detail
            mixed = api.post(url, headers=headers, files=[
                ("files", ("good.jsonl", GOOD)), ("files", ("surrogate.jsonl", BAD_FILES[2][1]))])
            assert mixed.status_code == 201, mixed.text
            report = mixed.json()["report"]
            assert report["documents"] == 1
            assert [f["path"] for f in report["failed"]] == ["surrogate.jsonl"]
    finally:
        client.drop_collection("bad_http")
