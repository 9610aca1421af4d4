"""Read page images with Tesseract, as a reader would: one passage per page region, cited by page.

Scans (page images, PDFs without a text layer) would otherwise yield no text and vanish from the
collection. Tesseract's ``image_to_data`` gives every word with its block, paragraph and line,
box and confidence. Its blocks are layout fragments, not passages: a heading is a block of its
own and a list is cut into several, so one unit per block split "Inventory of instruments lent
by J. Hartley" from the list it introduces. Paragraphs are therefore grouped into *regions*
(:func:`regions`): a region runs down one column until the text moves to another column or a
wide gap separates sections, and a heading (or a list line) is never the end of one -- it stays
with what follows. A region is one unit, located ``p. N``; its text keeps the paragraphs apart
with blank lines, so the chunker cuts a long region between paragraphs, never between a heading
and the text it heads. Each unit's metadata holds the region's box and its paragraphs' boxes in
pixels of the page image, with the page's size (docs/ingest.md, "OCR").

A page read with low confidence is still ingested -- a poor transcription is better than none
-- but it is flagged in the ingest report (:data:`LOW_CONFIDENCE`), never dropped silently.

OCR is bounded (:class:`OcrLimits`, set in ``config.Settings``): pages per file, pixels per page
(checked from the image header or the PDF page size BEFORE anything is decoded or rendered) and
seconds per file; a file over a limit is refused whole with :class:`OverLimit`. A page with no
ink at all is not sent to Tesseract (:func:`is_blank`). Tesseract and pypdfium2 are optional
(the ``ocr`` extra and the ``tesseract-ocr`` system package): a file that needs them where they
are missing fails alone, with :class:`OcrUnavailable` saying what to install -- nothing here
imports them before that check.
"""

from __future__ import annotations

import functools
import importlib
import io
import math
import shutil
import statistics
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pgcite._types import OcrPage, Unit
from pgcite.ingest._page_images import encode_page

if TYPE_CHECKING:
    from PIL.Image import Image

    from pgcite.config import Settings

# A page whose mean word confidence (Tesseract's 0-100) is below this is flagged in the ingest
# report. Clean print reads at 90+; 60 is where Tesseract's output starts to need a human look.
LOW_CONFIDENCE = 60.0
# Rendering resolution for PDF pages without a text layer: Tesseract is trained on ~300 dpi.
RENDER_DPI = 300
# A PDF page too large for the pixel limit at RENDER_DPI is rendered at a lower resolution, but
# not below this one: under ~100 dpi body text is too small for Tesseract to read.
MIN_RENDER_DPI = 100
IMAGE_SUFFIXES: tuple[str, ...] = (".png", ".jpg", ".jpeg", ".tif", ".tiff")
# The blank-page check (bench/ocr.py, "blank check"): the page is shrunk by box averaging until
# its short side is about BLANK_SIDE pixels; it is blank when its lightest and darkest pixels
# differ by at most BLANK_RANGE grey levels. Measured: a white page 0, a scan's 1% speckle 19,
# scanner shading 20, 4% speckle 35 (read, to be safe); any text at all 40 (one faint grey word)
# to 140 (one letter at 11 pt).
BLANK_SIDE = 256
BLANK_RANGE = 24
# Region grouping (:func:`regions`): a gap wider than this many body-line heights between two
# paragraphs of a column starts a new region (one blank line between paragraphs is about 2).
SECTION_GAP = 2.6
# A paragraph of at most this many lines that does not end a sentence is a heading or a list
# line: it stays with the paragraph below it.
HEADING_LINES = 2
# Tesseract reads two columns with a narrow gutter as one, each line running across both. A
# strip at least this many body-line heights wide that no word of a block's lines touches,
# with at least GUTTER_WORDS words a line on either side (a table's narrow value column is not
# a column of text), splits the block into columns read one after the other.
GUTTER = 1.2
GUTTER_LINES = 3
GUTTER_WORDS = 3
_SENTENCE_END = (".", "!", "?", "。", "؟", ".\"", ".”", ".'", ".’", "!”", "?”")

# Tesseract's languages written right to left: their columns are read right one first.
RTL_LANGUAGES = frozenset({"ara", "heb", "fas", "urd", "yid", "syr"})
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


class OverLimit(Exception):
    """A scan over one of the :class:`OcrLimits`; ``limit`` names which (the setting's suffix:
    ``pages``, ``page_pixels``, ``seconds``) and the message says by how much."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


class DamagedPage(Exception):
    """A PDF page pdfium cannot render; the message names the page."""


@dataclass(frozen=True)
class OcrLimits:
    """How much OCR one file may cost (the defaults and their reasons: ``config.Settings``).
    ``until``: the whole ingest's deadline (``time.monotonic()``, an upload's time budget), which
    cuts a file's OCR short where it comes before the file's own ``max_seconds``."""

    max_pages: int
    max_page_pixels: int
    max_seconds: float
    until: float | None = None

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> OcrLimits:
        if settings is None:
            from pgcite.config import Settings

            settings = Settings()
        return cls(settings.ocr_max_pages, settings.ocr_max_page_pixels,
                   settings.ocr_max_seconds)


class _Budget:
    """One file's OCR against its limits: a deadline, and the checks made before each page."""

    def __init__(self, limits: OcrLimits) -> None:
        self.limits = limits
        own = time.monotonic() + limits.max_seconds
        self.ingest_first = limits.until is not None and limits.until < own
        self.deadline = limits.until if limits.until is not None and self.ingest_first else own

    def pages(self, count: int, *, exact: bool) -> None:
        """Refuse a file with more than the limit of pages to read (``count`` is a lower
        bound unless ``exact``: frames are counted only up to one past the limit)."""
        limit = self.limits.max_pages
        if count > limit:
            amount = f"{count} pages" if exact else f"more than {limit} pages"
            raise OverLimit("pages", f"{amount} to read by OCR, over the limit of {limit} a "
                            "file (PGCITE_OCR_MAX_PAGES)")

    def pixels(self, page: int, width: int, height: int) -> None:
        if width * height > self.limits.max_page_pixels:
            raise OverLimit("page_pixels", f"page {page} is {width} x {height} pixels "
                            f"({_megapixels(width * height)}), over the limit of "
                            f"{_megapixels(self.limits.max_page_pixels)} a page "
                            "(PGCITE_OCR_MAX_PAGE_PIXELS)")

    def seconds_left(self, page: int) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.spent(page)
        return left

    def spent(self, page: int) -> OverLimit:
        if self.ingest_first:
            return OverLimit("seconds", f"the ingest's time budget ran out during OCR, at page "
                             f"{page}")
        return OverLimit("seconds", f"OCR ran out of its {self.limits.max_seconds:g} s budget "
                         f"at page {page} (PGCITE_OCR_MAX_SECONDS)")


def _megapixels(pixels: int) -> str:
    return f"{pixels / 1e6:.1f} MP"


# --- what is installed ------------------------------------------------------------------------


def tesseract_language(ts_config: str) -> str:
    """Tesseract's code for a collection's text-search language (unknown ones read as English)."""
    return TESSERACT_LANGUAGES.get(ts_config, "eng")


@functools.cache
def _installed() -> tuple[str, tuple[str, ...]]:
    """Tesseract's version and installed languages, or :class:`OcrUnavailable`."""
    pytesseract = _optional("pytesseract", "pytesseract", "needs OCR")
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


def _optional(module: str, package: str, need: str) -> Any:
    """A module of the ``ocr`` extra, or :class:`OcrUnavailable` naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise OcrUnavailable(f"{need}, but {package} is not installed "
                             "(pip install 'pgcite[ocr]')") from exc


def _pillow() -> Any:
    _optional("PIL", "Pillow", "needs OCR")
    return importlib.import_module("PIL.Image")


def _pdfium() -> Any:
    return _optional("pypdfium2", "pypdfium2", "needs OCR of a page without text")


# --- files: image frames and PDF pages --------------------------------------------------------


def read_image(data: bytes, lang: str, limits: OcrLimits) -> tuple[list[Unit], list[OcrPage]]:
    """The regions of every page of an image file (a multi-page TIFF has several).

    Every frame's size is checked from its header before any frame is decoded (and before
    Tesseract is looked for: a bomb is refused where OCR is missing too), and the frames are
    then decoded one at a time, so memory holds one page, never the whole file."""
    budget = _Budget(limits)
    PILImage = _pillow()  # noqa: N806 -- the module, as Pillow's own docs name it

    with warnings.catch_warnings():  # sizes are checked below, against our own limit
        warnings.simplefilter("ignore", PILImage.DecompressionBombWarning)
        try:
            image = PILImage.open(io.BytesIO(data))
        except PILImage.DecompressionBombError as exc:  # past Pillow's own, higher limit
            raise OverLimit("page_pixels", "page 1 is over Pillow's decompression-bomb limit "
                            f"of {_megapixels(2 * (PILImage.MAX_IMAGE_PIXELS or 0))}") from exc
        with image:
            count = _frames(image, budget)
            version = check_language(lang)
            units: list[Unit] = []
            read: list[OcrPage] = []
            for index in range(count):
                image.seek(index)
                page_units, summary = read_page(image, index + 1, lang, version=version,
                                                budget=budget)
                units += page_units
                read.append(summary)
    return units, read


def _frames(image: Image, budget: _Budget) -> int:
    """How many frames ``image`` has, each within the pixel limit; headers only, no pixels."""
    count = 0
    while True:
        try:
            image.seek(count)
        except EOFError:
            break
        except _pillow().DecompressionBombError as exc:  # a later frame past Pillow's limit
            raise OverLimit("page_pixels", f"page {count + 1} is over Pillow's "
                            "decompression-bomb limit") from exc
        count += 1
        budget.pages(count, exact=False)
        budget.pixels(count, *image.size)
    image.seek(0)
    return count


def read_pdf_pages(data: bytes, numbers: Sequence[int], lang: str,
                   limits: OcrLimits) -> tuple[list[Unit], list[OcrPage]]:
    """The regions of the PDF's pages ``numbers`` (from 1), which have no text layer.

    The document is opened once; each page is sized before it is rendered (down to
    :data:`MIN_RENDER_DPI` if the pixel limit needs it) and looked at in a small rendering
    first, so a blank page costs a thumbnail, not a 300 dpi render and a Tesseract run."""
    version = check_language(lang)
    budget = _Budget(limits)
    budget.pages(len(numbers), exact=True)
    _pillow()  # pdfium's renderings become Pillow images
    pdf = _pdfium().PdfDocument(data)
    try:
        units: list[Unit] = []
        read: list[OcrPage] = []
        for number in numbers:
            page = pdf[number - 1]
            try:
                page_units, summary = _read_pdf_page(page, number, lang, version, budget)
            except (OverLimit, OcrUnavailable, ImportError):
                raise
            except Exception as exc:  # pdfium (or Tesseract) on a damaged page
                raise DamagedPage(f"cannot read page {number} by OCR ({type(exc).__name__}: "
                                  f"{exc})") from exc
            finally:
                page.close()
            units += page_units
            read.append(summary)
        return units, read
    finally:
        pdf.close()


def _read_pdf_page(page: Any, number: int, lang: str, version: str,
                   budget: _Budget) -> tuple[list[Unit], OcrPage]:
    width_pt, height_pt = page.get_size()
    budget.seconds_left(number)
    thumb = page.render(scale=_thumb_scale(width_pt, height_pt), grayscale=True).to_pil()
    if _flat(thumb):
        return [], blank_page(number)
    scale = render_scale(number, width_pt, height_pt, budget)
    image = page.render(scale=scale, grayscale=True).to_pil()
    return read_page(image, number, lang, version=version, budget=budget, blank_checked=True)


def _thumb_scale(width_pt: float, height_pt: float) -> float:
    """The blank check's rendering: the short side BLANK_SIDE pixels, the whole at most 16 times
    BLANK_SIDE squared (a page a hundred times longer than wide is no reason for a huge one)."""
    area = max(1.0, width_pt * height_pt)
    return min(BLANK_SIDE / max(1.0, min(width_pt, height_pt)), 4 * BLANK_SIDE / math.sqrt(area))


def render_scale(number: int, width_pt: float, height_pt: float, budget: _Budget) -> float:
    """Pixels per PDF point: RENDER_DPI, or less where the page would pass the pixel limit
    (down to MIN_RENDER_DPI; a page too large even then is over the limit)."""
    scale = RENDER_DPI / 72
    area = max(1.0, width_pt * height_pt)
    if area * scale * scale > budget.limits.max_page_pixels:
        # (a hair under: the rendering rounds each side up)
        scale = 0.995 * math.sqrt(budget.limits.max_page_pixels / area)
        if scale * 72 < MIN_RENDER_DPI:
            low = MIN_RENDER_DPI / 72
            budget.pixels(number, math.ceil(width_pt * low), math.ceil(height_pt * low))
    return scale


# --- one page ---------------------------------------------------------------------------------


def read_page(image: Image, page: int, lang: str, *, version: str | None = None,
              budget: _Budget | None = None,
              blank_checked: bool = False) -> tuple[list[Unit], OcrPage]:
    """The regions of one page image as units, and how the page read."""
    version = version or check_language(lang)
    budget = budget or _Budget(OcrLimits.from_settings())
    budget.pixels(page, *image.size)
    image = _for_tesseract(image)  # decodes it: only now, after the size check
    if not blank_checked and is_blank(image):
        return [], blank_page(page)
    import pytesseract

    try:
        data = pytesseract.image_to_data(image, lang=lang, output_type=pytesseract.Output.DICT,
                                         timeout=budget.seconds_left(page))
    except RuntimeError as exc:  # pytesseract's "Tesseract process timeout": it killed it
        if "timeout" in str(exc).lower():
            raise budget.spent(page) from exc
        raise
    paragraphs = _paragraphs(data, rtl=lang in RTL_LANGUAGES)
    confs = [c for p in paragraphs for c in p.confidences]
    mean = round(statistics.fmean(confs), 1) if confs else None
    low = mean is None or mean < LOW_CONFIDENCE
    units = [
        Unit(text=region.text(), locator=f"p. {page}", metadata={"ocr": {
            "engine": f"tesseract {version}", "lang": lang, "page": page, "region": number,
            "bbox": region.box(), "paragraphs": [p.box for p in region.paragraphs],
            "page_size": list(image.size),
            "confidence": round(statistics.fmean(region.confidences()), 1),
            "page_confidence": mean, "low_confidence": low,
        }})
        for number, region in enumerate(regions(paragraphs), start=1)
    ]
    # the page as OCR read it, kept to show a citation's block on it (a page without a passage
    # has nothing to cite)
    summary = OcrPage(page=page, confidence=mean, words=len(confs), low=low,
                      image=encode_page(image) if units else None)
    return units, summary


def blank_page(page: int) -> OcrPage:
    """A page with no ink, not sent to Tesseract: reported like a page where it found nothing."""
    return OcrPage(page=page, confidence=None, words=0, low=True, blank=True)


def _for_tesseract(image: Image) -> Image:
    """A bilevel or greyscale image as it is; anything else as greyscale. Tesseract binarises
    a grey image itself, and RGB would triple the pixels written for it and read by it."""
    if image.mode in ("1", "L"):
        image.load()
        return image
    if image.mode == "I" or image.mode.startswith("I;16"):  # 16-bit scans: convert() clips
        return image.convert("I").point(lambda v: v / 256).convert("L")  # to white; scale
    if "A" in image.getbands():  # transparent parts are paper: white, not black
        flat = _pillow().new("RGBA", image.size, (255, 255, 255, 255))
        flat.alpha_composite(image.convert("RGBA"))
        image = flat
    return image.convert("L")


def is_blank(image: Image) -> bool:
    """No ink on the page (:func:`ink_range` at most :data:`BLANK_RANGE`)."""
    return ink_range(image) <= BLANK_RANGE


def ink_range(image: Image) -> float:
    """How far the lightest and darkest pixels of the page are apart, in grey levels, once it
    is shrunk by box averaging (which evens out a scan's speckle) to about BLANK_SIDE pixels
    on its short side."""
    grey = image if image.mode == "L" else image.convert("L")
    factor = max(1, min(grey.size) // BLANK_SIDE)
    return _spread(grey.reduce(factor) if factor > 1 else grey)


def _flat(thumb: Image) -> bool:
    """A thumbnail rendered at about BLANK_SIDE pixels (a PDF page's) has no ink."""
    return _spread(thumb if thumb.mode == "L" else thumb.convert("L")) <= BLANK_RANGE


def _spread(grey: Image) -> float:
    low, high = grey.getextrema()  # one band: (min, max) as numbers
    assert isinstance(low, int | float) and isinstance(high, int | float)
    return high - low


# --- words -> paragraphs -> regions -----------------------------------------------------------


Box = list[int]  # [left, top, right, bottom] in pixels of the page image


def _union(boxes: Sequence[Box]) -> Box:
    return [min(b[0] for b in boxes), min(b[1] for b in boxes),
            max(b[2] for b in boxes), max(b[3] for b in boxes)]


@dataclass
class Line:
    words: list[str] = field(default_factory=list)
    boxes: list[Box] = field(default_factory=list)
    confidences: list[float] = field(default_factory=list)

    @property
    def box(self) -> Box:
        return _union(self.boxes)


@dataclass
class Paragraph:
    """One of Tesseract's paragraphs: its lines in order, with word confidences."""

    block: int  # Tesseract's block number
    lines: list[Line] = field(default_factory=list)

    @property
    def confidences(self) -> list[float]:
        return [c for line in self.lines for c in line.confidences]

    @property
    def box(self) -> Box:
        return _union([line.box for line in self.lines])

    def text(self) -> str:
        return "\n".join(" ".join(line.words) for line in self.lines)

    def line_height(self) -> float:
        return statistics.median(line.box[3] - line.box[1] for line in self.lines)


@dataclass
class Region:
    """Paragraphs a reader reads as one passage; ``joins[i]`` goes between paragraph i and i+1
    (a newline after a heading or list line, a blank line after a paragraph)."""

    paragraphs: list[Paragraph] = field(default_factory=list)
    joins: list[str] = field(default_factory=list)

    def text(self) -> str:
        parts = [self.paragraphs[0].text()]
        for join, paragraph in zip(self.joins, self.paragraphs[1:], strict=True):
            parts += [join, paragraph.text()]
        return "".join(parts)

    def box(self) -> Box:
        return _union([p.box for p in self.paragraphs])

    def confidences(self) -> list[float]:
        return [c for p in self.paragraphs for c in p.confidences]


def _paragraphs(data: dict[str, list[Any]], *, rtl: bool = False) -> list[Paragraph]:
    """Words grouped by Tesseract's paragraph and line, in reading order (``rtl``: a script
    written right to left, whose right column comes first); empty ones gone."""
    paragraphs: dict[tuple[int, int], Paragraph] = {}
    lines: dict[tuple[int, int, int], Line] = {}
    rows: Iterator[tuple[Any, ...]] = zip(
        data["text"], data["conf"], data["block_num"], data["par_num"], data["line_num"],
        data["left"], data["top"], data["width"], data["height"], strict=True,
    )
    for text, conf, block, par, line, left, top, width, height in rows:
        word = str(text).strip()
        if not word or float(conf) < 0:  # -1: a layout row, not a word
            continue
        key = (int(block), int(par))
        paragraph = paragraphs.setdefault(key, Paragraph(key[0]))
        if (*key, int(line)) not in lines:
            lines[(*key, int(line))] = Line()
            paragraph.lines.append(lines[(*key, int(line))])
        current = lines[(*key, int(line))]
        current.words.append(word)
        current.confidences.append(float(conf))
        current.boxes.append([int(left), int(top), int(left) + int(width),
                              int(top) + int(height)])
    found = list(paragraphs.values())
    return reading_order(found, _body_height(found), rtl=rtl) if found else []


def _body_height(paragraphs: Sequence[Paragraph]) -> float:
    """The page's typical line height: the median over every line."""
    return statistics.median(line.box[3] - line.box[1] for p in paragraphs for line in p.lines)


def reading_order(paragraphs: list[Paragraph], body: float, *,
                  rtl: bool = False) -> list[Paragraph]:
    """Tesseract's paragraphs, column by column where its blocks run across a gutter.

    A block of :data:`GUTTER_LINES` lines or more may show a gutter (:func:`_gutter`); a shorter
    one beside it (a heading over each column) takes that gutter when none of its words crosses
    it. Consecutive blocks split at one gutter are read as a reader would: all their left
    parts, then all their right parts -- the other way round for a script written right to
    left -- each side again, for three columns."""
    blocks: dict[int, list[Paragraph]] = {}
    for paragraph in paragraphs:
        blocks.setdefault(paragraph.block, []).append(paragraph)
    groups = list(blocks.values())
    gutters = [_gutter([line for p in group for line in p.lines], body) for group in groups]
    for i, group in enumerate(groups):
        for j in (i + 1, i - 1):
            if gutters[i] is None and 0 <= j < len(groups) and (gap := gutters[j]) is not None \
                    and not any(_crosses(box, gap) for p in group for box in _boxes(p)):
                gutters[i] = gap
    out: list[Paragraph] = []
    i = 0
    while i < len(groups):
        gap = gutters[i]
        if gap is None:
            out += groups[i]
            i += 1
            continue
        band: list[Paragraph] = []
        while i < len(groups) and (other := gutters[i]) is not None and _overlap(other, gap):
            band += groups[i]
            i += 1
        # each side has fewer words than the band (a gutter has words on both): this ends
        left, right = _split(band, gap)
        for side in (right, left) if rtl else (left, right):
            out += reading_order(side, body, rtl=rtl)
    return out


def _crosses(box: Box, gap: tuple[int, int]) -> bool:
    """A word box reaching over the middle of the gutter ``gap``."""
    return box[0] < (gap[0] + gap[1]) / 2 < box[2]


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return min(a[1], b[1]) > max(a[0], b[0])


def _split(band: list[Paragraph],
           gap: tuple[int, int]) -> tuple[list[Paragraph], list[Paragraph]]:
    """The paragraphs' parts left of the gutter, and right of it."""
    middle = (gap[0] + gap[1]) / 2
    left = [part for p in band if (part := _side(p, lambda box: box[2] <= middle)).lines]
    right = [part for p in band if (part := _side(p, lambda box: box[0] >= middle)).lines]
    return left, right


def _boxes(paragraph: Paragraph) -> Iterator[Box]:
    return (box for line in paragraph.lines for box in line.boxes)


def _gutter(lines: Sequence[Line], body: float) -> tuple[int, int] | None:
    """The widest strip between words that no line crosses, if it is a gutter between columns."""
    if len(lines) < GUTTER_LINES:
        return None
    boxes = sorted((box for line in lines for box in line.boxes), key=lambda b: b[0])
    best: tuple[int, int] | None = None
    reach = boxes[0][2]
    for box in boxes[1:]:
        if box[0] - reach >= GUTTER * body and (best is None or box[0] - reach > best[1] - best[0]):
            best = (reach, box[0])
        reach = max(reach, box[2])
    if best is None:
        return None
    sides = [(sum(b[2] <= best[0] for b in line.boxes), sum(b[0] >= best[1] for b in line.boxes))
             for line in lines]
    full = [(a, b) for a, b in sides if a and b]
    if len(full) < GUTTER_LINES // 2 + 1 or min(statistics.median(a for a, _ in full),
                                                 statistics.median(b for _, b in full)) < GUTTER_WORDS:
        return None
    return best


def _side(paragraph: Paragraph, keep: Callable[[Box], bool]) -> Paragraph:
    """The words of ``paragraph`` on one side of a gutter, line by line."""
    part = Paragraph(paragraph.block)
    for line in paragraph.lines:
        kept = [i for i, box in enumerate(line.boxes) if keep(box)]
        if kept:
            part.lines.append(Line([line.words[i] for i in kept], [line.boxes[i] for i in kept],
                                   [line.confidences[i] for i in kept]))
    return part


def regions(paragraphs: Sequence[Paragraph]) -> list[Region]:
    """Paragraphs (in Tesseract's reading order) grouped as a reader reads them.

    A paragraph continues the region above it if it sits in the same column (it overlaps the
    paragraph before horizontally and starts below it; reading order going back up means the
    next column) and the gap between them is at most :data:`SECTION_GAP` body lines -- or,
    after a heading or list line (:func:`is_heading`), narrower than the gap above that line:
    a heading sits closer to what it heads than to what went before. After a heading or list
    line the join is a newline, not a blank line, so no chunk boundary falls between them."""
    if not paragraphs:
        return []
    body = _body_height(paragraphs)
    out = [Region([paragraphs[0]])]
    gap_above = math.inf  # between the paragraph before and the one before it, in one column
    for before, paragraph in zip(paragraphs, paragraphs[1:], strict=False):
        gap = paragraph.box[1] - before.box[3]
        heading = is_heading(before, body)
        if _same_column(before, paragraph, body) and (
                gap <= SECTION_GAP * body or (heading and gap < gap_above)):
            out[-1].paragraphs.append(paragraph)
            out[-1].joins.append("\n" if heading else "\n\n")
            gap_above = gap
        else:
            out.append(Region([paragraph]))
            gap_above = math.inf
    return out


def is_heading(paragraph: Paragraph, body_height: float) -> bool:
    """A heading or a list line: a line or two that ends no sentence, or type larger than the
    page's body text (a title that ends with a full stop is still a title)."""
    if len(paragraph.lines) > HEADING_LINES:
        return False
    larger = paragraph.line_height() >= 1.3 * body_height
    return larger or not paragraph.text().rstrip().endswith(_SENTENCE_END)


def _same_column(above: Paragraph, below: Paragraph, body_height: float) -> bool:
    """``below`` is under ``above`` (give or take half a line) and overlaps it horizontally."""
    a, b = above.box, below.box
    return min(a[2], b[2]) > max(a[0], b[0]) and b[1] >= a[3] - 0.5 * body_height
