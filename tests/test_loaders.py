"""Source loaders: JSONL, text, Markdown, HTML and PDF into Documents, one LoadError per bad file."""

from __future__ import annotations

import datetime as dt
import io
import shutil
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

from pgcite._errors import ConfigError, LoadError
from pgcite._types import Document
from pgcite.ingest._loaders import (
    SUPPORTED_SUFFIXES,
    FieldMapping,
    Overrides,
    iter_documents,
    slugify,
)

from .conftest import binary

FIXTURES = Path(__file__).parent / "fixtures" / "sources"


def make_pdf(pages: list[str], title: str | None = None) -> bytes:
    """A minimal valid PDF with one line of Helvetica text per page (empty string: no text)."""
    n = len(pages)
    objects: dict[int, bytes] = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: f"<< /Type /Pages /Kids [{' '.join(f'{4 + 2 * i} 0 R' for i in range(n))}] /Count {n} >>".encode(),
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    }
    for i, text in enumerate(pages):
        page_id = 4 + 2 * i
        objects[page_id] = (
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {page_id + 1} 0 R >>"
        ).encode()
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode() if text else b""
        objects[page_id + 1] = b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream"
    info_id = 4 + 2 * n
    objects[info_id] = f"<< /Title ({title}) >>".encode() if title else b"<< >>"
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number in sorted(objects):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + objects[number] + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info %d 0 R >>\n" % (len(objects) + 1, info_id)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


TWO_PAGES = make_pdf(
    ["Harbour report, first page.", "Second page about the tides."], "Harbour Report"
)


def load(*paths: Path, **kwargs: object) -> list[Document | LoadError]:
    return list(iter_documents(list(paths), **kwargs))  # type: ignore[arg-type]


def docs_of(items: list[Document | LoadError]) -> list[Document]:
    assert not [i for i in items if isinstance(i, LoadError)], items
    return [i for i in items if isinstance(i, Document)]


def errors_of(items: list[Document | LoadError]) -> list[LoadError]:
    return [i for i in items if isinstance(i, LoadError)]


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


# --- JSONL ---------------------------------------------------------------------------------


def test_beir_jsonl_with_default_mapping() -> None:
    docs = docs_of(load(FIXTURES / "beir.jsonl"))
    assert [d.document_id for d in docs] == ["4983", "5836", "7912"]  # int id became str
    first = docs[0]
    assert first.title == "Microstructural development of white matter"
    assert first.source == "beir.jsonl"
    assert first.metadata == {}
    assert len(first.units) == 1
    assert first.units[0].text.startswith("Alterations of the architecture")
    assert first.units[0].date_start is None
    # Empty title -> None; unconsumed keys kept, null values dropped.
    assert docs[2].title is None
    assert docs[2].metadata == {"year": 2004}


def test_diary_jsonl_dates_and_metadata() -> None:
    docs = {d.document_id: d for d in docs_of(load(FIXTURES / "diary.jsonl"))}
    undated = docs["pepys-entry-1"]
    assert undated.units[0].date_start is None and undated.units[0].date_end is None
    assert undated.metadata == {"section": "January 1659–60", "source_file": "chapter-1.xhtml"}

    entry = docs["pepys-entry-1666-9-12"].units[0]
    assert entry.date_start == dt.date(1666, 9, 12)
    assert entry.date_end == dt.date(1666, 9, 12)  # defaults to the start
    assert docs["pepys-entry-1666-9-12"].metadata["date_label"] == "2nd"

    week = docs["pepys-week-1666-9"]
    assert week.units[0].date_start == dt.date(1666, 9, 12)  # datetime string accepted
    assert week.units[0].date_end == dt.date(1666, 9, 20)
    assert week.author == "Samuel Pepys"
    assert "author" not in week.metadata and "date_end" not in week.metadata


def test_record_source_key_wins_over_file_name(tmp_path: Path) -> None:
    path = write(tmp_path, "x.jsonl", '{"id": "a", "body": "t", "source": "Edition 1893"}\n')
    (doc,) = docs_of(load(path))
    assert doc.source == "Edition 1893"
    assert doc.units[0].text == "t"  # "body" is a default text key


def test_jsonl_bad_line_fails_whole_file_with_line_number() -> None:
    items = load(FIXTURES / "broken.jsonl", FIXTURES / "beir.jsonl")
    assert isinstance(items[0], LoadError)
    assert items[0].path.endswith("broken.jsonl")
    assert items[0].reason == "line 7: not valid JSON (Expecting value)"
    # Nothing from the broken file (not even its good lines), everything from the next file.
    assert [d.document_id for d in docs_of(items[1:])] == ["4983", "5836", "7912"]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (['{"text": "no id"}'], "line 1: no id"),
        (['{"_id": "a"}'], "line 1: no text"),
        (['{"_id": "a", "text": null}'], "line 1: no text"),
        (['{"_id": "a", "text": 5}'], "line 1: text 'text' must be a string"),
        (['{"_id": "", "text": "t"}'], "line 1: id '_id' must be a non-empty"),
        (['{"_id": "a", "text": "t"}', '["a list"]'], "line 2: expected a JSON object, got list"),
        (['{"_id": "a", "text": "t", "date": "12/09/1666"}'], "line 1: 'date': not a date (yyyy"),
        (['{"_id": "a", "text": "t", "date": "1666-02-30"}'],
         "line 1: 'date': not a valid date: 1666-02-30"),
        (['{"_id": "a", "text": "t", "date": 20240501}'], "line 1: 'date': not a date (yyyy"),
        (['{"_id": "a", "text": "t", "date": "1666-09-05/1666-09-01"}'],
         "line 1: 'date': range ends (1666-09-01) before it starts (1666-09-05)"),
        (['{"_id": "a", "text": "t", "date_end": "1666-09-01"}'], "line 1: date_end without a date"),
        (
            ['{"_id": "a", "text": "t", "date": "1666-09-12", "date_end": "1666-09-01"}'],
            "line 1: date_end 1666-09-01 is before date 1666-09-12",
        ),
        (
            ['{"_id": "a", "text": "t"}', "", '{"_id": "a", "text": "u"}'],
            "line 3: duplicate id 'a' (first on line 1)",
        ),
        (['{"_id": "a", "text": "t", "title": {"x": 1}}'], "line 1: 'title' must be a string"),
    ],
)
def test_jsonl_record_errors(tmp_path: Path, lines: list[str], expected: str) -> None:
    path = write(tmp_path, "bad.jsonl", "\n".join(lines) + "\n")
    items = load(path)
    assert len(items) == 1 and isinstance(items[0], LoadError)
    assert items[0].reason.startswith(expected), items[0].reason


def test_jsonl_undecodable_bytes_report_line(tmp_path: Path) -> None:
    path = write(
        tmp_path, "bad.jsonl", b'{"_id": "a", "text": "t"}\n{"_id": "b", "text": "\xff"}\n'
    )
    (error,) = load(path)
    assert isinstance(error, LoadError)
    assert error.reason == "line 2: not valid UTF-8 (byte 0xff)"


def test_jsonl_keeps_unicode_line_separators_inside_strings(tmp_path: Path) -> None:
    path = write(tmp_path, "u.jsonl", '{"_id": "a", "text": "one\u2028two"}\n')
    (doc,) = docs_of(load(path))
    assert doc.units[0].text == "one\u2028two"


# --- FieldMapping and Overrides --------------------------------------------------------------


def test_field_mapping_renames_and_consumes_keys(tmp_path: Path) -> None:
    line = '{"uid": 7, "_id": "other", "body_text": "t", "date_label": "2nd", "when": "1666-09-12", "who": "SP"}'
    path = write(tmp_path, "m.jsonl", line + "\n")
    mapping = FieldMapping.parse(
        ["id=uid", "text=body_text", "title=date_label", "date = when", "author=who"]
    )
    (doc,) = docs_of(load(path, mapping=mapping))
    assert doc.document_id == "7"
    assert doc.title == "2nd"
    assert doc.author == "SP"
    assert doc.units[0].date_start == dt.date(1666, 9, 12)
    assert doc.metadata == {"_id": "other"}  # not consumed: the mapping named "uid"


def test_field_mapping_explicit_key_missing_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "m.jsonl", '{"_id": "a", "text": "t"}\n')
    (error,) = load(path, mapping=FieldMapping(id="uid"))
    assert isinstance(error, LoadError)
    assert error.reason == "line 1: no id (no 'uid' key)"


@pytest.mark.parametrize(
    ("items", "fragment"),
    [
        (["colour=hue"], "unknown field 'colour'"),
        (["title"], "expected FIELD=KEY"),
        (["title="], "expected FIELD=KEY"),
        (["=x"], "expected FIELD=KEY"),
        (["title=a", "title=b"], "mapped twice"),
    ],
)
def test_field_mapping_parse_errors(items: list[str], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        FieldMapping.parse(items)
    assert fragment in info.value.message
    if "twice" not in fragment:
        assert "valid fields: id, text, title, date, date_end, author, corpus, source, locator" in (
            info.value.message
        )


def test_field_mapping_is_frozen() -> None:
    mapping = FieldMapping.parse([])
    assert mapping == FieldMapping()
    with pytest.raises(ValueError):
        mapping.id = "x"  # type: ignore[misc]


def test_overrides_force_corpus_and_author() -> None:
    docs = docs_of(
        load(FIXTURES / "diary.jsonl", overrides=Overrides(corpus="pepys", author="S. Pepys"))
    )
    assert {(d.corpus, d.author) for d in docs} == {("pepys", "S. Pepys")}
    kept = docs_of(load(FIXTURES / "diary.jsonl", overrides=Overrides(corpus="pepys")))
    assert [d.author for d in kept] == [None, None, "Samuel Pepys"]


# --- Paths ---------------------------------------------------------------------------------


def test_missing_path(tmp_path: Path) -> None:
    (error,) = load(tmp_path / "nope.jsonl")
    assert isinstance(error, LoadError)
    assert error.reason == "no such file or directory"
    assert error.path == str(tmp_path / "nope.jsonl")


def test_explicit_unsupported_suffix(tmp_path: Path) -> None:
    (error,) = load(write(tmp_path, "notes.rst", "x"))
    assert isinstance(error, LoadError)
    assert "'.rst'" in error.reason
    assert all(s in error.reason for s in SUPPORTED_SUFFIXES)


def test_directory_walk_sorted_recursive_skipping_hidden_and_unsupported(tmp_path: Path) -> None:
    write(tmp_path, "b.txt", "b")
    write(tmp_path, "a.txt", "a")
    write(tmp_path, "docs/Install Guide.md", "# Install\n\nSteps.")
    write(tmp_path, "docs/skip.rst", "not loaded")
    write(tmp_path, ".git/config.txt", "hidden dir")
    write(tmp_path, ".hidden.txt", "hidden file")
    write(tmp_path, "UPPER.TXT", "suffix case does not matter")
    docs = docs_of(load(tmp_path))
    assert [d.document_id for d in docs] == ["upper-txt", "a-txt", "b-txt", "docs-install-guide-md"]
    assert docs[3].source == "docs/Install Guide.md"


def test_file_passed_directly_uses_its_name_for_the_id(tmp_path: Path) -> None:
    path = write(tmp_path, "deep/er/My Notes.txt", "x")
    (doc,) = docs_of(load(path))
    assert doc.document_id == "my-notes-txt"
    assert doc.source == "My Notes.txt"


def test_slugify() -> None:
    assert slugify("docs/Install Guide.md") == "docs-install-guide-md"
    assert slugify("__A__/b..c.TXT") == "a-b-c-txt"


def test_fixture_directory_isolates_failures() -> None:
    items = load(FIXTURES)
    failed = sorted(Path(e.path).name for e in errors_of(items))
    assert failed == ["broken.jsonl", "corrupt.pdf"]
    loaded = {d.document_id for d in items if isinstance(d, Document)}
    assert {
        "4983",
        "pepys-entry-1",
        "guide-md",
        "page-html",
        "notes-txt",
        "two-pages-pdf",
    } <= loaded
    assert not any("ok-" in i for i in loaded)  # no partial broken.jsonl
    assert not any("hidden" in i or "readme" in i for i in loaded)


def test_ids_are_stable_across_runs() -> None:
    def snapshot() -> list[object]:
        return [i.model_dump() if isinstance(i, Document) else str(i) for i in load(FIXTURES)]

    first = snapshot()
    assert len(first) >= 8
    assert first == snapshot()


def test_duplicate_ids_across_files_reject_the_later_file(tmp_path: Path) -> None:
    one = write(tmp_path, "one.jsonl", '{"_id": "x", "text": "t"}\n')
    two = write(tmp_path, "two.jsonl", '{"_id": "y", "text": "t"}\n{"_id": "x", "text": "u"}\n')
    items = load(one, two)
    assert [d.document_id for d in items if isinstance(d, Document)] == ["x"]
    (error,) = errors_of(items)
    assert error.path == str(two) and "'x' was already produced by" in error.reason


# --- Text, Markdown, HTML ----------------------------------------------------------------


def test_txt_is_one_stripped_unit() -> None:
    (doc,) = docs_of(load(FIXTURES / "notes.txt"))
    assert doc.document_id == "notes-txt"
    assert doc.title == "notes"
    assert [u.text for u in doc.units] == [
        "Plain notes about the harbour.\n\nSecond paragraph of the notes."
    ]


def test_undecodable_text_file_fails(tmp_path: Path) -> None:
    (error,) = load(write(tmp_path, "x.md", b"# T\n\ncaf\xe9\n"))
    assert isinstance(error, LoadError)
    assert error.reason == "line 3: not valid UTF-8 (byte 0xe9)"


def test_markdown_heading_paths_and_code_fences() -> None:
    (doc,) = docs_of(load(FIXTURES / "guide.md"))
    assert doc.title == "Pgcite Guide"
    got = [(u.title, u.locator, u.text) for u in doc.units]
    assert got[0] == ("Pgcite Guide", None, "Intro text before any heading.")
    assert [(t, loc) for t, loc, _ in got[1:]] == [
        ("Pgcite Guide", "Pgcite Guide"),
        ("Pgcite Guide > Install", "Pgcite Guide > Install"),
        ("Pgcite Guide > Install > Linux", "Pgcite Guide > Install > Linux"),
        ("Pgcite Guide > Install > Windows", "Pgcite Guide > Install > Windows"),
        ("Pgcite Guide > Usage", "Pgcite Guide > Usage"),  # "Empty section" skipped
        ("Appendix", "Appendix"),
    ]
    linux = got[3][2]
    assert "# this is a shell comment, not a heading\n# nor is this one" in linux
    assert linux.endswith("```")
    assert "## not a heading either" in got[5][2]
    assert got[6][2] == "#hashtag is not a heading"


def test_markdown_without_h1_uses_stem(tmp_path: Path) -> None:
    (doc,) = docs_of(load(write(tmp_path, "howto.markdown", "lead\n\n## Part\n\nbody\n")))
    assert doc.title == "howto"
    assert [(u.title, u.locator) for u in doc.units] == [("howto", None), ("Part", "Part")]


def test_html_sections_title_and_dropped_tags() -> None:
    (doc,) = docs_of(load(FIXTURES / "page.html"))
    assert doc.title == "Harbour Report"
    got = [(u.title, u.locator, u.text) for u in doc.units]
    assert got == [
        ("Harbour Report", None, "Lead paragraph before headings."),
        ("Harbour", "Harbour", "The harbour was busy.\n\nShips came and went.\nEvery day."),
        ("Harbour > Tides", "Harbour > Tides", "High tide at noon.\n\nLow tide at six."),
        ("Weather", "Weather", "Rain all week."),
    ]
    everything = " ".join(u.text for u in doc.units)
    assert "secret" not in everything and "Home" not in everything and "color" not in everything
    assert "comment" not in everything


def test_html_title_falls_back_to_h1_then_stem(tmp_path: Path) -> None:
    (with_h1,) = docs_of(load(write(tmp_path, "a.htm", "<h1>Big  Title</h1><p>x</p>")))
    assert with_h1.title == "Big Title"
    (bare,) = docs_of(load(write(tmp_path, "b.html", "<p>only text</p>")))
    assert bare.title == "b"
    assert [u.text for u in bare.units] == ["only text"]


def test_html_declared_charset(tmp_path: Path) -> None:
    page = '<meta charset="latin-1"><p>caf\xe9</p>'.encode("latin-1")
    (doc,) = docs_of(load(write(tmp_path, "l.html", page)))
    assert doc.units[0].text == "café"


# --- PDF -----------------------------------------------------------------------------------


def test_fixture_pdf_is_the_generated_one() -> None:
    # The checked-in fixture is exactly what make_pdf builds, so its content is documented here.
    assert (FIXTURES / "two-pages.pdf").read_bytes() == TWO_PAGES


def test_pdf_pages_become_units_with_page_locators() -> None:
    (doc,) = docs_of(load(FIXTURES / "two-pages.pdf"))
    assert doc.document_id == "two-pages-pdf"
    assert doc.title == "Harbour Report"
    assert [(u.locator, u.text) for u in doc.units] == [
        ("p. 1", "Harbour report, first page."),
        ("p. 2", "Second page about the tides."),
    ]


def test_pdf_skips_empty_pages_and_falls_back_to_stem(tmp_path: Path) -> None:
    path = write(tmp_path, "scan.pdf", make_pdf(["one", "", "three"]))
    (doc,) = docs_of(load(path))
    assert doc.title == "scan"
    assert [u.locator for u in doc.units] == ["p. 1", "p. 3"]


def test_pdf_without_any_text_fails(tmp_path: Path) -> None:
    (error,) = load(write(tmp_path, "blank.pdf", make_pdf(["", ""])))
    assert isinstance(error, LoadError)
    if binary("needs_tesseract"):
        assert error.reason == "no text on any page, not even by OCR"
    else:  # without Tesseract the reason says so, rather than claiming OCR found nothing
        assert error.reason.startswith("no page has a text layer, and it ")
        assert "tesseract" in error.reason.lower()


def test_corrupt_pdf_fails_and_others_continue() -> None:
    items = load(FIXTURES / "corrupt.pdf", FIXTURES / "notes.txt")
    error = items[0]
    assert isinstance(error, LoadError)
    assert error.reason.startswith("not a readable PDF (")
    assert [d.document_id for d in docs_of(items[1:])] == ["notes-txt"]


def test_encrypted_pdf_fails(tmp_path: Path) -> None:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(TWO_PAGES)))
    writer.encrypt(user_password="secret", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    (error,) = load(write(tmp_path, "locked.pdf", buffer.getvalue()))
    assert isinstance(error, LoadError)
    assert error.reason == "not a readable PDF (encrypted)"


def test_pdf_inside_copied_tree(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "two-pages.pdf", tmp_path / "Report 2024.PDF")
    (doc,) = docs_of(load(tmp_path))
    assert doc.document_id == "report-2024-pdf"
    assert len(doc.units) == 2
