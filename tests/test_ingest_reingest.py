"""Re-ingest never changes a document silently: stored attributes stay unless the user changes
them explicitly."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import pgcite
from pgcite.cli import app
from pgcite.config import Settings
from pgcite.ingest._loaders import FieldMapping, Overrides

runner = CliRunner()


@pytest.fixture()
def cli_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)


def ingest(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["ingest", *args, "--no-progress", "--json"])
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.output)
    return report


def attributes(col: pgcite.Collection) -> dict[str, tuple[Any, ...]]:
    # The CLI ingested through its own client: this one's cached active pointer may be stale.
    col.client.active_pointers().invalidate(col.name)
    hits = col.search("harbour ships", mode="keyword", top_k=50).hits
    return {h.id: (h.title, h.author, h.corpus, h.date_start, h.date_end, h.metadata)
            for h in hits}


def test_reingest_without_the_first_flags_changes_nothing(
        cli_env: None, client: pgcite.Client, tmp_path: Path) -> None:
    folder = tmp_path / "letters"
    folder.mkdir()
    (folder / "1666-09-02-a.txt").write_text("The harbour was full of ships.")
    (folder / "b.txt").write_text("Ships left the harbour at dawn.")
    (folder / "c.md").write_text("# Harbour\n\nShips and the harbour wall.")
    catalogue = tmp_path / "cat.csv"
    catalogue.write_text("file,date,title,shelfmark\nb.txt,1666-10,Letter B,MS 2\n")
    col = client.create_collection("reingest_flags")
    try:
        first = ingest(col.name, str(folder), "--corpus", "A", "--author", "Pepys",
                       "--catalogue", str(catalogue), "--dates-from-names")
        assert first["snapshot_id"] is not None and first["undated"] == 1  # c.md
        before = attributes(col)
        assert before["b-txt-a"][:5] == ("Letter B", "Pepys", "A", dt.date(1666, 10, 1),
                                         dt.date(1666, 10, 31))
        assert before["b-txt-a"][5] == {"shelfmark": "MS 2"}
        again = ingest(col.name, str(folder))
        assert again["snapshot_id"] is None and again["unchanged"] == 3
        assert again["new_versions"] == 0 and again["undated"] == 1
        assert attributes(col) == before
        # An explicit change is a change: a new corpus, and "" clears the author.
        changed = ingest(col.name, str(folder), "--corpus", "B", "--author", "")
        assert changed["snapshot_id"] is not None and changed["new_versions"] == 3
        after = attributes(col)
        assert {v[2] for v in after.values()} == {"B"} and {v[1] for v in after.values()} == {None}
        assert after["b-txt-a"][0] == "Letter B"  # what was not changed stays
    finally:
        client.drop_collection("reingest_flags")


def test_reingest_jsonl_keeps_titles_a_mapping_does_not_give(
        client: pgcite.Client, tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text(
        json.dumps({"_id": "r1", "text": "Harbour ships one.", "label": "First"}) + "\n"
        + json.dumps({"_id": "r2", "text": "Harbour ships two.", "label": "Second"}) + "\n")
    col = client.create_collection("reingest_map")
    try:
        assert col.ingest([path], mapping=FieldMapping(title="label")).activated
        path.write_text(
            json.dumps({"_id": "r1", "text": "Harbour ships one.", "label": "First",
                        "heading": "Renamed"}) + "\n"
            + json.dumps({"_id": "r2", "text": "Harbour ships two.", "label": "Second"}) + "\n")
        report = col.ingest([path], mapping=FieldMapping(title="heading"))
        assert not report.failed
        titles = {h.document_id: h.title for h in col.search("harbour ships", mode="keyword").hits}
        assert titles == {"r1": "Renamed", "r2": "Second"}  # r2 has no heading: keeps its title
        unmatched = col.ingest([path], mapping=FieldMapping(title="headline"))
        assert [f.reason for f in unmatched.failed] == [
            "--map title=headline: no record has a 'headline' key"]
        assert unmatched.snapshot_id is None
    finally:
        client.drop_collection("reingest_map")


def test_reingest_keeps_a_date_given_by_flag(client: pgcite.Client, tmp_path: Path) -> None:
    path = tmp_path / "note.txt"
    path.write_text("Harbour ships at anchor.")
    col = client.create_collection("reingest_date")
    try:
        assert col.ingest([path], overrides=Overrides(date="1666-09")).activated
        report = col.ingest([path])
        assert report.snapshot_id is None and report.undated == 0
        (hit,) = col.search("harbour", mode="keyword", cutoff="1666-09-30").hits
        assert hit.date_end is not None and hit.date_end.isoformat() == "1666-09-30"
    finally:
        client.drop_collection("reingest_date")
