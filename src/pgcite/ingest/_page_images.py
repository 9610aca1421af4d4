"""Scanned pages kept as images (docs/exhibits.md, "Scanned pages"): a citation of a passage
read by OCR opens the page it was read from, with the passage's block outlined. OCR
(``_ocr.read_page``) keeps the image of each page that yielded a passage, encoded here.

A page is rendered for OCR at ~300 dpi (a letter page is ~2550 x 3300 pixels, tens of MB as
raw pixels); it is stored downscaled to at most :data:`MAX_SIDE` pixels on its long side and
re-encoded as JPEG, and re-encoded smaller until it fits :data:`MAX_BYTES`. The OCR boxes stay
in the coordinates of the page OCR read; the stored sizes say how to scale them.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from pgcite._types import OcrPage, PageImage

if TYPE_CHECKING:
    from PIL.Image import Image

MAX_SIDE = 1600  # pixels on the long side: a page's words stay legible on a kiosk screen
MAX_BYTES = 600_000  # per page, after encoding
QUALITY = 70  # JPEG quality; lowered in steps while a page is over MAX_BYTES


def encode_page(image: Image) -> PageImage:
    """``image`` downscaled and re-encoded within the bounds above."""
    ocr_width, ocr_height = image.size
    picture = image.convert("L" if image.mode in ("1", "L", "LA", "I", "I;16") else "RGB")
    scale = min(1.0, MAX_SIDE / max(ocr_width, ocr_height))
    quality = QUALITY
    while True:
        size = (max(1, round(ocr_width * scale)), max(1, round(ocr_height * scale)))
        small = picture if size == picture.size else picture.resize(size)
        buffer = io.BytesIO()
        small.save(buffer, format="JPEG", quality=quality, optimize=True)
        if buffer.tell() <= MAX_BYTES or min(size) <= 200:  # small enough either way
            break
        quality, scale = (quality - 15, scale) if quality > 40 else (quality, scale * 0.75)
    return PageImage(media_type="image/jpeg", width=size[0], height=size[1],
                     ocr_width=ocr_width, ocr_height=ocr_height, data=buffer.getvalue())


def page_images(pages: list[OcrPage]) -> list[tuple[int, PageImage]]:
    """The images a document's OCR read kept, by page number."""
    return [(p.page, p.image) for p in pages if p.image is not None]
