"""Re-ingest never changes a document silently: stored attributes stay unless the user changes
them explicitly."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import pgcite
from pgcite.cli import app
from pgcite.config import Settings
from pgcite.ingest._loaders import FieldMapping, Overrides
from pgcite.service import ServiceConfig, create_app, create_key

from .test_ingest_dates import dated_pdf

D = dt.date

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
        (hit,) = col.search("harbour", mode="keyword", filters={"cutoff": "1666-09-30"}).hits
        assert hit.date_end is not None and hit.date_end.isoformat() == "1666-09-30"
    finally:
        client.drop_collection("reingest_date")


# --- provenance: what the user gave stays, what a file says never replaces it ------------------


def human(*args: str) -> str:
    result = runner.invoke(app, ["ingest", *args, "--no-progress"])
    assert result.exit_code == 0, result.output
    return result.output


def by_document(col: pgcite.Collection, query: str, **filters: Any) -> dict[str, Any]:
    col.client.active_pointers().invalidate(col.name)
    hits = col.search(query, mode="keyword", top_k=50, filters=filters or None).hits
    return {h.document_id: h for h in hits}


def test_walkthrough_reingest_without_the_catalogue_changes_nothing(
        cli_env: None, client: pgcite.Client, tmp_path: Path) -> None:
    """Issue 35's walk-through: a PDF dated and titled by the catalogue keeps both when the
    ingest is re-run without it, although the PDF has a creation date and a title of its own."""
    folder = tmp_path / "archive"
    folder.mkdir()
    (folder / "notes.md").write_text(
        "---\ntitle: Field notes\ndate: 1851-05-02\n---\n# Arthington valley\n\n"
        "Hartley walked the valley and counted the instruments.\n")
    (folder / "scan.pdf").write_bytes(
        dated_pdf("Inventory of the instruments Hartley lent.", "D:20261203120000Z",
                  title="Scan 0042"))
    catalogue = tmp_path / "catalogue.csv"
    catalogue.write_text("file,date,title\nscan.pdf,1851-05-02,Inventory\n")
    col = client.create_collection("reingest_walk")
    try:
        first = ingest(col.name, str(folder), "--catalogue", str(catalogue))
        assert first["snapshot_id"] is not None and first["changes"] == []
        docs = by_document(col, "instruments", cutoff="1851-12-31")
        assert docs["scan-pdf"].title == "Inventory"
        assert docs["scan-pdf"].date_start == dt.date(1851, 5, 2)
        again = ingest(col.name, str(folder))
        assert again["snapshot_id"] is None and again["unchanged"] == 2
        assert again["new_versions"] == 0 and again["changes"] == []
        out = human(col.name, str(folder))
        assert "nothing changed" in out and "\nchanged:" not in out
        assert set(by_document(col, "instruments", cutoff="1851-12-31")) == {"scan-pdf",
                                                                             "notes-md"}
        # the user's word changes it, and the report says what and from where
        catalogue.write_text("file,date,title\nscan.pdf,1851-06-01,Inventory\n")
        out = human(col.name, str(folder), "--catalogue", str(catalogue))
        assert "changed: scan-pdf: date 1851-05-02 -> 1851-06-01 (catalogue)" in out
        assert by_document(col, "instruments")["scan-pdf"].date_start == dt.date(1851, 6, 1)
        catalogue.write_text("file,date,title\nscan.pdf,1851-06,Inventory of instruments\n")
        report = ingest(col.name, str(folder), "--catalogue", str(catalogue))
        assert report["changes"] == [
            {"document_id": "scan-pdf", "field": "date", "old": "1851-06-01",
             "new": "1851-06-01/1851-06-30", "source": "catalogue"},
            {"document_id": "scan-pdf", "field": "title", "old": "Inventory",
             "new": "Inventory of instruments", "source": "catalogue"}]
    finally:
        client.drop_collection("reingest_walk")


def test_a_flag_stays_over_what_the_file_says(client: pgcite.Client, tmp_path: Path) -> None:
    path = tmp_path / "letter.md"
    path.write_text("---\ncorpus: B\nauthor: Front\n---\nThe harbour ships.\n")
    col = client.create_collection("reingest_flag_file")
    try:
        report = col.ingest([path], overrides=Overrides(corpus="A", author=""))
        assert report.activated
        assert (by_document(col, "harbour")["letter-md"].corpus, by_document(
            col, "harbour")["letter-md"].author) == ("A", None)
        again = col.ingest([path])  # the front matter says B and Front: the user said A, none
        assert again.snapshot_id is None and again.changes == []
        report = col.ingest([path], overrides=Overrides(corpus="C"))
        assert [(c.field, c.old, c.new, c.source) for c in report.changes] == [
            ("corpus", "A", "C", "flag")]
    finally:
        client.drop_collection("reingest_flag_file")


def test_a_mapped_key_stays_over_the_record_s_own(client: pgcite.Client,
                                                   tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps({"_id": "r1", "text": "Harbour ships.", "label": "Chosen",
                                "title": "Own title"}) + "\n")
    col = client.create_collection("reingest_map_sticks")
    try:
        assert col.ingest([path], mapping=FieldMapping(title="label")).activated
        assert by_document(col, "harbour")["r1"].title == "Chosen"
        again = col.ingest([path])  # the default key 'title' says "Own title"
        assert again.snapshot_id is None and again.changes == []
        assert by_document(col, "harbour")["r1"].title == "Chosen"
    finally:
        client.drop_collection("reingest_map_sticks")


def test_what_a_file_says_follows_the_file(client: pgcite.Client, tmp_path: Path) -> None:
    """Front matter, JSONL keys and PDF metadata are re-read: an edit there is a change, listed
    with its old and new value; a value a higher source gave before is not replaced."""
    folder = tmp_path / "files"
    folder.mkdir()
    md, records, pdf = folder / "a.md", folder / "r.jsonl", folder / "p.pdf"
    md.write_text("---\ndate: 1666-09-02\n---\nHarbour ships one.\n")
    records.write_text(json.dumps({"_id": "r", "text": "Harbour ships two.",
                                   "date": "1666-09-03"}) + "\n")
    pdf.write_bytes(dated_pdf("Harbour ships three.", "D:20260101000000Z", xmp=D(1666, 9, 4)))
    col = client.create_collection("reingest_file_values")
    try:
        assert col.ingest([folder]).activated
        md.write_text("---\ndate: 1666-10-02\n---\nHarbour ships one.\n")
        records.write_text(json.dumps({"_id": "r", "text": "Harbour ships two.",
                                       "date": "1666-10-03"}) + "\n")
        pdf.write_bytes(dated_pdf("Harbour ships three.", "D:20260101000000Z",
                                  xmp=D(1666, 10, 4)))
        report = col.ingest([folder])
        assert sorted((c.document_id, c.field, c.old, c.new, c.source)
                      for c in report.changes) == [
            ("a-md", "date", "1666-09-02", "1666-10-02", "file"),
            ("p-pdf", "date", "1666-09-04", "1666-10-04", "file"),
            ("r", "date", "1666-09-03", "1666-10-03", "file")]
    finally:
        client.drop_collection("reingest_file_values")


def test_a_name_date_stays_until_the_file_dates_itself(
        client: pgcite.Client, tmp_path: Path) -> None:
    path = tmp_path / "1666-09-02-letter.txt"
    path.write_text("Harbour ships at anchor.")
    col = client.create_collection("reingest_names")
    try:
        assert col.ingest([path], dates_from_names=True).activated
        again = col.ingest([path])  # this run reads no date at all: the stored one stays
        assert again.snapshot_id is None and again.undated == 0
        path.write_text("---\ndate: 1666-09-05\n---\nHarbour ships at anchor.\n")
        report = col.ingest([path], dates_from_names=True)  # the file's own date wins
        assert [(c.field, c.old, c.new, c.source) for c in report.changes] == [
            ("date", "1666-09-02", "1666-09-05", "file")]
    finally:
        client.drop_collection("reingest_names")


def test_upload_response_lists_changes(client: pgcite.Client, tmp_path: Path) -> None:
    client.create_collection("reingest_http")
    with client.db.transaction() as conn:
        token = create_key(conn, "reingest_http", "admin").token
    headers = {"Authorization": f"Bearer {token}"}
    record = json.dumps({"_id": "w", "text": "Whales in the harbour.", "date": "1700"}) + "\n"
    url = "/v1/collections/reingest_http/documents"
    # one event loop for every request, as a server has: without the lifespan each request
    # ran on a loop of its own, and the async pool one of them opened hung another's shutdown
    api = TestClient(create_app(client=client, config=ServiceConfig(warm_up=False)))
    try:
        with api:
            first = api.post(url, headers=headers, data={"author": "Ann"},
                             files={"files": ("w.jsonl", record)})
            assert first.status_code == 201, first.text
            api.post(f"/v1/collections/reingest_http/snapshots/{first.json()['snapshotId']}/activate",
                     headers=headers).raise_for_status()
            second = api.post(url, headers=headers, data={"author": "Bob"},
                              files={"files": ("w.jsonl", record)})
            assert second.status_code == 201, second.text
            assert second.json()["report"]["changes"] == [{
                "document_id": "w", "field": "author", "old": "Ann", "new": "Bob", "source": "flag"}]
    finally:
        client.drop_collection("reingest_http")
