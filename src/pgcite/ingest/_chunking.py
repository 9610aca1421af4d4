"""Split documents into citable chunks that fit the embedder's token budget.

A chunk never crosses a natural unit (so it has one date and one locator). Within a unit we cut at
the coarsest boundary that makes things fit: paragraphs, then sentences, then words, then
characters. Text is cut by offsets into the original string, so bodies keep the source's spelling
and spacing inside paragraphs.

``count_tokens`` is the embedder's tokenizer and can be slow, so every paragraph piece is counted
once and chunk sizes are sums of those counts (with a 2% margin, since tokenizers are not exactly
additive). Each finished chunk is then counted once more as a whole; the rare chunk that the sum
underestimated is split again, so the budget holds for the real tokenizer, not just the estimate.

What the embedder reads is the chunk's *context* -- its title, or with ``contextual="header"`` a
one-line header of title, locator, dates and author -- then a newline, then the body. The context
is counted against the budget, so context + body fits it (unless the context alone leaves under
MIN_BODY_TOKENS). :func:`embedding_text` is the one place that builds that text, for ingest and
re-embedding alike.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pgcite._errors import ConfigError
from pgcite._types import ChunkDraft, Contextual, Document, Unit

CountTokens = Callable[[str], int]

# Below this many body tokens the context eats too much of the budget (see _body_budget).
MIN_BODY_TOKENS = 32
SITUATE_MAX_TOKENS = 64  # reserved for contextual = "llm" (the sentence is cut to fit)
# A context header longer than this is cut at a word (a title can be a whole paragraph).
HEADER_MAX_CHARS = 200
HEADER_SEPARATOR = " — "
_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
# Packing aims under the budget by this factor because sum-of-parts only estimates the whole.
SAFETY = 0.98

_BLANK_LINE = re.compile(r"\n[ \t\r]*\n")
_PARAGRAPH_BREAKS = re.compile(r"\n(?:[ \t\r]*\n)+")
_WORD = re.compile(r"\S+")
# A sentence ends at Western/Arabic punctuation followed by whitespace, or at CJK punctuation
# (which is not followed by a space). Closing quotes and brackets stay with their sentence.
_SENTENCE_END = re.compile(r"[.!?…؟]+[\"'”’»)\]]*(?=\s)|[。！？]+[\"'”’」』)\]）]*")
# "Mr. Pepys" is one sentence. A short list is enough; a wrong cut only costs a little context.
_ABBREVIATIONS = frozenset(
    ("mr", "mrs", "ms", "dr", "prof", "st", "sr", "jr", "vs", "cf", "fig", "viz", "al", "e.g", "i.e")
)  # fmt: skip


@dataclass(frozen=True)
class _Piece:
    """A span ``[start, end)`` of paragraph ``para`` that is never cut further when packing."""

    para: int
    start: int
    end: int
    tokens: int


@dataclass(frozen=True)
class _Packed:
    pieces: list[_Piece]
    n_overlap: int  # leading pieces repeated from the previous chunk


def citation_suffix(i: int) -> str:
    """Bijective base-26 letters: 0 -> "a", 25 -> "z", 26 -> "aa", 27 -> "ab"."""
    if i < 0:
        raise ValueError(f"citation ordinal must be >= 0, got {i}")
    letters = ""
    n = i + 1
    while n > 0:
        n, rest = divmod(n - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return letters


def format_citation(
    *,
    author: str | None,
    title: str | None,
    date_start: dt.date | None,
    date_end: dt.date | None,
    source: str | None,
    locator: str | None,
) -> str:
    """Caption-ready citation, e.g. ``Samuel Pepys, 2nd, 1666-09-12, chapter-7.xhtml``. A
    locator the title ends with already (a section's heading path) is not said twice."""
    parts = [author, title, _format_dates(date_start, date_end), source,
             None if _says(title, locator) else locator]
    return ", ".join(p.strip() for p in parts if p and p.strip())


def _says(title: str | None, locator: str | None) -> bool:
    """Whether ``title`` ends with ``locator`` (``Notes > Expenses`` says ``Expenses``)."""
    if not title or not locator:
        return False
    return title == locator or title.endswith(f" > {locator}")


def chunk_title(doc: Document, heading: str | None) -> str | None:
    """A chunk's title: its document's, then the heading path of its section, if any
    (``Field notes > Arthington valley``). The keyword leg reads it (the ``title`` column is
    indexed with the body) and the context header shows it, so a document is found by its
    title and a section by its headings. A path that starts at the title already (a Markdown
    file titled by its ``#`` heading) is not prefixed again, nor is a section's path prefixed
    with a title made up from the file name."""
    title = doc.title
    if heading is None or title is None or heading == title \
            or heading.startswith(f"{title} > ") or doc.provenance.get("title") == "name":
        return heading or title
    return f"{title} > {heading}"


def _format_dates(start: dt.date | None, end: dt.date | None) -> str | None:
    if start and end and end != start:
        return f"{start.isoformat()}–{end.isoformat()}"
    first = start or end
    return first.isoformat() if first else None


def context_header(
    *,
    title: str | None,
    locator: str | None,
    date_start: dt.date | None,
    date_end: dt.date | None,
    author: str | None,
) -> str:
    """One line of document context, only the parts that exist, e.g.
    ``Diary — 12 September 1666 — Samuel Pepys`` ("" when there are none). A locator the title
    ends with already is not repeated."""
    parts = [title, None if _says(title, locator) else locator,
             _spoken_dates(date_start, date_end), author]
    header = HEADER_SEPARATOR.join(" ".join(p.split()) for p in parts if p and p.strip())
    if len(header) <= HEADER_MAX_CHARS:
        return header
    cut = header.rfind(" ", 0, HEADER_MAX_CHARS)
    return header[: cut if cut > 0 else HEADER_MAX_CHARS].rstrip(" —") + "…"


def _spoken_dates(start: dt.date | None, end: dt.date | None) -> str | None:
    """Dates as words, the way queries name them ("September 1666"), not ISO."""
    first = start or end
    if first is None:
        return None
    if start and end and end != start:
        return f"{_spoken(start)} – {_spoken(end)}"
    return _spoken(first)


def _spoken(day: dt.date) -> str:
    return f"{day.day} {_MONTHS[day.month - 1]} {day.year}"


def embedding_context(chunk: ChunkDraft, contextual: Contextual = "off") -> str | None:
    """What the embedder reads before the body: the title, or the context header."""
    if contextual in ("header", "llm"):
        header = context_header(
            title=chunk.title, locator=chunk.locator, date_start=chunk.date_start,
            date_end=chunk.date_end, author=chunk.author,
        )
        # "llm": the header, then the model's situating sentence (when it wrote one)
        parts = [header, chunk.context if contextual == "llm" else None]
        return "\n".join(p for p in parts if p) or None
    return chunk.title


def embedding_text(chunk: ChunkDraft, contextual: Contextual = "off") -> str:
    """The text that is embedded for ``chunk`` (its stored body stays the chunk text alone)."""
    context = embedding_context(chunk, contextual)
    return f"{context}\n{chunk.body}" if context else chunk.body


def chunk_document(
    doc: Document,
    *,
    count_tokens: CountTokens,
    max_tokens: int = 350,
    overlap_tokens: int = 0,
    contextual: Contextual = "off",
) -> list[ChunkDraft]:
    """Cut ``doc`` into chunks whose embedding text (context + body, see :func:`embedding_text`)
    has at most ``max_tokens``, in document order."""
    if max_tokens < 1:
        raise ConfigError(f"max_tokens must be at least 1, got {max_tokens}")
    if not 0 <= overlap_tokens < max_tokens:
        raise ConfigError(
            f"overlap_tokens must be between 0 and max_tokens - 1 ({max_tokens - 1}), "
            f"got {overlap_tokens}"
        )
    drafts: list[ChunkDraft] = []
    for unit in doc.units:
        title = chunk_title(doc, unit.title)
        # Every chunk of a unit has the same context: measure it on a body-less draft.
        context = embedding_context(_draft(doc, unit, title, "", 0), contextual)
        # "llm": room for the situating sentence, written after chunking (at most this long)
        room = max_tokens - (SITUATE_MAX_TOKENS if contextual == "llm" else 0)
        budget = _body_budget(context, room, count_tokens, header=contextual != "off")
        for body in _unit_bodies(unit.text, budget, overlap_tokens, count_tokens):
            drafts.append(_draft(doc, unit, title, body, len(drafts)))
    return drafts


def _body_budget(
    context: str | None, max_tokens: int, count: CountTokens, *, header: bool
) -> int:
    budget = max_tokens - (count(context) if context else 0)
    if budget >= MIN_BODY_TOKENS:
        return budget
    # The context leaves too little room. A title is left out of the budget, as it always was; a
    # header (at most HEADER_MAX_CHARS) keeps its bodies small, so it overshoots by less.
    return min(max_tokens, MIN_BODY_TOKENS) if header else max_tokens


def _draft(doc: Document, unit: Unit, title: str | None, body: str, ordinal: int) -> ChunkDraft:
    date_end = unit.date_end or unit.date_start
    return ChunkDraft(
        id=f"{doc.document_id}-{citation_suffix(ordinal)}",
        document_id=doc.document_id,
        ordinal=ordinal,
        body=body,
        title=title,
        locator=unit.locator,
        date_start=unit.date_start,
        date_end=date_end,
        author=doc.author,
        corpus=doc.corpus,
        source=doc.source,
        citation=format_citation(
            author=doc.author,
            title=title,
            date_start=unit.date_start,
            date_end=date_end,
            source=doc.source,
            locator=unit.locator,
        ),
        metadata={**doc.metadata, **unit.metadata},
    )


def _unit_bodies(text: str, budget: int, overlap: int, count: CountTokens) -> list[str]:
    """The chunk bodies of one unit."""
    text = text.strip()
    if not text:
        return []
    if count(text) <= budget:
        return [text]
    paras, sep = _paragraphs(text)
    target = max(1, int(budget * SAFETY))
    groups = [_paragraph_pieces(i, p, target, count) for i, p in enumerate(paras)]
    bodies: list[str] = []
    for packed in _pack(groups, target, overlap):
        for pieces in _enforce(packed, paras, sep, budget, count):
            bodies.append(_render(pieces, paras, sep))
    return bodies


def _paragraphs(text: str) -> tuple[list[str], str]:
    """Paragraphs and the separator to rejoin them: blank lines if any, else single newlines."""
    if _BLANK_LINE.search(text):
        parts, sep = _PARAGRAPH_BREAKS.split(text), "\n\n"
    else:
        parts, sep = text.split("\n"), "\n"
    return [p.strip() for p in parts if p.strip()], sep


def _paragraph_pieces(index: int, para: str, target: int, count: CountTokens) -> list[_Piece]:
    """Sentences of a paragraph, each counted once; a sentence over ``target`` is cut further."""
    pieces: list[_Piece] = []
    for start, end in _sentence_spans(para):
        tokens = count(para[start:end])
        if tokens <= target:
            pieces.append(_Piece(index, start, end, tokens))
        else:
            pieces.extend(
                _Piece(index, s, e, t) for s, e, t in _split_to_fit(para, start, end, target, count)
            )
    return pieces


def _sentence_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        if _is_abbreviation(text, start, match):
            continue
        _append_span(spans, text, start, match.end())
        start = match.end()
    _append_span(spans, text, start, len(text))
    return spans


def _is_abbreviation(text: str, start: int, match: re.Match[str]) -> bool:
    if match.group() != ".":
        return False
    # Scan back to the previous space only: rescanning the whole sentence would be quadratic.
    begin = match.start()
    while begin > start and not text[begin - 1].isspace():
        begin -= 1
    token = text[begin : match.start()].lstrip("([\"'“‘").lower()
    return (len(token) == 1 and token.isalpha()) or token in _ABBREVIATIONS


def _append_span(spans: list[tuple[int, int]], text: str, start: int, end: int) -> None:
    """Append ``text[start:end]`` without surrounding whitespace, unless it is blank."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if start < end:
        spans.append((start, end))


def _split_to_fit(
    text: str, start: int, end: int, budget: int, count: CountTokens
) -> list[tuple[int, int, int]]:
    """Cut ``text[start:end]`` into ``(start, end, tokens)`` spans of at most ``budget`` tokens.

    Cuts at whitespace; a single word over the budget (or text without spaces) is cut between
    characters. Each span is found by binary search on the real count, so spans are exact.
    """
    words = [(start + m.start(), start + m.end()) for m in _WORD.finditer(text[start:end])]
    spans: list[tuple[int, int, int]] = []
    i = 0
    while i < len(words):
        # A word is at least one token, so a span never holds more than ``budget`` words.
        ends = [e for _, e in words[i : i + budget]]
        j, tokens = _longest_fit(text, words[i][0], ends, budget, count)
        if j >= 0:
            spans.append((words[i][0], ends[j], tokens))
            i += j + 1
        else:
            spans.extend(_split_word(text, *words[i], budget, count))
            i += 1
    return spans


def _split_word(
    text: str, start: int, end: int, budget: int, count: CountTokens
) -> list[tuple[int, int, int]]:
    spans: list[tuple[int, int, int]] = []
    while start < end:
        # Cap the search window: a token rarely covers more than 8 characters.
        ends = list(range(start + 1, min(end, start + 8 * budget) + 1))
        j, tokens = _longest_fit(text, start, ends, budget, count)
        if j < 0:  # even one character is over budget: take it anyway so we always progress
            j, tokens = 0, count(text[start : ends[0]])
        spans.append((start, ends[j], tokens))
        start = ends[j]
    return spans


def _longest_fit(
    text: str, start: int, ends: Sequence[int], budget: int, count: CountTokens
) -> tuple[int, int]:
    """Largest index ``j`` with ``count(text[start:ends[j]]) <= budget`` (-1 if none) and its count."""
    lo, hi, best, best_tokens = 0, len(ends) - 1, -1, 0
    while lo <= hi:
        mid = (lo + hi) // 2
        tokens = count(text[start : ends[mid]])
        if tokens <= budget:
            best, best_tokens, lo = mid, tokens, mid + 1
        else:
            hi = mid - 1
    return best, best_tokens


def _pack(groups: list[list[_Piece]], target: int, overlap: int) -> list[_Packed]:
    """Greedily pack whole paragraphs; a paragraph over ``target`` is packed piece by piece."""
    chunks: list[_Packed] = []
    current: list[_Piece] = []
    n_overlap = 0

    def start_new(need: int) -> None:
        nonlocal current, n_overlap
        if current:
            chunks.append(_Packed(current, n_overlap))
            tail = _overlap_tail(current, min(overlap, target - need))
            current, n_overlap = list(tail), len(tail)

    for group in groups:
        total = sum(p.tokens for p in group)
        if _tokens(current) + total <= target:
            current.extend(group)
        elif total <= target:
            start_new(total)
            current.extend(group)
        else:
            for piece in group:
                if _tokens(current) + piece.tokens > target:
                    start_new(piece.tokens)
                current.append(piece)
    if current:
        chunks.append(_Packed(current, n_overlap))
    return chunks


def _tokens(pieces: Sequence[_Piece]) -> int:
    return sum(p.tokens for p in pieces)


def _overlap_tail(previous: list[_Piece], budget: int) -> list[_Piece]:
    """Trailing pieces of ``previous`` totalling at most ``budget``.

    The tail is never all of ``previous``: callers pass ``budget <= target - need``, and a
    previous chunk that small would have taken the next piece instead of closing.
    """
    tail: list[_Piece] = []
    used = 0
    for piece in reversed(previous):
        if used + piece.tokens > budget:
            break
        tail.insert(0, piece)
        used += piece.tokens
    return tail


def _enforce(
    packed: _Packed, paras: list[str], sep: str, budget: int, count: CountTokens
) -> list[list[_Piece]]:
    """Check a packed chunk with one real count; split it again if the estimate was too low."""
    pieces = packed.pieces
    if len(pieces) == 1 or count(_render(pieces, paras, sep)) <= budget:
        # A single piece was counted exactly when it was cut, so it fits.
        return [pieces]
    if packed.n_overlap:
        return _enforce(_Packed(pieces[packed.n_overlap :], 0), paras, sep, budget, count)
    mid = len(pieces) // 2
    return [
        *_enforce(_Packed(pieces[:mid], 0), paras, sep, budget, count),
        *_enforce(_Packed(pieces[mid:], 0), paras, sep, budget, count),
    ]


def _render(pieces: Sequence[_Piece], paras: list[str], sep: str) -> str:
    """Body text: each paragraph's span sliced from the original, paragraphs joined by ``sep``."""
    spans: list[str] = []
    first = pieces[0]
    last = first
    for piece in pieces[1:]:
        if piece.para != first.para:
            spans.append(paras[first.para][first.start : last.end])
            first = piece
        last = piece
    spans.append(paras[first.para][first.start : last.end])
    return sep.join(spans)
