"""Dates in every format: front matter (md/txt), <meta>/<time> (HTML), PDF metadata, a sidecar
catalogue, --date, dates in file names; partial dates and ranges; their precedence; the undated
count; and a cutoff search over all of it."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pypdf import PdfReader, PdfWriter
from pypdf.xmp import XmpInformation
from typer.testing import CliRunner

import pgcite
from pgcite._errors import ConfigError, LoadError
from pgcite._types import Document
from pgcite.cli import app
from pgcite.config import Settings
from pgcite.ingest._catalogue import Catalogue
from pgcite.ingest._dates import DateError, date_in_name, parse_dates
from pgcite.ingest._loaders import FieldMapping, Overrides, iter_documents
from pgcite.service import ServiceConfig, create_app, create_key

from .test_loaders import make_pdf

D = dt.date


def dated_pdf(text: str, creation: str, xmp: dt.date | None = None,
              title: str | None = None) -> bytes:
    """A PDF made (``creation``, as a scan is made today) with an XMP ``dc:date`` (the date an
    archive gives the text) and an information-dictionary title, if given."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf([text]))))
    writer.add_metadata({"/CreationDate": creation, "/Author": "The Navy Board",
                         **({"/Title": title} if title else {})})
    if xmp is not None:
        info = XmpInformation.create()
        info.dc_date = [dt.datetime(xmp.year, xmp.month, xmp.day)]
        writer.xmp_metadata = info
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def archive(root: Path) -> Path:
    """One folder, every format, each dated its own way (and one file dated by nothing)."""
    folder = root / "archive"
    folder.mkdir()
    (folder / "letter.md").write_text(
        "---\ntitle: Letter to Coventry\ndate: 1666-09-02\nauthor: Samuel Pepys\n"
        "tags: [fire, navy]\n---\n# Letter\n\nThe fire at the navy office, ships and tar.\n")
    (folder / "page.html").write_text(
        '<html><head><meta name="date" content="1666-09-10T08:00:00">'
        "<title>Navy accounts</title></head>"
        "<body><p>The navy accounts: ships, tar and the fire.</p></body></html>")
    (folder / "note.txt").write_text("A note on the navy: ships, tar, the fire and the rebuilding.")
    (folder / "late.txt").write_text("A later note on the navy: ships, tar, the fire, the plague.")
    (folder / "loose.txt").write_text("An undated note on the navy: ships, tar and the fire.")
    (folder / "report.pdf").write_bytes(  # scanned in 2026: the XMP date dates it
        dated_pdf("Navy report: ships, tar and the fire.", "D:20261203120000Z",
                  xmp=D(1666, 9, 20)))
    (folder / "1666-08-letter.md").write_text("Navy letter: ships, tar and fire, in August.")
    (root / "catalogue.csv").write_text(
        "file,date,author,corpus,shelfmark\n"
        "note.txt,1666-10,Samuel Pepys,B,MS 1\n"
        "late.txt,1667-03-01/1667-03-04,,B,MS 2\n"
        "missing.txt,1666,,,\n")
    return folder


def test_cutoff_search_over_every_format(client: pgcite.Client, tmp_path: Path) -> None:
    folder = archive(tmp_path)
    col = client.create_collection("dated_formats")
    try:
        report = col.ingest([folder], catalogue=tmp_path / "catalogue.csv",
                            dates_from_names=True)
        assert not report.failed and report.documents == 7
        assert report.undated == 1  # loose.txt
        assert report.warnings == [
            f"catalogue {(tmp_path / 'catalogue.csv').resolve()}: no file matches 'missing.txt'"]
        every = col.search("navy ships tar fire", mode="keyword", top_k=20).hits
        assert len({h.document_id for h in every}) == 7
        hits = col.search("navy ships tar fire", mode="keyword", top_k=20,
                          filters={"cutoff": "1666-09-30"}).hits
        by_doc = {h.document_id: (h.date_start, h.date_end) for h in hits}
        assert by_doc == {
            "letter-md": (D(1666, 9, 2), D(1666, 9, 2)),  # front matter
            "page-html": (D(1666, 9, 10), D(1666, 9, 10)),  # <meta name=date>
            "report-pdf": (D(1666, 9, 20), D(1666, 9, 20)),  # XMP dc:date, not the creation date
            "1666-08-letter-md": (D(1666, 8, 1), D(1666, 8, 31)),  # file name, a month
        }
        october = col.search("navy ships tar fire", mode="keyword", top_k=20,
                             filters={"cutoff": "1666-10-31"}).hits
        assert {h.document_id for h in october} == set(by_doc) | {"note-txt"}  # sidecar
        note = next(h for h in october if h.document_id == "note-txt")
        assert (note.author, note.corpus, note.metadata["shelfmark"]) == ("Samuel Pepys", "B",
                                                                          "MS 1")
        letter = next(h for h in hits if h.document_id == "letter-md")
        assert letter.author == "Samuel Pepys" and letter.metadata["tags"] == ["fire", "navy"]
    finally:
        client.drop_collection("dated_formats")


# --- parsing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [
    ("1666-09-02", (D(1666, 9, 2), D(1666, 9, 2))),
    ("1666-09", (D(1666, 9, 1), D(1666, 9, 30))),
    ("1666-02", (D(1666, 2, 1), D(1666, 2, 28))),
    ("1666", (D(1666, 1, 1), D(1666, 12, 31))),
    (1666, (D(1666, 1, 1), D(1666, 12, 31))),
    ("1666-09-02T10:00:00Z", (D(1666, 9, 2), D(1666, 9, 2))),
    ("1666-09-02/1666-09-05", (D(1666, 9, 2), D(1666, 9, 5))),
    ("1666/1667-03", (D(1666, 1, 1), D(1667, 3, 31))),
    (D(1666, 9, 2), (D(1666, 9, 2), D(1666, 9, 2))),
    ("", None),
    (None, None),
])
def test_parse_dates(value: object, expected: object) -> None:
    assert parse_dates(value) == expected


@pytest.mark.parametrize("value", ["12/09/1666", "1666-13", "1666-02-30", 20240501, True,
                                   "1666-09-05/1666-09-01", "Sept 1666"])
def test_parse_dates_rejects(value: object) -> None:
    with pytest.raises(DateError):
        parse_dates(value)


@pytest.mark.parametrize(("name", "expected"), [
    ("1666-09-02-letter.md", (D(1666, 9, 2), D(1666, 9, 2))),
    ("1666_09 letter.txt", (D(1666, 9, 1), D(1666, 9, 30))),
    ("1666.md", (D(1666, 1, 1), D(1666, 12, 31))),
    ("letter-1666.md", None),
    ("16660902.md", None),
    ("2024-99-report.md", None),  # not a month: the name does not start with a date
])
def test_date_in_name(name: str, expected: object) -> None:
    assert date_in_name(name) == expected


# --- sources and precedence -----------------------------------------------------------------


def one(path: Path, **kwargs: object) -> Document:
    (item,) = list(iter_documents([path], **kwargs))  # type: ignore[arg-type]
    assert isinstance(item, Document), item
    return item


def dates_of(doc: Document) -> set[tuple[D | None, D | None]]:
    return {(u.date_start, u.date_end) for u in doc.units}


def test_front_matter_in_text_and_markdown(tmp_path: Path) -> None:
    txt = tmp_path / "a.txt"
    txt.write_text("---\ndate: 1666-09\ndate_end: 1666-10\ncorpus: A\n---\nBody text.\n")
    doc = one(txt)
    assert doc.units[0].text == "Body text."
    assert dates_of(doc) == {(D(1666, 9, 1), D(1666, 10, 31))} and doc.corpus == "A"
    md = tmp_path / "b.md"
    md.write_text("---\ntitle: From front matter\n---\nIntro.\n\n# Heading\n\nOne.\n\n"
                  "## Sub\n\nTwo.\n")
    doc = one(md)
    assert doc.title == "From front matter" and dates_of(doc) == {(None, None)}
    assert [u.title for u in doc.units] == ["From front matter", "Heading", "Heading > Sub"]
    rule = tmp_path / "c.md"  # a leading rule and prose, not YAML: left alone
    rule.write_text("---\nJust a line.\n---\nText.\n")
    assert one(rule).units[0].text.startswith("---")


@pytest.mark.parametrize(("front", "reason"), [
    ("date: 1666-02-30", "front matter: not a valid date (day is out of range"),
    ("date: '1666-02-30'", "front matter: bad date: not a valid date: 1666-02-30"),
    ("date: [1, 2", "front matter is not valid YAML"),
    ("a: &x [1]\nb: *x", "front matter: YAML aliases (*name) are not supported"),
    ("author: {name: x}", "front matter: 'author' must be text, got dict"),
    ("date_end: 1666", "front matter: date_end without a date"),
])
def test_bad_front_matter_fails_the_file(tmp_path: Path, front: str, reason: str) -> None:
    path = tmp_path / "bad.md"
    path.write_text(f"---\n{front}\n---\nText.\n")
    (error,) = list(iter_documents([path]))
    assert isinstance(error, LoadError) and error.reason.startswith(reason), error


def test_html_meta_and_time(tmp_path: Path) -> None:
    page = tmp_path / "p.html"
    page.write_text('<meta name="DC.date" content="1666-09"><meta name="author" content="SP">'
                    "<p>x</p>")
    doc = one(page)
    assert dates_of(doc) == {(D(1666, 9, 1), D(1666, 9, 30))} and doc.author == "SP"
    page.write_text('<article><time datetime="1666-09-02">2nd</time><p>x</p></article>')
    assert dates_of(one(page)) == {(D(1666, 9, 2), D(1666, 9, 2))}
    page.write_text('<time datetime="1666-09-02">a</time><time datetime="1666-09-03">b</time>'
                    '<time itemprop="datePublished" datetime="1666-09-01">c</time><p>x</p>')
    assert dates_of(one(page)) == {(D(1666, 9, 1), D(1666, 9, 1))}
    page.write_text('<time datetime="1666-09-02">a</time><time datetime="1666-09-03">b</time>'
                    '<meta name="date" content="Sunday"><p>x</p>')  # a list of dates: none
    assert dates_of(one(page)) == {(None, None)}


def test_precedence_flag_over_catalogue_over_file_over_name(tmp_path: Path) -> None:
    md = tmp_path / "1600-01-01-x.md"
    md.write_text("---\ndate: 1666-09-02\nauthor: Front\n---\nText.\n")
    assert dates_of(one(md, dates_from_names=True)) == {(D(1666, 9, 2), D(1666, 9, 2))}
    cat = tmp_path / "cat.jsonl"
    cat.write_text('{"file": "1600-01-01-x.md", "date": "1666-10-01", "author": "Row"}\n')
    doc = one(md, catalogue=Catalogue.read(cat), dates_from_names=True)
    assert dates_of(doc) == {(D(1666, 10, 1), D(1666, 10, 1))} and doc.author == "Row"
    doc = one(md, catalogue=Catalogue.read(cat), overrides=Overrides(date="1666-11",
                                                                     author="Flag"))
    assert dates_of(doc) == {(D(1666, 11, 1), D(1666, 11, 30))} and doc.author == "Flag"
    plain = tmp_path / "1600-01-01-y.md"
    plain.write_text("Text.\n")
    assert dates_of(one(plain)) == {(None, None)}  # names date only when asked
    assert dates_of(one(plain, dates_from_names=True)) == {(D(1600, 1, 1), D(1600, 1, 1))}


def test_a_file_timestamp_dates_nothing_unless_asked(tmp_path: Path) -> None:
    """A PDF's creation date and a file's mtime say when a copy was made, not when its text
    was written: never a date by default, the lowest source with --dates-from-timestamps."""
    scan = tmp_path / "scan.pdf"
    scan.write_bytes(dated_pdf("Inventory of instruments.", "D:20261203120000Z"))
    assert dates_of(one(scan)) == {(None, None)} and "dates" not in one(scan).provenance
    doc = one(scan, dates_from_timestamps=True)
    assert dates_of(doc) == {(D(2026, 12, 3), D(2026, 12, 3))}
    assert doc.provenance["dates"] == "timestamp"
    note = tmp_path / "1666-09-note.txt"
    note.write_text("A note.")
    made = dt.datetime(1999, 1, 2, 12).timestamp()
    os.utime(note, (made, made))
    assert dates_of(one(note)) == {(None, None)}
    assert dates_of(one(note, dates_from_timestamps=True)) == {(D(1999, 1, 2), D(1999, 1, 2))}
    # a date in the name is a better guess than the file's timestamp
    assert dates_of(one(note, dates_from_timestamps=True, dates_from_names=True)) == {
        (D(1666, 9, 1), D(1666, 9, 30))}


def test_every_value_is_recorded_with_its_source(tmp_path: Path) -> None:
    """Document.provenance: what a re-ingest keeps is decided by where each value came from."""
    md = tmp_path / "1600-01-01-x.md"
    md.write_text("---\ndate: 1666-09-02\nshelf: MS 1\n---\n# Heading\n\nText.\n")
    doc = one(md)
    assert doc.provenance == {"title": "heading", "dates": "file", "metadata.shelf": "file"}
    cat = tmp_path / "cat.csv"
    cat.write_text("file,title,corpus,box\n1600-01-01-x.md,Field notes,B,7\n")
    doc = one(md, catalogue=Catalogue.read(cat), overrides=Overrides(author="Flag"))
    assert doc.provenance == {"title": "catalogue", "dates": "file", "corpus": "catalogue",
                              "author": "flag", "metadata.shelf": "file",
                              "metadata.box": "catalogue"}
    plain = tmp_path / "1600-01-01-y.txt"
    plain.write_text("Text.")
    assert one(plain, dates_from_names=True).provenance == {"title": "name", "dates": "name"}
    pdf = tmp_path / "r.pdf"
    pdf.write_bytes(dated_pdf("Report.", "D:20261203120000Z", xmp=D(1851, 5, 2), title="Scan"))
    assert one(pdf).provenance == {"title": "file", "dates": "file", "author": "file"}
    records = tmp_path / "r.jsonl"
    records.write_text(json.dumps({"_id": "a", "text": "t", "date": "1666", "title": "T",
                                   "label": "L", "extra": 1}) + "\n")
    (rec,) = [d for d in iter_documents([records]) if isinstance(d, Document)]
    assert rec.provenance == {"title": "file", "dates": "file", "metadata.label": "file",
                              "metadata.extra": "file"}
    (rec,) = [d for d in iter_documents([records], mapping=FieldMapping(title="label"))
              if isinstance(d, Document)]
    assert rec.title == "L" and rec.provenance["title"] == "map"


def test_name_date_fills_only_undated_records(tmp_path: Path) -> None:
    path = tmp_path / "1666-diary.jsonl"
    path.write_text('{"_id": "a", "text": "t", "date": "1666-09-02"}\n{"_id": "b", "text": "u"}\n')
    docs = [d for d in iter_documents([path], dates_from_names=True)
            if isinstance(d, Document)]
    assert [dates_of(d) for d in docs] == [{(D(1666, 9, 2), D(1666, 9, 2))},
                                           {(D(1666, 1, 1), D(1666, 12, 31))}]


def test_catalogue_matches_relative_paths_and_skips_itself(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "n.txt").write_text("one")
    (tmp_path / "b" / "n.txt").write_text("two")
    cat = tmp_path / "catalogue.jsonl"  # inside the folder: not a document
    cat.write_text('{"file": "a/n.txt", "date": 1666}\n{"path": "./b/n.txt", "date": 1667}\n')
    docs = [d for d in iter_documents([tmp_path], catalogue=Catalogue.read(cat))
            if isinstance(d, Document)]
    assert {d.document_id: d.units[0].date_start for d in docs} == {
        "a-n-txt": D(1666, 1, 1), "b-n-txt": D(1667, 1, 1)}


@pytest.mark.parametrize(("content", "fragment"), [
    ("date\n1666\n", "line 2: no file name"),
    ("file,date\nx.txt,soon\n", "line 2: bad date: not a date"),
    ("file,date\nx.txt,1666\nx.txt,1667\n", "line 3: 'x.txt' is listed twice"),
])
def test_bad_catalogue_stops_the_run(tmp_path: Path, content: str, fragment: str) -> None:
    cat = tmp_path / "c.csv"
    cat.write_text(content)
    with pytest.raises(ConfigError) as info:
        Catalogue.read(cat)
    assert fragment in info.value.message


def test_date_flag_is_for_one_file(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(ConfigError, match="--date dates a single file"):
        list(iter_documents([tmp_path], overrides=Overrides(date="1666")))
    with pytest.raises(ConfigError, match="--date: not a date"):
        list(iter_documents([tmp_path / "a.txt"], overrides=Overrides(date="soon")))


def test_mapping_that_matches_no_record_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"_id": "a", "text": "t", "title": "T"}\n')
    (error,) = list(iter_documents([path], mapping=FieldMapping(title="heading")))
    assert isinstance(error, LoadError)
    assert error.reason == "--map title=heading: no record has a 'heading' key"


# --- the warning on a cutoff query ------------------------------------------------------------


def test_cutoff_search_and_answer_count_undated_passages(diary: pgcite.Collection) -> None:
    """The fixture's editorial note (corpus C) has no date: a cutoff query says it left it out."""
    assert diary.search("diary shorthand note", mode="keyword").undated_excluded is None
    result = diary.search("diary shorthand note", mode="keyword", filters={"cutoff": "1700-01-01"})
    assert result.undated_excluded == 1
    assert all(h.date_end is not None for h in result.hits)
    # other filters hold too
    assert diary.search("diary", mode="keyword", filters={
        "cutoff": "1700-01-01", "corpora": ["A", "B"]}).undated_excluded == 0
    answer = diary.answer("What is the note on the shorthand?", filters={"cutoff": "1700-01-01"})
    assert answer.undated_excluded == 1


def test_cutoff_warning_in_cli_and_http(diary: pgcite.Collection, client: pgcite.Client,
                                        settings: Settings, monkeypatch: pytest.MonkeyPatch,
                                        ) -> None:
    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)
    runner = CliRunner()
    result = runner.invoke(app, ["search", diary.name, "fire", "--cutoff", "1666-12-31"])
    assert result.exit_code == 0, result.output
    assert ("warning: the cutoff left out 1 undated passage (nothing dates them: see pgcite "
            "ingest --date, --catalogue)") in result.output
    plain = runner.invoke(app, ["search", diary.name, "fire"])
    assert "undated passage" not in plain.output
    payload = json.loads(runner.invoke(app, ["search", diary.name, "fire", "--cutoff",
                                             "1666-12-31", "--json"]).output)
    assert 1 in (payload.get("undated_excluded"), payload.get("undatedExcluded"))
    asked = runner.invoke(app, ["ask", diary.name, "Where was the cheese buried?", "--cutoff",
                                "1666-12-31"])
    assert asked.exit_code == 0 and "left out 1 undated passage" in asked.output
    with client.db.transaction() as conn:
        headers = {"X-API-Key": create_key(conn, diary.name, "reader").token}
    with TestClient(create_app(client=client, config=ServiceConfig(warm_up=False))) as api:
        base = f"/v1/collections/{diary.name}"
        body = {"query": "fire", "filters": {"cutoff": "1666-12-31"}}
        resp = api.post(f"{base}/search", headers=headers, json=body)
        assert resp.status_code == 200 and resp.json()["undatedExcluded"] == 1, resp.text
        resp = api.post(f"{base}/search", headers=headers, json={"query": "fire"})
        assert resp.json()["undatedExcluded"] is None
        resp = api.post(f"{base}/answer", headers=headers,
                        json={"question": "Where was the cheese buried?",
                              "filters": {"cutoff": "1666-12-31"}})
        assert resp.status_code == 200 and resp.json()["undatedExcluded"] == 1, resp.text


def test_mapping_check_skips_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    assert list(iter_documents([path], mapping=FieldMapping(title="heading"))) == []


def test_cli_date_and_catalogue_errors_are_one_line(
        diary: pgcite.Collection, settings: Settings, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)
    (tmp_path / "a.txt").write_text("x")
    runner = CliRunner()
    before = diary.active_snapshot().snapshot_id
    result = runner.invoke(app, ["ingest", diary.name, str(tmp_path), "--date", "1666",
                                 "--no-progress"])
    assert result.exit_code != 0 and "--date dates a single file" in result.output
    assert "Traceback" not in result.output
    cat = tmp_path / "cat.csv"
    cat.write_text("file,date\na.txt,someday\n")
    result = runner.invoke(app, ["ingest", diary.name, str(tmp_path), "--catalogue", str(cat),
                                 "--no-progress"])
    assert result.exit_code != 0 and "line 2: bad date: not a date" in result.output
    assert diary.active_snapshot().snapshot_id == before
