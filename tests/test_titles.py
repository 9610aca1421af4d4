"""Titles: front matter and catalogue titles win over headings, are listed, and are what the
keyword leg and the context header read; a citation names a section's heading path once."""

from __future__ import annotations

import json
from pathlib import Path

import pgcite
from pgcite._types import Document
from pgcite.ingest._catalogue import Catalogue
from pgcite.ingest._chunking import chunk_document, context_header
from pgcite.ingest._loaders import iter_documents

NOTES = ("---\ntitle: Field notes\nauthor: Hartley\ndate: 1851-05-02\n---\n"
         "# Arthington valley\n\nThe barometer stood low over the valley.\n\n"
         "## Expenses\n\nA shilling for the carrier.\n")


def words(text: str) -> int:
    return len(text.split())


def load(path: Path, **kwargs: object) -> Document:
    (doc,) = list(iter_documents([path], **kwargs))  # type: ignore[arg-type]
    assert isinstance(doc, Document), doc
    return doc


def test_front_matter_and_catalogue_titles_win_over_headings(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text(NOTES)
    doc = load(path)
    assert doc.title == "Field notes"
    chunks = chunk_document(doc, count_tokens=words, contextual="header")
    assert [(c.title, c.locator) for c in chunks] == [
        ("Field notes > Arthington valley", "Arthington valley"),
        ("Field notes > Arthington valley > Expenses", "Arthington valley > Expenses")]
    # the heading path is said once, in the title
    assert chunks[1].citation == ("Hartley, Field notes > Arthington valley > Expenses, "
                                  "1851-05-02, notes.md")
    header = context_header(title=chunks[1].title, locator=chunks[1].locator,
                            date_start=chunks[1].date_start, date_end=chunks[1].date_end,
                            author=chunks[1].author)
    assert header == "Field notes > Arthington valley > Expenses — 2 May 1851 — Hartley"
    catalogue = tmp_path / "cat.csv"
    catalogue.write_text("file,title\nnotes.md,Notebook 3\n")
    assert load(path, catalogue=Catalogue.read(catalogue)).title == "Notebook 3"


def test_a_title_from_the_heading_or_the_file_name_is_not_repeated(tmp_path: Path) -> None:
    titled = tmp_path / "a.md"  # titled by its '#' heading: its path starts there already
    titled.write_text("# A day at the Great Exhibition\n\n## Expenses\n\nA shilling.\n")
    (chunk,) = chunk_document(load(titled), count_tokens=words)
    assert (chunk.title, chunk.citation) == (
        "A day at the Great Exhibition > Expenses", "A day at the Great Exhibition > Expenses, a.md")
    untitled = tmp_path / "b.md"  # no title but the file name: sections keep their headings
    untitled.write_text("## Expenses\n\nA shilling.\n")
    (chunk,) = chunk_document(load(untitled), count_tokens=words)
    assert chunk.title == "Expenses"


def test_the_title_is_found_by_the_keyword_leg_and_listed(
        client: pgcite.Client, tmp_path: Path) -> None:
    folder = tmp_path / "archive"
    folder.mkdir()
    (folder / "notes.md").write_text(NOTES)
    (folder / "other.md").write_text("# Present\n\nThe fields were wet; notes were kept.\n")
    col = client.create_collection("titles_found")
    try:
        assert col.ingest([folder]).activated
        hits = col.search('"Field notes"', mode="keyword").hits
        assert {h.document_id for h in hits} == {"notes-md"}
        listed = {d.id: d.title for d in col.documents()}
        assert listed == {"notes-md": "Field notes", "other-md": "Present"}
    finally:
        client.drop_collection("titles_found")


def test_jsonl_and_pdf_titles_are_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"_id": "r", "title": "Letter", "text": "x", "locator": "f. 2"})
                    + "\n")
    (chunk,) = chunk_document(load(path), count_tokens=words)
    assert (chunk.title, chunk.locator, chunk.citation) == ("Letter", "f. 2", "Letter, r.jsonl, f. 2")
