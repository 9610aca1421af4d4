"""Read source files into :class:`Document` s.

One bad file must not sink an ingest of thousands, and half a file is worse than none (the user
would not notice what is missing). So each file is read completely first: either all its documents
are yielded or exactly one :class:`LoadError` for it, and iteration goes on with the next file.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from pgcite._errors import ConfigError, LoadError, MissingDependency, ScanLimitExceeded
from pgcite._types import Document, OcrPage, Unit
from pgcite.ingest import _ocr
from pgcite.ingest._attributes import Attributes, apply
from pgcite.ingest._catalogue import Catalogue
from pgcite.ingest._dates import DateError, DateRange, date_in_name, parse_dates
from pgcite.ingest._embedded import (
    FrontMatterError,
    html_attributes,
    pdf_attributes,
    pdf_creation_date,
    split_front_matter,
)
from pgcite.ingest._entries import entry_units
from pgcite.ingest._ocr import IMAGE_SUFFIXES, OcrLimits
from pgcite.ingest._provenance import MAPPED, METADATA
from pgcite.ingest._storable import document_problem

if TYPE_CHECKING:  # bs4 and pypdf are imported where a page or a PDF is read: a CLI command
    from bs4 import BeautifulSoup  # that reads none starts without them
    from bs4.element import Tag

SUPPORTED_SUFFIXES: tuple[str, ...] = (
    ".jsonl",
    ".txt",
    ".md",
    ".markdown",
    ".html",
    ".htm",
    ".pdf",
    *IMAGE_SUFFIXES,
)

# JSONL keys tried, in order, for each field when the mapping does not name one.
_DEFAULT_KEYS: dict[str, tuple[str, ...]] = {
    "id": ("_id", "id", "doc_id"),
    "text": ("text", "body", "content"),
    "title": ("title",),
    "date": ("date",),
    "date_end": ("date_end",),
    "author": ("author",),
    "corpus": ("corpus",),
    "source": ("source",),
    "locator": ("locator",),
}
_ATX_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_HTML_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
# Not reading matter: code, styling and site navigation would only pollute the chunks.
_HTML_DROP = ("script", "style", "nav", "noscript", "template")
# Elements that start a new paragraph in the extracted text.
_HTML_BLOCKS = frozenset((
    "address", "article", "aside", "blockquote", "caption", "dd", "details", "div", "dl", "dt",
    "fieldset", "figcaption", "figure", "footer", "form", "header", "hr", "li", "main", "ol", "p",
    "pre", "section", "summary", "table", "tr", "ul",
))  # fmt: skip


class FieldMapping(BaseModel):
    """Which JSONL key feeds which document field; ``None`` means the usual keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str | None = None
    text: str | None = None
    title: str | None = None
    date: str | None = None
    date_end: str | None = None
    author: str | None = None
    corpus: str | None = None
    source: str | None = None
    locator: str | None = None

    @classmethod
    def parse(cls, items: Sequence[str]) -> FieldMapping:
        """Build a mapping from CLI strings ``field=key``, e.g. ``["id=_id", "title=date_label"]``."""
        valid = ", ".join(cls.model_fields)
        chosen: dict[str, str] = {}
        for item in items:
            field, sep, key = (part.strip() for part in item.partition("="))
            if not sep or not field or not key:
                raise ConfigError(
                    f"bad field mapping {item!r}: expected FIELD=KEY (valid fields: {valid})"
                )
            if field not in cls.model_fields:
                raise ConfigError(f"unknown field {field!r} in {item!r} (valid fields: {valid})")
            if field in chosen:
                raise ConfigError(f"field {field!r} is mapped twice ({chosen[field]!r}, {key!r})")
            chosen[field] = key
        return cls(**chosen)


class Overrides(BaseModel):
    """Values forced on every document; ``None`` keeps what the source says.

    ``date`` (``1666-09-02``, ``1666-09``, ``1666`` or a range ``start/end``) dates the units of
    ONE file: a folder would get one date for all its files, almost surely by mistake.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    corpus: str | None = None
    author: str | None = None
    date: str | None = None

    def dates(self) -> DateRange | None:
        try:
            return parse_dates(self.date)
        except DateError as exc:
            raise ConfigError(f"--date: {exc}") from exc


class _Unreadable(Exception):
    """Why one file cannot be loaded; becomes a :class:`LoadError` naming the file (of the
    kind ``error`` makes: a missing dependency, a scan over a limit)."""

    def __init__(self, reason: str,
                 error: Callable[[str, str], LoadError] = LoadError) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error = error


# Modules an optional part of a load imports -> the extra that installs them.
_EXTRAS = {"pytesseract": "ocr", "pypdfium2": "ocr", "PIL": "ocr"}


def iter_documents(
    paths: Sequence[Path],
    *,
    mapping: FieldMapping | None = None,
    overrides: Overrides | None = None,
    catalogue: Catalogue | None = None,
    dates_from_names: bool = False,
    dates_from_timestamps: bool = False,
    entries: bool = False,
    ocr_lang: str = "eng",
    ocr_limits: OcrLimits | None = None,
) -> Iterator[Document | LoadError]:
    """Documents from files and directories (walked recursively), or one error per bad file.

    Images and PDF pages without a text layer are read by OCR in Tesseract's ``ocr_lang``,
    within ``ocr_limits`` (default: the ``PGCITE_OCR_*`` settings); a scan over them fails as
    :class:`ScanLimitExceeded`, one that needs a part not installed as
    :class:`MissingDependency`.

    A document's fields come from, highest precedence first: ``overrides`` > its ``catalogue``
    row > the file itself (front matter, HTML meta, PDF metadata, JSONL keys) > a date leading
    its file name (only with ``dates_from_names``) > when the file was made (a PDF's creation
    date, else its modification time; only with ``dates_from_timestamps``: a copy or a scan is
    made long after its text was written). Each value is recorded with its source
    (``Document.provenance``). With ``entries`` a .txt or .md file with date lines is read as
    its dated entries (:mod:`pgcite.ingest._entries`), each dated as the file states it.
    """
    mapping = mapping or FieldMapping()
    overrides = overrides or Overrides()
    limits = ocr_limits or OcrLimits.from_settings()
    forced = _forced(overrides, paths)
    seen: dict[str, str] = {}  # document id -> the file that produced it
    for path in paths:
        for item in _expand(Path(path)):
            if isinstance(item, LoadError):
                yield item
                continue
            file, rel = item
            if catalogue is not None and file.resolve() == catalogue.path:
                continue  # the catalogue itself (a .jsonl one) is not a document
            try:
                docs = _guarded_load(file, rel, mapping, ocr_lang, limits, entries)
                named = date_in_name(file.name) if dates_from_names else None
                made = file_made(file) if dates_from_timestamps else None
                row = catalogue.lookup(rel) if catalogue is not None else None
                docs = [_layered(doc, named, made, row, forced) for doc in docs]
                _check_storable(docs)
                _claim_ids(docs, str(file), seen)
            except _Unreadable as exc:
                yield exc.error(str(file), exc.reason)
                continue
            yield from docs


def _guarded_load(file: Path, rel: str, mapping: FieldMapping, ocr_lang: str,
                  limits: OcrLimits, entries: bool) -> list[Document]:
    """:func:`_load_file`, where anything a loader did not foresee fails this file alone."""
    try:
        return _load_file(file, rel, mapping, ocr_lang, limits, entries)
    except _Unreadable:
        raise
    except ImportError as exc:  # an optional part imported where it is not installed
        extra = _EXTRAS.get((exc.name or "").partition(".")[0])
        hint = f"pip install 'pgcite[{extra}]'" if extra else "reinstall pgcite"
        raise _Unreadable(f"needs the Python package {exc.name!r}, which is not installed "
                          f"({hint})", MissingDependency) from exc
    except RecursionError as exc:
        raise _Unreadable("nested too deeply to read") from exc
    except Exception as exc:  # a loader's bug must fail this file, not the run
        raise _Unreadable(f"cannot be read ({type(exc).__name__}: {exc})") from exc


def _forced(overrides: Overrides, paths: Sequence[Path]) -> Attributes:
    """The flags as the highest-precedence source; ``--date`` only for a single file."""
    dates = overrides.dates()
    if dates is not None and not (len(paths) == 1 and Path(paths[0]).is_file()):
        raise ConfigError("--date dates a single file",
                          hint="for a folder, use a sidecar catalogue (--catalogue) or "
                          "--dates-from-names")
    return Attributes(dates=dates, author=overrides.author, corpus=overrides.corpus,
                      source="flag")


def _layered(doc: Document, named: DateRange | None, made: DateRange | None,
             row: Attributes | None, forced: Attributes) -> Document:
    """``doc`` (what the file says) with the other sources laid over it in precedence order."""
    if named is not None:
        doc = apply(doc, Attributes(dates=named, source="name"), fill=True)
    if made is not None:
        doc = apply(doc, Attributes(dates=made, source="timestamp"), fill=True)
    if row is not None:
        doc = apply(doc, row)
    return apply(doc, forced)


def file_made(file: Path) -> DateRange | None:
    """When ``file`` was made: a PDF's creation date, else the file's modification day (local
    time). Only on request (``--dates-from-timestamps``): it is rarely when the text was written."""
    if file.suffix.lower() == ".pdf":
        from pypdf import PdfReader

        try:
            made = pdf_creation_date(PdfReader(file))
        except Exception:  # noqa: BLE001 -- an unreadable PDF fails in its loader, not here
            made = None
        if made is not None:
            return made
    try:
        day = dt.date.fromtimestamp(file.stat().st_mtime)
    except OSError:
        return None
    return day, day


def _expand(path: Path) -> Iterator[tuple[Path, str] | LoadError]:
    """The files a path names, with the name relative to that path (ids derive from it)."""
    if path.is_dir():
        for item in _walk(path):
            yield item if isinstance(item, LoadError) else (item, item.relative_to(path).as_posix())
    elif not path.exists():
        yield LoadError(str(path), "no such file or directory")
    elif not path.is_file():
        yield LoadError(str(path), "not a regular file")
    elif path.suffix.lower() not in SUPPORTED_SUFFIXES:
        kind = f"'{path.suffix}'" if path.suffix else "(no suffix)"
        yield LoadError(
            str(path),
            f"unsupported file type {kind} (supported: {', '.join(SUPPORTED_SUFFIXES)})",
        )
    else:
        yield path, path.name


def _walk(directory: Path) -> Iterator[Path | LoadError]:
    """Supported files below ``directory`` in sorted order, skipping hidden entries."""
    try:
        entries = sorted(directory.iterdir(), key=lambda p: p.name)
    except OSError as exc:
        yield LoadError(str(directory), f"cannot list directory ({exc.strerror})")
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            if not entry.is_symlink():  # a linked directory could loop back on itself
                yield from _walk(entry)
        elif entry.suffix.lower() in SUPPORTED_SUFFIXES:
            yield entry


def _check_storable(docs: list[Document]) -> None:
    for doc in docs:
        if problem := document_problem(doc):
            raise _Unreadable(problem)


def _claim_ids(docs: list[Document], file: str, seen: dict[str, str]) -> None:
    """Two files claiming one id would overwrite each other in the index: reject the later file."""
    for doc in docs:
        if doc.document_id in seen:
            raise _Unreadable(
                f"document id '{doc.document_id}' was already produced by {seen[doc.document_id]}"
            )
    seen.update((doc.document_id, file) for doc in docs)


def _load_file(file: Path, rel: str, mapping: FieldMapping, ocr_lang: str,
               limits: OcrLimits, entries: bool = False) -> list[Document]:
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise _Unreadable(f"cannot read file ({exc.strerror})") from exc
    suffix = file.suffix.lower()
    if suffix == ".jsonl":
        return _load_jsonl(data, file.name, mapping)
    doc_id, stem = slugify(rel), file.stem
    attrs: Attributes | None = None
    pages: list[OcrPage] = []
    title_source = "name"  # the file name; else where the loader found the title
    dates_source: str | None = None  # where the units' own dates come from, if they have any
    if suffix in (".txt", ".md", ".markdown"):
        attrs, text = _front_matter(_decode(data))
        if suffix == ".txt":
            title, units = stem, [Unit(text=text.strip())]
        else:
            title, units = _markdown_units(text, stem)
            title_source = "heading" if title != stem else title_source
        if entries and (dated := entry_units(text, title)) is not None:
            units, dates_source = dated, "file"  # each entry's date line
    elif suffix in (".html", ".htm"):
        title, units, attrs, title_source = _html_units(_decode_html(data), stem)
    elif suffix in IMAGE_SUFFIXES:
        title, (units, pages) = stem, _image_units(data, ocr_lang, limits)
    else:
        title, units, attrs, pages = _pdf_units(data, stem, ocr_lang, limits)
        title_source = "file" if title != stem else title_source
    provenance = {"title": title_source}
    if dates_source is not None:
        provenance["dates"] = dates_source
    doc = Document(document_id=doc_id, source=rel, title=title, units=units,
                   provenance=provenance, ocr_pages=pages)
    return [apply(doc, attrs) if attrs is not None else doc]


def _front_matter(text: str) -> tuple[Attributes | None, str]:
    try:
        return split_front_matter(text)
    except FrontMatterError as exc:
        raise _Unreadable(str(exc)) from exc


def slugify(rel: str) -> str:
    """Stable document id from a relative path: ``docs/Install Guide.md`` -> ``docs-install-guide-md``."""
    return re.sub(r"[^a-z0-9]+", "-", rel.lower()).strip("-")


def _decode(data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _Unreadable(f"line {line}: not valid UTF-8 (byte 0x{data[exc.start]:02x})") from exc
    return _no_nul(text).replace("\r\n", "\n").replace("\r", "\n")


def _no_nul(text: str) -> str:
    """``text``, unless it holds a NUL byte: valid UTF-8, but PostgreSQL cannot store it."""
    if (at := text.find("\x00")) >= 0:
        line = text.count("\n", 0, at) + 1
        raise _Unreadable(f"line {line}: contains a NUL byte, which PostgreSQL cannot store")
    return text


def _decode_html(data: bytes) -> str:
    """UTF-8, or the charset the page declares (older pages are often Latin-1)."""
    try:
        return _decode(data)
    except _Unreadable:
        from bs4.dammit import EncodingDetector

        declared = EncodingDetector.find_declared_encoding(data, is_html=True)
        if not declared:
            raise
        try:
            return _no_nul(data.decode(declared)).replace("\r\n", "\n")
        except (LookupError, UnicodeDecodeError) as exc:
            raise _Unreadable(f"cannot decode as declared charset {declared!r} ({exc})") from exc


# --- JSONL -----------------------------------------------------------------------------------


def _load_jsonl(data: bytes, file_name: str, mapping: FieldMapping) -> list[Document]:
    docs: list[Document] = []
    first_line: dict[str, int] = {}  # document id -> line it was first seen on
    keys: set[str] = set()  # keys with a value in some record
    # split("\n"), not splitlines(): JSON strings may hold raw U+2028 and similar line breaks.
    for number, line in enumerate(_decode(data).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = _parse_record(line)
            keys.update(k for k, v in record.items() if v is not None)
            doc = _record_document(record, file_name, mapping)
            if problem := document_problem(doc):
                raise _Unreadable(problem)
        except _Unreadable as exc:
            raise _Unreadable(f"line {number}: {exc.reason}") from exc
        if doc.document_id in first_line:
            raise _Unreadable(
                f"line {number}: duplicate id '{doc.document_id}' "
                f"(first on line {first_line[doc.document_id]})"
            )
        first_line[doc.document_id] = number
        docs.append(doc)
    if docs:  # an empty file has no records to match
        _check_mapping_used(mapping, keys)
    return docs


def _check_mapping_used(mapping: FieldMapping, keys: set[str]) -> None:
    """A mapped key that no record has is a typo; ingesting anyway would null that field in
    every record (``--map title=heading`` on records without ``heading``)."""
    for field, key in mapping.model_dump(exclude_none=True).items():
        if key not in keys:
            raise _Unreadable(f"--map {field}={key}: no record has a {key!r} key")


def _parse_record(line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise _Unreadable(f"not valid JSON ({exc.msg})") from exc
    except RecursionError as exc:  # [[[[… a few thousand deep: no stack holds it
        raise _Unreadable("JSON nested too deep") from exc
    except ValueError as exc:  # an integer of more than 4,300 digits (sys.int_info)
        raise _Unreadable("a number too long to read") from exc
    if not isinstance(record, dict):
        raise _Unreadable(f"expected a JSON object, got {type(record).__name__}")
    return record


def _record_document(record: dict[str, Any], file_name: str, mapping: FieldMapping) -> Document:
    used: set[str] = set()
    given: dict[str, str] = {}  # field -> its source: the user's --map, or the record's own key

    def pick(field: str) -> tuple[str, Any]:
        explicit = getattr(mapping, field)
        keys = (explicit,) if explicit else _DEFAULT_KEYS[field]
        for key in keys:
            if record.get(key) is not None:
                used.add(key)
                given[field] = "map" if explicit else "file"
                return key, record[key]
        return "' or '".join(keys), None

    doc_id = _record_id(*pick("id"))
    text = _record_text(*pick("text"))
    start = _parse_date(*pick("date"))
    end = _parse_date(*pick("date_end")) or start
    date_start, date_end = (start[0], end[1]) if start and end else (None, None)
    if end and not start:
        raise _Unreadable("date_end without a date")
    if date_start and date_end and date_end < date_start:
        raise _Unreadable(f"date_end {date_end} is before date {date_start}")
    title, author, corpus, source, locator = (
        _optional_str(*pick(f)) for f in ("title", "author", "corpus", "source", "locator")
    )
    unit = Unit(text=text, locator=locator, date_start=date_start, date_end=date_end)
    metadata = {k: v for k, v in record.items() if k not in used and v is not None}
    values = {"title": title, "author": author, "corpus": corpus}
    provenance = {field: given[field] for field, value in values.items() if value is not None}
    if date_start is not None:
        provenance["dates"] = given["date"]
    provenance.update((METADATA + k, "file") for k in metadata)
    # the key --map chose: a re-run without --map keeps the field, and not the key as metadata
    provenance.update((MAPPED + field, getattr(mapping, field)) for field, source in given.items()
                      if source == "map" and field in provenance)
    return Document(
        document_id=doc_id,
        source=source or file_name,
        units=[unit],
        title=title,
        author=author,
        corpus=corpus,
        metadata=metadata,
        provenance=provenance,
    )


def _record_id(key: str, value: Any) -> str:
    if value is None:
        raise _Unreadable(f"no id (no '{key}' key)")
    if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip():
        raise _Unreadable(f"id '{key}' must be a non-empty string or integer, got {value!r}")
    return str(value)


def _record_text(key: str, value: Any) -> str:
    if value is None:
        raise _Unreadable(f"no text (no '{key}' key)")
    if not isinstance(value, str):
        raise _Unreadable(f"text '{key}' must be a string, got {type(value).__name__}")
    return value


def _optional_str(key: str, value: Any) -> str | None:
    """Scalars become strings (a numeric title is still a title); nested JSON is a mistake."""
    if value is None:
        return None
    if isinstance(value, dict | list):
        raise _Unreadable(f"'{key}' must be a string, got {type(value).__name__}")
    return str(value).strip() or None


def _parse_date(key: str, value: Any) -> DateRange | None:
    try:
        return parse_dates(value)
    except DateError as exc:
        raise _Unreadable(f"'{key}': {exc}") from exc


# --- Markdown --------------------------------------------------------------------------------


def _markdown_units(text: str, stem: str) -> tuple[str, list[Unit]]:
    sections = _markdown_sections(text.split("\n"))
    h1 = next((path[0] for path, level, _ in sections if level == 1 and path), None)
    title = h1 or stem
    return title, _section_units(((path, body) for path, _, body in sections), title)


def _markdown_sections(lines: list[str]) -> list[tuple[tuple[str, ...], int, str]]:
    """``(heading path, heading level, body)`` per ATX heading, plus the text before the first
    (path ``()``, level 0). ``#`` lines inside fenced code blocks are code, not headings."""
    sections: list[tuple[tuple[str, ...], int, str]] = []
    stack: list[tuple[int, str]] = []
    level, body = 0, list[str]()
    fence: str | None = None  # the opening fence while inside a code block
    for line in lines:
        fence_match = _FENCE.fullmatch(line)
        if fence is not None:
            if _closes_fence(fence, fence_match):
                fence = None
        elif fence_match and not (fence_match[1][0] == "`" and "`" in fence_match[2]):
            fence = fence_match[1]
        elif heading := _ATX_HEADING.fullmatch(line):
            sections.append((tuple(t for _, t in stack), level, "\n".join(body).strip()))
            level, body = len(heading[1]), []
            stack = [(lvl, t) for lvl, t in stack if lvl < level] + [
                (level, (heading[2] or "").strip())
            ]
            continue
        body.append(line)
    sections.append((tuple(t for _, t in stack), level, "\n".join(body).strip()))
    return sections


def _closes_fence(fence: str, match: re.Match[str] | None) -> bool:
    """A fence closes with the same character, at least as long, and nothing after it."""
    return bool(
        match and match[1][0] == fence[0] and len(match[1]) >= len(fence) and not match[2].strip()
    )


def _section_units(sections: Iterator[tuple[tuple[str, ...], str]], doc_title: str) -> list[Unit]:
    """One unit per non-empty section; its title and locator are the heading path."""
    units: list[Unit] = []
    for path, body in sections:
        if not body:
            continue
        if not path:  # text before the first heading
            units.append(Unit(text=body, title=doc_title))
            continue
        label = " > ".join(p for p in path if p) or None
        units.append(Unit(text=body, title=label, locator=label))
    return units


# --- HTML ------------------------------------------------------------------------------------


def _html_units(text: str, stem: str) -> tuple[str, list[Unit], Attributes, str]:
    """A page's title (and where it came from: ``<title>``, its first ``h1``, or the file
    name), its units and what its ``<meta>`` says."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(text, "html.parser")
    attrs = html_attributes(soup)
    for tag in soup.find_all(_HTML_DROP):
        tag.decompose()
    title, source = _html_title(soup) or (stem, "name")
    root = soup.body or soup
    figures: list[Unit] = []
    units = _section_units(iter(_html_sections(root, figures)), title)
    return title, units + [f if f.title else f.model_copy(update={"title": title})
                           for f in figures], attrs, source


def _html_title(soup: BeautifulSoup) -> tuple[str, str] | None:
    from bs4.element import Tag

    for tag, source in ((soup.title, "file"), (soup.find("h1"), "heading")):
        if isinstance(tag, Tag) and (text := _squash(tag.get_text(" "))):
            return text, source
    return None


def _html_sections(root: Tag, figures: list[Unit]) -> list[tuple[tuple[str, ...], str]]:
    """``(heading path, body)`` for the text before the first heading and after each h1–h6.

    Figures (a ``<figure>``'s caption and alt text, an ``<img>``'s alt text) go to ``figures``
    as passages of their own, located by their section and number; a caption is not body text.
    """
    from bs4.element import NavigableString, Tag

    sections: list[tuple[tuple[str, ...], str]] = []
    stack: list[tuple[int, str]] = []
    parts: list[str] = []
    for node in root.descendants:
        if isinstance(node, Tag):
            if node.name == "figure" or (node.name == "img" and node.find_parent("figure") is None):
                _add_figure(node, tuple(t for _, t in stack), figures)
            if node.name in _HTML_HEADINGS:
                sections.append((tuple(t for _, t in stack), _tidy("".join(parts))))
                level, parts = int(node.name[1]), []
                stack = [(lvl, t) for lvl, t in stack if lvl < level] + [
                    (level, _squash(node.get_text(" ")))
                ]
            elif node.name == "br":
                parts.append("\n")
            elif node.name in _HTML_BLOCKS:
                parts.append("\n\n")
        # Exact type: subclasses are comments, doctypes, CDATA and the like, not reading text.
        elif (type(node) is NavigableString and node.find_parent(_HTML_HEADINGS) is None
              and node.find_parent("figcaption") is None):
            in_pre = node.find_parent("pre") is not None
            parts.append(str(node) if in_pre else re.sub(r"\s+", " ", str(node)))
    sections.append((tuple(t for _, t in stack), _tidy("".join(parts))))
    return sections


def _add_figure(node: Tag, path: tuple[str, ...], figures: list[Unit]) -> None:
    """A figure's caption and the alt text of its images, as one passage ("figure N")."""
    from bs4.element import Tag

    caption_tag = node.find("figcaption") if node.name == "figure" else None
    caption = _squash(caption_tag.get_text(" ")) if isinstance(caption_tag, Tag) else ""
    images = [node] if node.name == "img" else [i for i in node.find_all("img")
                                                 if isinstance(i, Tag)]
    alts = [_squash(str(i.get("alt") or "")) for i in images]
    alts = [a for a in dict.fromkeys(alts) if a and a != caption]  # once each, not the caption
    text = "\n".join(t for t in (caption, *alts) if t)
    if not text:
        return  # a decorative image (alt="") says nothing to cite
    number = len(figures) + 1
    label = " > ".join(p for p in path if p)
    sources = [str(i.get("src")) for i in images if i.get("src")]
    figures.append(Unit(
        text=text, title=label or None,
        locator=f"{label}, figure {number}" if label else f"figure {number}",
        metadata={"figure": {"number": number, "caption": caption or None, "alt": alts,
                             "src": sources}},
    ))


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _tidy(text: str) -> str:
    """Trim spaces around line breaks and keep at most one blank line between paragraphs."""
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r" ?\n ?", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


# --- PDF -------------------------------------------------------------------------------------


def _pdf_units(data: bytes, stem: str, ocr_lang: str,
               limits: OcrLimits) -> tuple[str, list[Unit], Attributes, list[OcrPage]]:
    """One unit per page with a text layer, located as ``p. N``; the pages without one are read
    by OCR (one unit per page region, also ``p. N``), in page order."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise _Unreadable("not a readable PDF (encrypted)")
        # A NUL in extracted text is a glyph the PDF maps to no character, not the author's text.
        pages = [(page.extract_text() or "").replace("\x00", "") for page in reader.pages]
        meta_title = reader.metadata.title if reader.metadata else None
        attrs = pdf_attributes(reader)
    except _Unreadable:
        raise
    except Exception as exc:  # pypdf raises many exception types on damaged files
        raise _Unreadable(f"not a readable PDF ({type(exc).__name__}: {exc})") from exc
    by_page = {number: [Unit(text=text.strip(), locator=f"p. {number}")]
               for number, text in enumerate(pages, start=1) if text.strip()}
    scanned = [number for number in range(1, len(pages) + 1) if number not in by_page]
    ocr_units, summaries = _ocr_pdf_pages(data, scanned, ocr_lang, limits) if scanned else ([], [])
    for unit in ocr_units:
        by_page.setdefault(unit.metadata["ocr"]["page"], []).append(unit)
    units = [unit for number in sorted(by_page) for unit in by_page[number]]
    if not units:
        unavailable = next((p.error for p in summaries if p.error), None)
        if unavailable:
            raise _Unreadable(f"no page has a text layer, and it {unavailable}", MissingDependency)
        raise _Unreadable("no text on any page, not even by OCR")
    title = meta_title.strip() if isinstance(meta_title, str) and meta_title.strip() else stem
    return title, units, attrs, summaries


def _ocr_pdf_pages(data: bytes, numbers: list[int], lang: str,
                   limits: OcrLimits) -> tuple[list[Unit], list[OcrPage]]:
    """OCR of the PDF's pages without a text layer. Where OCR cannot run, those pages are
    reported as not read (a PDF with a text layer elsewhere keeps those pages; one without any
    fails, saying what to install)."""
    try:
        return _ocr.read_pdf_pages(data, numbers, lang, limits)
    except _ocr.OcrUnavailable as exc:
        return [], [OcrPage(page=n, confidence=None, words=0, low=True, error=str(exc))
                    for n in numbers]
    except _ocr.OverLimit as exc:
        raise _over_limit(exc) from exc
    except _ocr.DamagedPage as exc:
        raise _Unreadable(str(exc)) from exc


def _over_limit(exc: _ocr.OverLimit) -> _Unreadable:
    return _Unreadable(f"scan too large: {exc}",
                       lambda path, reason: ScanLimitExceeded(path, reason, limit=exc.limit))


# --- images ----------------------------------------------------------------------------------


def _image_units(data: bytes, lang: str,
                 limits: OcrLimits) -> tuple[list[Unit], list[OcrPage]]:
    """A scanned page (or several, in a multi-page TIFF) read by OCR."""
    try:
        units, read = _ocr.read_image(data, lang, limits)
    except _ocr.OcrUnavailable as exc:
        raise _Unreadable(f"an image {exc}", MissingDependency) from exc
    except _ocr.OverLimit as exc:
        raise _over_limit(exc) from exc
    except ImportError:
        raise
    except Exception as exc:  # Pillow raises many types on damaged or unknown images
        raise _Unreadable(f"not a readable image ({type(exc).__name__}: {exc})") from exc
    if not units:
        raise _Unreadable("OCR recognised no text in the image")
    return units, read
