"""OCR of scans: images and PDF pages without a text layer, made here from known text, are read
by Tesseract as a reader reads them (a passage per page region, a heading kept with what it
heads), cited by page with the region's boxes, measured by character error rate, and a poorly
read page is flagged in the report, never dropped silently."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from PIL import Image, ImageDraw, ImageFont
from typer.testing import CliRunner

import pgcite
from pgcite._types import Document
from pgcite.cli import app
from pgcite.config import Settings
from pgcite.evaluate._cer import character_error_rate
from pgcite.ingest import _ocr
from pgcite.ingest._loaders import iter_documents
from pgcite.service import ServiceConfig, create_app, create_key

# Until the "ci" branch's conftest marker lands: skip, saying why, where Tesseract is missing.
_MISSING = ("pytesseract is not installed" if importlib.util.find_spec("pytesseract") is None
            else "the tesseract program is not installed (apt-get install tesseract-ocr)"
            if shutil.which("tesseract") is None else None)
needs_tesseract = pytest.mark.skipif(_MISSING is not None, reason=f"needs Tesseract: {_MISSING}")

FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf")
PAGES = [
    ["The harbour master wrote on Tuesday", "that the cargo of pepper had arrived",
     "and the ships were counted at dawn."],
    ["A second letter concerns the fire", "in the warehouse near the bridge,",
     "which burned until the morning tide."],
]
MAX_CER = 0.05  # clean serif print at ~150 dpi: Tesseract 5 reads it almost perfectly


def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return (ImageFont.truetype(str(FONT), size) if FONT.exists()
            else ImageFont.load_default(size=size))


def page_image(lines: list[str], size: int = 32) -> Image.Image:
    """A white page (8.5 x 5.5 in at 150 dpi) with ``lines`` in black."""
    image = Image.new("L", (1275, 825), 255)
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((120, 120 + i * int(size * 1.6)), line, font=font(size), fill=0)
    return image


def scanned_pdf(path: Path, pages: list[Image.Image]) -> Path:
    """A PDF of image-only pages: no text layer at all."""
    pages[0].save(path, save_all=True, append_images=pages[1:], resolution=150)
    return path


def only_docs(items: list[Document | pgcite.LoadError]) -> list[Document]:
    assert all(isinstance(i, Document) for i in items), items
    return [i for i in items if isinstance(i, Document)]


def test_character_error_rate() -> None:
    assert character_error_rate("pepper", "pepper") == 0.0
    assert character_error_rate("pepper", "pepqer") == pytest.approx(1 / 6)
    assert character_error_rate("a  b\nc", "a b c") == 0.0  # re-flowed lines are not errors
    assert character_error_rate("abcd", "") == 1.0
    assert character_error_rate("", "") == 0.0


def test_collection_language_maps_to_tesseract() -> None:
    assert _ocr.tesseract_language("arabic") == "ara"
    assert _ocr.tesseract_language("english") == "eng"
    assert _ocr.tesseract_language("simple") == "eng"


@needs_tesseract
def test_image_is_read_with_page_locator_region_boxes_and_confidence(tmp_path: Path) -> None:
    path = tmp_path / "letter.png"
    page_image(PAGES[0]).save(path)
    (doc,) = only_docs(list(iter_documents([path])))
    assert [u.locator for u in doc.units] == ["p. 1"]
    ocr = doc.units[0].metadata["ocr"]
    assert ocr["page"] == 1 and ocr["lang"] == "eng" and ocr["engine"].startswith("tesseract")
    assert ocr["region"] == 1 and ocr["page_size"] == [1275, 825]
    assert ocr["confidence"] > _ocr.LOW_CONFIDENCE and not ocr["low_confidence"]
    left, top, right, bottom = ocr["bbox"]
    assert 100 <= left < right <= 1275 and 100 <= top < bottom <= 825
    # the region's box holds each of its paragraphs' boxes
    assert ocr["paragraphs"] and all(
        left <= p[0] < p[2] <= right and top <= p[1] < p[3] <= bottom for p in ocr["paragraphs"])
    assert character_error_rate("\n".join(PAGES[0]), doc.units[0].text) <= MAX_CER
    assert [(p.page, p.low) for p in doc.ocr_pages] == [(1, False)]


@needs_tesseract
def test_scanned_pdf_is_ingested_searched_and_cited_by_page(
        client: pgcite.Client, tmp_path: Path) -> None:
    pdf = scanned_pdf(tmp_path / "letters.pdf", [page_image(p) for p in PAGES])
    col = client.create_collection("ocr_pdf")
    try:
        report = col.ingest([pdf])
        assert not report.failed and report.activated
        assert report.ocr_pages == 2 and report.low_confidence == []
        hit = col.search("fire in the warehouse", mode="keyword").hits[0]
        assert hit.locator == "p. 2"
        assert hit.citation.endswith("letters.pdf, p. 2")
        assert hit.metadata["ocr"]["page"] == 2
        assert hit.metadata["ocr"]["page_confidence"] > _ocr.LOW_CONFIDENCE
        assert character_error_rate("\n".join(PAGES[1]), hit.body) <= MAX_CER
        first = col.search("pepper cargo harbour master", mode="keyword").hits[0]
        assert first.locator == "p. 1"
        assert character_error_rate("\n".join(PAGES[0]), first.body) <= MAX_CER
    finally:
        client.drop_collection("ocr_pdf")


@needs_tesseract
def test_pdf_mixes_text_layer_and_scanned_pages(tmp_path: Path) -> None:
    from tests.test_loaders import make_pdf

    text_pdf = tmp_path / "text.pdf"
    text_pdf.write_bytes(make_pdf(["Typed first page.", ""]))
    # Page 2 of the typed PDF has no text: it is rendered and read (blank: nothing recognised).
    (doc,) = only_docs(list(iter_documents([text_pdf])))
    assert [u.locator for u in doc.units] == ["p. 1"]
    assert [(p.page, p.confidence, p.low) for p in doc.ocr_pages] == [(2, None, True)]


@pytest.fixture()
def cli_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)


@needs_tesseract
def test_low_confidence_and_blank_pages_are_flagged_not_dropped(
        cli_env: None, client: pgcite.Client, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "scans"
    folder.mkdir()
    blank = Image.new("L", (1275, 825), 255)
    scanned_pdf(folder / "register.pdf", [page_image(PAGES[0]), blank])
    # Any real page reads below 99.9: a threshold that flags page 1 by its confidence.
    monkeypatch.setattr(_ocr, "LOW_CONFIDENCE", 99.9)
    runner = CliRunner()
    assert runner.invoke(app, ["collection", "create", "ocr_cli"]).exit_code == 0
    try:
        result = runner.invoke(app, ["ingest", "ocr_cli", str(folder), "--no-progress"])
        assert result.exit_code == 0, result.output
        assert "2 pages read by OCR, 2 flagged" in result.output
        flagged = [line for line in result.output.splitlines()
                   if line.startswith("low OCR confidence:")]
        assert len(flagged) == 2
        assert flagged[0].startswith("low OCR confidence: register.pdf p. 1: mean OCR "
                                     "confidence ") and flagged[0].endswith(" < 99.9")
        assert flagged[1] == ("low OCR confidence: register.pdf p. 2: blank page (no ink: not "
                              "sent to OCR)")
        client.active_pointers().invalidate("ocr_cli")  # the CLI ingested through its own client
        hit = client.collection("ocr_cli").search("pepper cargo", mode="keyword").hits[0]
        assert hit.locator == "p. 1" and hit.metadata["ocr"]["low_confidence"]
        again = runner.invoke(app, ["ingest", "ocr_cli", str(folder), "--json"])
        assert again.exit_code == 0, again.output
        rerun = json.loads(again.stdout)
        # OCR reads the same scan the same way: a re-ingest changes nothing
        assert (rerun["unchanged"], rerun["new_versions"], rerun["snapshot_id"]) == (1, 0, None)
        low = rerun["low_confidence"]
        assert [(x["path"], x["page"]) for x in low] == [("register.pdf", 1), ("register.pdf", 2)]
        assert low[1]["confidence"] is None
    finally:
        client.drop_collection("ocr_cli")


@needs_tesseract
def test_missing_language_data_fails_the_file_saying_what_is_installed(tmp_path: Path) -> None:
    if "ara" in _ocr._installed()[1]:
        pytest.skip("Arabic language data is installed here")
    path = tmp_path / "letter.png"
    page_image(PAGES[0]).save(path)
    (error,) = iter_documents([path], ocr_lang="ara")
    assert isinstance(error, pgcite.LoadError)
    assert error.reason.startswith("an image needs OCR in 'ara', but Tesseract has no 'ara' "
                                   "language data (installed: eng")
    assert error.reason.endswith("apt-get install tesseract-ocr-ara)")


def test_missing_tesseract_fails_the_file_clearly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytesseract = pytest.importorskip("pytesseract")
    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", "/nonexistent/tesseract")
    _ocr._installed.cache_clear()
    try:
        path = tmp_path / "letter.png"
        page_image(PAGES[0]).save(path)
        (error,) = iter_documents([path])
        assert isinstance(error, pgcite.LoadError)
        assert error.reason == ("an image needs OCR, but the tesseract program is not "
                                "installed (Debian/Ubuntu: apt-get install tesseract-ocr)")
    finally:
        _ocr._installed.cache_clear()


def test_unreadable_image_fails_alone(tmp_path: Path) -> None:
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    (tmp_path / "note.txt").write_text("still here")
    error, doc = iter_documents([tmp_path])
    assert isinstance(error, pgcite.LoadError) and isinstance(doc, Document)
    assert error.reason.startswith("not a readable image (")


@needs_tesseract
def test_http_upload_of_a_scan_reports_its_flagged_pages(client: pgcite.Client,
                                                         tmp_path: Path) -> None:
    col = client.create_collection("ocr_http")
    with client.db.transaction() as conn:
        headers = {"X-API-Key": create_key(conn, col.name, "admin").token}
    pdf = scanned_pdf(tmp_path / "register.pdf",
                      [page_image(PAGES[0]), Image.new("L", (1275, 825), 255)])
    try:
        with TestClient(create_app(client=client, config=ServiceConfig(warm_up=False))) as api:
            response = api.post(f"/v1/collections/{col.name}/documents", headers=headers, files=[
                ("files", ("register.pdf", pdf.read_bytes())),
                ("files", ("broken.png", b"\x89PNG\r\n\x1a\nnot really"))])
        assert response.status_code == 201, response.text
        report = response.json()["report"]
        assert report["ocr_pages"] == 2 and report["documents"] == 1
        assert [(x["path"], x["page"], x["reason"]) for x in report["low_confidence"]] == [
            ("register.pdf", 2, "blank page (no ink: not sent to OCR)")]
        assert [f["path"] for f in report["failed"]] == ["broken.png"]
    finally:
        client.drop_collection("ocr_http")


# --- reading order: regions ------------------------------------------------------------------


def tesseract_data(words: list[tuple[int, int, int, int, int, str]],
                   height: int = 20) -> dict[str, list[object]]:
    """``image_to_data`` output for words given as (block, paragraph, line, left, top, text)."""
    data: dict[str, list[object]] = {k: [] for k in (
        "text", "conf", "block_num", "par_num", "line_num", "left", "top", "width", "height")}
    for block, par, line, left, top, text in words:
        for key, value in zip(data, (text, 95, block, par, line, left, top, 12 * len(text),
                                     height), strict=True):
            data[key].append(value)
    return data


def test_regions_keep_a_heading_and_its_list_together_and_columns_apart() -> None:
    # One Tesseract block per fragment, as it cut the inventory: a heading, two list
    # blocks, a note after a wide gap; then a second column beside the first.
    data = tesseract_data([
        (1, 1, 1, 100, 100, "Inventory"), (1, 1, 1, 220, 100, "lent"),
        (2, 1, 1, 120, 150, "-"), (2, 1, 1, 140, 150, "telescope"),
        (2, 1, 2, 120, 180, "-"), (2, 1, 2, 140, 180, "theodolite"),
        (3, 1, 1, 120, 210, "-"), (3, 1, 1, 140, 210, "globe"),
        (4, 1, 1, 100, 300, "Received"), (4, 1, 1, 200, 300, "back."),
        (5, 1, 1, 600, 100, "Second"), (5, 1, 1, 700, 100, "column."),
    ])
    found = _ocr.regions(_ocr._paragraphs(data))
    assert [r.text() for r in found] == [
        "Inventory lent\n- telescope\n- theodolite\n- globe", "Received back.", "Second column."]
    assert found[0].box() == [100, 100, 268, 230]
    assert [p.block for p in found[0].paragraphs] == [1, 2, 3]


def test_regions_separate_paragraphs_by_blank_lines_and_sections_by_gaps() -> None:
    prose = tesseract_data([
        (1, 1, 1, 100, 100, "One"), (1, 1, 2, 100, 125, "sentence."),
        (1, 1, 3, 100, 150, "ends."),
        (1, 2, 1, 100, 200, "Another"), (1, 2, 2, 100, 225, "paragraph."),
        (1, 2, 3, 100, 250, "here."),
        (2, 1, 1, 100, 400, "Far"), (2, 1, 2, 100, 425, "below."), (2, 1, 3, 100, 450, "it."),
    ])
    found = _ocr.regions(_ocr._paragraphs(prose))
    assert [r.text() for r in found] == [
        "One\nsentence.\nends.\n\nAnother\nparagraph.\nhere.", "Far\nbelow.\nit."]


def test_a_title_in_larger_type_heads_what_follows_even_after_a_wide_gap() -> None:
    data = tesseract_data([(1, 1, 1, 100, 100, "Title.")], height=40)
    data_body = tesseract_data([(2, 1, 1, 100, 260, "Body"), (2, 1, 2, 100, 285, "text."),
                                (2, 1, 3, 100, 310, "ends.")])
    for key in data:
        data[key] += data_body[key]
    (region,) = _ocr.regions(_ocr._paragraphs(data))
    assert region.text() == "Title.\nBody\ntext.\nends."


def scan_lines(*lines: str, size: int = 30) -> Image.Image:
    return page_image(list(lines), size=size)


@needs_tesseract
def test_inventory_heading_stays_with_its_list_in_one_passage(tmp_path: Path) -> None:
    from pgcite.evaluate import _scans
    from pgcite.ingest._chunking import chunk_document

    listed = ["One brass telescope, three feet long", "A theodolite with its stand",
              "Two barometers in oak cases"]
    _scans.page([_scans.heading("Inventory of instruments lent by J. Hartley"),
                 *_scans.items(*listed),
                 _scans.paragraph("Received back in good order on the tenth of May.")],
                _scans.Layout(height_in=5.5)).save(tmp_path / "inventory.png")
    (doc,) = only_docs(list(iter_documents([tmp_path / "inventory.png"])))
    (first, *_) = doc.units
    lines = first.text.split("\n")
    assert lines[0] == "Inventory of instruments lent by J. Hartley"
    assert all(any(item in line for line in lines[1:4]) for item in listed), first.text
    assert {u.locator for u in doc.units} == {"p. 1"}
    # Even cut to a tiny chunk budget, the heading is never a chunk of its own.
    words = chunk_document(doc, count_tokens=lambda text: len(text.split()), max_tokens=20)
    assert words[0].body.startswith("Inventory") and "telescope" in words[0].body


@needs_tesseract
def test_two_columns_are_read_one_after_the_other(tmp_path: Path) -> None:
    from pgcite.evaluate import _scans

    left = [_scans.heading("Letter to the Society"),
            _scans.paragraph("The instruments arrived safely at the observatory on Tuesday, "
                             "packed in straw, and not one lens was cracked.")]
    right = [_scans.heading("Reply from the Secretary"),
             _scans.paragraph("The council thanks Mr Hartley and asks that the globe be "
                              "returned before the winter meeting.")]
    _scans.two_columns([], left, right, _scans.Layout(height_in=5.5)).save(tmp_path / "two.png")
    (doc,) = only_docs(list(iter_documents([tmp_path / "two.png"])))
    texts = [u.text for u in doc.units]
    assert len(texts) == 2, texts
    assert texts[0].startswith("Letter to the Society\nThe instruments") and "council" not in texts[0]
    assert texts[1].startswith("Reply from the Secretary\nThe council") and "lens" not in texts[1]
    (l_left, _, l_right, _), (r_left, _, _, _) = (u.metadata["ocr"]["bbox"] for u in doc.units)
    assert l_right < r_left  # each region's box lies in its own column
    assert [u.metadata["ocr"]["region"] for u in doc.units] == [1, 2]


# --- blank pages -----------------------------------------------------------------------------


def test_blank_check_sees_any_ink_but_not_a_scans_speckle() -> None:
    import random

    white = Image.new("L", (2550, 3300), 255)
    assert _ocr.is_blank(white)
    speckled = white.copy()
    rng = random.Random(1)
    for _ in range(white.width * white.height // 100):  # 1% of pixels flipped
        speckled.putpixel((rng.randrange(2550), rng.randrange(3300)), rng.choice((0, 255)))
    assert _ocr.is_blank(speckled)
    for word, shade, size in (("12", 0, 25), ("I", 0, 33), ("faint", 180, 40)):
        inked = white.copy()
        ImageDraw.Draw(inked).text((1200, 3100), word, font=font(size), fill=shade)
        assert not _ocr.is_blank(inked), word


@needs_tesseract
def test_blank_pages_never_reach_tesseract(tmp_path: Path,
                                           tesseract_runs: list[tuple[int, int]]) -> None:
    blank = Image.new("L", (1275, 825), 255)
    pdf = scanned_pdf(tmp_path / "register.pdf", [blank, page_image(PAGES[0]), blank])
    (doc,) = only_docs(list(iter_documents([pdf])))
    assert len(tesseract_runs) == 1  # page 2 only
    assert [(p.page, p.blank, p.low) for p in doc.ocr_pages] == [
        (1, True, True), (2, False, False), (3, True, True)]
    assert {u.metadata["ocr"]["page"] for u in doc.units} == {2}


def test_lines_running_across_a_gutter_are_read_column_by_column() -> None:
    # Tesseract's reading of two columns with a narrow gutter: one block per heading line and
    # one for the body, every line running across both columns.
    def across(block: int, line: int, top: int, left: str, right: str) -> list[
            tuple[int, int, int, int, int, str]]:
        return ([(block, 1, line, 100 + 70 * i, top, w) for i, w in enumerate(left.split())]
                + [(block, 1, line, 700 + 70 * i, top, w) for i, w in enumerate(right.split())])
    data = tesseract_data([
        *across(1, 1, 100, "Letter to Society", "Reply from Secretary"),
        *across(2, 1, 150, "the instruments arrived", "the council thanks"),
        *across(2, 2, 180, "safely on Tuesday", "and asks that"),
        *across(2, 3, 210, "packed in straw.", "the globe returns."),
    ])
    assert [r.text() for r in _ocr.regions(_ocr._paragraphs(data))] == [
        "Letter to Society\nthe instruments arrived\nsafely on Tuesday\npacked in straw.",
        "Reply from Secretary\nthe council thanks\nand asks that\nthe globe returns."]


def test_a_right_to_left_script_reads_the_right_column_first() -> None:
    def across(line: int, top: int, left: str, right: str) -> list[
            tuple[int, int, int, int, int, str]]:
        return ([(1, 1, line, 100 + 70 * i, top, w) for i, w in enumerate(left.split())]
                + [(1, 1, line, 700 + 70 * i, top, w) for i, w in enumerate(right.split())])
    data = tesseract_data([*across(1, 100, "second column one", "first column one"),
                           *across(2, 130, "second column two", "first column two"),
                           *across(3, 160, "second column end.", "first column end.")])
    texts = [r.text() for r in _ocr.regions(_ocr._paragraphs(data, rtl=True))]
    assert [t.split("\n")[0] for t in texts] == ["first column one", "second column one"]
    assert "ara" in _ocr.RTL_LANGUAGES and "eng" not in _ocr.RTL_LANGUAGES


def test_a_table_with_a_narrow_value_column_is_not_split() -> None:
    rows = [("Carrier to Leeds", "4s."), ("Straw and sawdust", "6d."), ("Lamp oil, best", "1s.")]
    data = tesseract_data([
        (1, 1, line, left, 100 + 30 * line, word)
        for line, (name, value) in enumerate(rows, start=1)
        for left, word in [*((100 + 80 * i, w) for i, w in enumerate(name.split())), (700, value)]
    ])
    (region,) = _ocr.regions(_ocr._paragraphs(data))
    assert region.text().split("\n") == ["Carrier to Leeds 4s.", "Straw and sawdust 6d.",
                                         "Lamp oil, best 1s."]


def test_a_16_bit_scan_keeps_its_ink() -> None:
    """Pillow's convert("L") clips 16-bit values to white: a 16-bit scan read as blank."""
    scan = Image.new("I;16", (600, 400), 60_000)
    ImageDraw.Draw(scan).rectangle((100, 100, 300, 160), fill=2_000)
    grey = _ocr._for_tesseract(scan)
    assert grey.mode == "L" and not _ocr.is_blank(grey)
    assert grey.getpixel((200, 130)) < 20 and grey.getpixel((500, 300)) > 220
