"""What a file says about itself: YAML front matter (Markdown, text), ``<meta>``/``<time>`` (HTML),
the document information and XMP of a PDF.

Front matter is written by the author in a field named ``date``, so a date there that cannot be read
fails the file. HTML and PDF metadata are often machine-written in other formats; a date there
that cannot be read is ignored (the document counts as undated unless another source dates it).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING, Any

import yaml

from pgcite.ingest._attributes import Attributes
from pgcite.ingest._dates import DateError, DateRange, parse_dates

if TYPE_CHECKING:  # imported where a page or PDF is read: the CLI starts without them
    from bs4 import BeautifulSoup
    from pypdf import PdfReader

# The block between a first line "---" and the next "---" (or "...") line.
_FRONT_MATTER = re.compile(r"---[ \t]*\n(.*?\n)?(?:---|\.\.\.)[ \t]*(?:\n|$)", re.DOTALL)
MAX_FRONT_MATTER = 64 * 1024
# <meta name=… content=…> names (lower case) of a page's date and author, best first.
_META_DATES = ("date", "dc.date", "dc.date.created", "dc.date.issued", "dcterms.date",
               "dcterms.created", "dcterms.issued", "citation_publication_date", "citation_date",
               "article:published_time", "datepublished")
_META_AUTHORS = ("author", "dc.creator", "dcterms.creator", "citation_author", "article:author")


class FrontMatterError(ValueError):
    """Front matter that is there but cannot be used; the message says why."""


def split_front_matter(text: str) -> tuple[Attributes | None, str]:
    """``(attributes, rest of the text)``; ``None`` when the text has no front matter block.

    A leading ``---`` block that is not a YAML mapping (a rule, a line of prose) is left alone.
    """
    match = _FRONT_MATTER.match(text)
    if not match:
        return None, text
    block = match.group(1) or ""
    if len(block) > MAX_FRONT_MATTER:
        raise FrontMatterError(f"front matter longer than {MAX_FRONT_MATTER // 1024} KiB")
    try:
        # No aliases: a few lines of them expand to billions of nodes once copied into JSON.
        if any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(block, Loader=yaml.SafeLoader)):
            raise FrontMatterError("front matter: YAML aliases (*name) are not supported")
        data = yaml.safe_load(block)
    except FrontMatterError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        raise FrontMatterError(f"front matter is not valid YAML{where}") from exc
    except RecursionError as exc:
        raise FrontMatterError("front matter nested too deep") from exc
    except ValueError as exc:  # a YAML timestamp that is no date: 1666-02-30
        raise FrontMatterError(f"front matter: not a valid date ({exc})") from exc
    if not isinstance(data, dict):
        return None, text
    try:
        return Attributes.from_mapping(data), text[match.end():]
    except ValueError as exc:
        raise FrontMatterError(f"front matter: {exc}") from exc


def html_attributes(soup: BeautifulSoup) -> Attributes:
    """A page's date from ``<meta>`` (else its one ``<time datetime>``) and its author."""
    metas: dict[str, str] = {}
    for tag in soup.find_all("meta"):
        name = tag.get("name") or tag.get("property") or tag.get("itemprop")
        content = tag.get("content")
        if isinstance(name, str) and isinstance(content, str) and content.strip():
            metas.setdefault(name.strip().lower(), content.strip())
    dates = next((d for key in _META_DATES if (d := _lenient(metas.get(key)))), None)
    author = next((metas[key] for key in _META_AUTHORS if key in metas), None)
    return Attributes(dates=dates or _time_element(soup), author=author)


def _time_element(soup: BeautifulSoup) -> DateRange | None:
    """The page's publication ``<time>``: one marked as such, else the only distinct one (a page
    listing many dates -- comments, an archive -- has no single date)."""
    from bs4.element import Tag

    times = [t for t in soup.find_all("time") if isinstance(t, Tag) and t.get("datetime")]
    marked = [t for t in times if t.get("itemprop") == "datePublished" or t.has_attr("pubdate")]
    values = {_lenient(str(t.get("datetime"))) for t in marked or times} - {None}
    return values.pop() if len(values) == 1 else None


def pdf_attributes(reader: PdfReader) -> Attributes:
    """The XMP Dublin Core date (what archives set) and the document's author. The creation date
    is not a date of the text -- it is when the PDF was made, which for a scan of an old letter
    is this year -- so it dates nothing unless asked for (:func:`pdf_creation_date`)."""
    dates: DateRange | None = None
    try:
        xmp = reader.xmp_metadata
        dc_dates = xmp.dc_date if xmp is not None else []
        if dc_dates:
            dates = _lenient(dc_dates[0])
        info = reader.metadata
        author = info.author if info is not None else None
    except Exception:  # noqa: BLE001 -- pypdf raises many types on malformed metadata: ignore it
        return Attributes(dates=dates)
    return Attributes(dates=dates,
                      author=(author.strip() or None) if isinstance(author, str) else None)


def pdf_creation_date(reader: PdfReader) -> DateRange | None:
    """When the PDF was made (its information dictionary's creation date), if it says."""
    try:
        info = reader.metadata
        return _lenient(info.creation_date) if info is not None else None
    except Exception:  # noqa: BLE001 -- malformed metadata: no date
        return None


def _lenient(value: Any) -> DateRange | None:
    if isinstance(value, dt.datetime | dt.date):
        return parse_dates(value)
    if not isinstance(value, str):
        return None
    try:
        return parse_dates(value)
    except DateError:
        return None
