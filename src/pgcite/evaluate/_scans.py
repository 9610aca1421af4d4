"""Synthetic scans: known text typeset onto page images, so OCR can be measured against it.

The OCR benchmark (bench/ocr.py) and the tests build their scans here: a page is a list of
:class:`Block` s (a heading, a paragraph, a list item), typeset in one column or in two under a
full-width title, at a given type size and scan resolution, in DejaVu Serif (Pillow's own font
where DejaVu is not installed). The text drawn is known exactly, so what OCR reads back can be
scored (:func:`pgcite.evaluate._cer.character_error_rate`) and so can the passages it makes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONTS = Path("/usr/share/fonts/truetype/dejavu")
Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


@dataclass(frozen=True)
class Block:
    """One thing on a page: a ``heading`` (bold, larger), a ``paragraph`` (wrapped, a blank
    line after it) or a list ``item`` (indented after a dash, close to the next item)."""

    kind: Literal["heading", "paragraph", "item"]
    text: str


def heading(text: str) -> Block:
    return Block("heading", text)


def paragraph(text: str) -> Block:
    return Block("paragraph", text)


def items(*texts: str) -> list[Block]:
    return [Block("item", text) for text in texts]


def font(pixels: int, *, bold: bool = False) -> Font:
    path = FONTS / ("DejaVuSerif-Bold.ttf" if bold else "DejaVuSerif.ttf")
    return (ImageFont.truetype(str(path), pixels) if path.exists()
            else ImageFont.load_default(size=pixels))


@dataclass(frozen=True)
class Layout:
    """Page size in inches, scan resolution, body type size in points."""

    width_in: float = 8.5
    height_in: float = 11.0
    dpi: int = 150
    points: float = 11.0

    def px(self, points: float) -> int:
        return round(points * self.dpi / 72)

    @property
    def size(self) -> tuple[int, int]:
        return round(self.width_in * self.dpi), round(self.height_in * self.dpi)


def page(blocks: Sequence[Block], layout: Layout = Layout()) -> Image.Image:
    """A white page with ``blocks`` typeset in one column between half-inch margins."""
    image = Image.new("L", layout.size, 255)
    margin = layout.dpi // 2
    _typeset(ImageDraw.Draw(image), blocks, margin, layout.size[0] - margin, margin, layout)
    return image


def two_columns(title: Sequence[Block], left: Sequence[Block], right: Sequence[Block],
                layout: Layout = Layout()) -> Image.Image:
    """``title`` across the page, then ``left`` and ``right`` in two columns under it."""
    image = Image.new("L", layout.size, 255)
    draw = ImageDraw.Draw(image)
    margin, width = layout.dpi // 2, layout.size[0]
    top = _typeset(draw, title, margin, width - margin, margin, layout)
    gutter = layout.dpi // 3
    middle = width // 2
    _typeset(draw, left, margin, middle - gutter // 2, top, layout)
    _typeset(draw, right, middle + gutter // 2, width - margin, top, layout)
    return image


def _typeset(draw: ImageDraw.ImageDraw, blocks: Sequence[Block], left: int, right: int,
             top: int, layout: Layout) -> int:
    """Draw ``blocks`` from ``top`` between ``left`` and ``right``; the y below the last."""
    body = layout.px(layout.points)
    leading = round(body * 1.45)
    y = top
    for block in blocks:
        if block.kind == "heading":
            size = round(body * 1.3)
            face, indent, x_text = font(size, bold=True), 0, 0
            y += leading // 2 if y > top else 0
        else:
            face = font(body)
            indent = round(body * 1.5) if block.kind == "item" else 0
            x_text = round(body * 1.2) if block.kind == "item" else 0
            size = body
        if block.kind == "item":
            draw.text((left + indent, y), "–", font=face, fill=0)
        for line in wrap(block.text, face, right - left - indent - x_text):
            draw.text((left + indent + x_text, y), line, font=face, fill=0)
            y += round(size * 1.45)
        y += {"heading": leading // 3, "paragraph": leading, "item": 0}[block.kind]
    return y


def wrap(text: str, face: Font, width: int) -> list[str]:
    """``text`` broken into lines no wider than ``width`` pixels, at spaces."""
    lines, line = [], ""
    for word in text.split():
        trial = f"{line} {word}".strip()
        if face.getlength(trial) > width and line:
            lines.append(line)
            line = word
        else:
            line = trial
    return [*lines, line] if line else lines


def text_of(blocks: Sequence[Block]) -> str:
    """What a perfect reading of ``blocks`` says (for character error rates)."""
    return "\n".join(block.text for block in blocks)


def degrade(image: Image.Image, seed: int) -> Image.Image:
    """A poor scan: tilted 1.5 degrees, blurred, and 4% of pixels flipped to speckle."""
    rng = random.Random(seed)
    image = image.rotate(1.5, expand=False, fillcolor=255, resample=Image.Resampling.BILINEAR)
    image = image.filter(ImageFilter.GaussianBlur(1.2))
    pixels = image.load()
    assert pixels is not None
    for _ in range(image.width * image.height // 25):
        x, y = rng.randrange(image.width), rng.randrange(image.height)
        pixels[x, y] = 0 if rng.random() < 0.5 else 255
    return image


def save_pdf(path: Path, pages: Sequence[Image.Image], dpi: int = 150) -> Path:
    """A PDF of image-only pages: no text layer at all, as a scanner makes."""
    pages[0].save(path, save_all=True, append_images=list(pages[1:]), resolution=dpi)
    return path
