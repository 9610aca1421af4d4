"""Read page images with Tesseract: one unit per text block, located ``p. N, block K``.

Scans (page images, PDFs without a text layer) would otherwise yield no text and vanish from the
collection. Tesseract's ``image_to_data`` gives every word with its block number, box and
confidence, so a block's region (its bounding box) and a page's mean confidence come with the
text. A page read with low confidence is still ingested -- a poor transcription is better than
none -- but it is flagged in the ingest report (:data:`LOW_CONFIDENCE`), never dropped silently.

Tesseract is optional (the ``ocr`` extra and the ``tesseract-ocr`` system package); a file that
needs it where it is missing fails alone, with a reason that says what to install.
"""

from __future__ import annotations

import functools
import shutil
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pgcite._types import OcrPage, Unit

if TYPE_CHECKING:
    from PIL.Image import Image

# A page whose mean word confidence (Tesseract's 0-100) is below this is flagged in the ingest
# report. Clean print reads at 90+; 60 is where Tesseract's output starts to need a human look.
LOW_CONFIDENCE = 60.0
# Rendering resolution for PDF pages without a text layer: Tesseract is trained on ~300 dpi.
RENDER_DPI = 300
IMAGE_SUFFIXES: tuple[str, ...] = (".png", ".jpg", ".jpeg", ".tif", ".tiff")

# A collection's text-search language (PostgreSQL's config name) -> Tesseract's language code.
TESSERACT_LANGUAGES: dict[str, str] = {
    "simple": "eng", "english": "eng", "arabic": "ara", "german": "deu", "spanish": "spa",
    "french": "fra", "italian": "ita", "portuguese": "por", "dutch": "nld", "russian": "rus",
    "swedish": "swe", "danish": "dan", "norwegian": "nor", "finnish": "fin", "greek": "ell",
    "turkish": "tur", "hungarian": "hun", "romanian": "ron", "indonesian": "ind",
    "irish": "gle", "lithuanian": "lit", "nepali": "nep", "serbian": "srp", "tamil": "tam",
    "yiddish": "yid", "armenian": "hye", "catalan": "cat", "basque": "eus",
}  # fmt: skip


class OcrUnavailable(Exception):
    """OCR is needed for a file but cannot run here; the message says what to install."""


@dataclass
class _Block:
    words: list[str] = field(default_factory=list)
    confidences: list[float] = field(default_factory=list)
    lines: dict[tuple[int, int], list[str]] = field(default_factory=dict)
    box: list[int] = field(default_factory=lambda: [1 << 30, 1 << 30, 0, 0])

    def add(self, word: str, conf: float, line: tuple[int, int], box: tuple[int, ...]) -> None:
        self.words.append(word)
        self.confidences.append(conf)
        self.lines.setdefault(line, []).append(word)
        left, top, width, height = box
        b = self.box
        b[0], b[1] = min(b[0], left), min(b[1], top)
        b[2], b[3] = max(b[2], left + width), max(b[3], top + height)

    def text(self) -> str:
        return "\n".join(" ".join(words) for words in self.lines.values())


def tesseract_language(ts_config: str) -> str:
    """Tesseract's code for a collection's text-search language (unknown ones read as English)."""
    return TESSERACT_LANGUAGES.get(ts_config, "eng")


@functools.cache
def _installed() -> tuple[str, tuple[str, ...]]:
    """Tesseract's version and installed languages, or :class:`OcrUnavailable`."""
    try:
        import pytesseract
    except ImportError as exc:
        raise OcrUnavailable("needs OCR, but pytesseract is not installed "
                             "(pip install 'pgcite[ocr]')") from exc
    if shutil.which(pytesseract.pytesseract.tesseract_cmd) is None:
        raise OcrUnavailable("needs OCR, but the tesseract program is not installed "
                             "(Debian/Ubuntu: apt-get install tesseract-ocr)")
    langs = tuple(sorted(set(pytesseract.get_languages(config="")) - {"osd"}))
    return str(pytesseract.get_tesseract_version()), langs


def check_language(lang: str) -> str:
    """The Tesseract version, if ``lang``'s data is installed; else why not, with what is."""
    version, langs = _installed()
    if lang not in langs:
        raise OcrUnavailable(
            f"needs OCR in {lang!r}, but Tesseract has no {lang!r} language data "
            f"(installed: {', '.join(langs) or 'none'}; Debian: apt-get install "
            f"tesseract-ocr-{lang})"
        )
    return version


def read_page(image: Image, page: int, lang: str) -> tuple[list[Unit], OcrPage]:
    """The text blocks of one page image as units, and how the page read."""
    import pytesseract

    version = check_language(lang)
    data = pytesseract.image_to_data(image.convert("RGB"), lang=lang,
                                     output_type=pytesseract.Output.DICT)
    blocks = _blocks(data)
    confs = [c for b in blocks for c in b.confidences]
    mean = round(statistics.fmean(confs), 1) if confs else None
    low = mean is None or mean < LOW_CONFIDENCE
    summary = OcrPage(page=page, confidence=mean, words=len(confs), low=low)
    units = [
        Unit(text=block.text(), locator=f"p. {page}, block {number}", metadata={"ocr": {
            "engine": f"tesseract {version}", "lang": lang, "page": page, "block": number,
            "bbox": block.box, "page_size": list(image.size),
            "confidence": round(statistics.fmean(block.confidences), 1),
            "page_confidence": mean, "low_confidence": low,
        }})
        for number, block in enumerate(blocks, start=1)
    ]
    return units, summary


def _blocks(data: dict[str, list[Any]]) -> list[_Block]:
    """Words grouped by Tesseract's block, in reading order; blocks without a word are gone."""
    blocks: dict[int, _Block] = {}
    rows: Iterable[tuple[Any, ...]] = zip(
        data["text"], data["conf"], data["block_num"], data["par_num"], data["line_num"],
        data["left"], data["top"], data["width"], data["height"], strict=True,
    )
    for text, conf, block, par, line, *box in rows:
        word = str(text).strip()
        if not word or float(conf) < 0:  # -1: a layout row, not a word
            continue
        blocks.setdefault(int(block), _Block()).add(
            word, float(conf), (int(par), int(line)), tuple(int(v) for v in box))
    return [blocks[k] for k in sorted(blocks)]


def image_pages(data: bytes) -> list[Image]:
    """The pages of an image file (a multi-page TIFF has several)."""
    import io

    from PIL import Image as PILImage
    from PIL import ImageSequence

    image = PILImage.open(io.BytesIO(data))
    return [frame.copy() for frame in ImageSequence.Iterator(image)]


def render_pdf_page(data: bytes, index: int, dpi: int = RENDER_DPI) -> Image:
    """Page ``index`` (from 0) of a PDF as an image, for a page without a text layer."""
    try:
        import pypdfium2
    except ImportError as exc:
        raise OcrUnavailable("needs OCR of a page without text, but pypdfium2 is not "
                             "installed (pip install 'pgcite[ocr]')") from exc
    pdf = pypdfium2.PdfDocument(data)
    try:
        image: Image = pdf[index].render(scale=dpi / 72).to_pil()
        return image
    finally:
        pdf.close()
