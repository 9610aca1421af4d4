"""Snippets: a window of each hit around the words that matched, with those words marked.

A word matches when the collection's text-search config reads it as one of the query's lexemes
-- so "fires" in a passage matches "fire" in the question, and an Arabic collection stems as
its keyword leg does. The lexemes are the search statement's own (``SearchResult.lexemes``): a
passage holding any of them gets a window around them; a passage holding none (a vector-only
hit) gets its opening words.

For PostgreSQL's built-in configs (Snowball stemmers and ``simple``) Python marks them
(:mod:`pgcite.retrieve._marks`, which says what that saves), with no statement and no
connection. A config made in the database has no Python twin, and ``ts_headline`` marks it, in
one statement (:func:`snippet_statement`).

It runs once per search, on the first :data:`DEFAULT_SNIPPETS` hits returned unless the caller
asks for more (``snippets=True``: every hit) or none (``False``). ``highlights`` are ``[start,
end)`` offsets into ``snippet`` in Unicode code points (Python string indices; a JavaScript
client counting UTF-16 units must convert outside the BMP).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from pgcite.retrieve._hits import Hit, SearchResult
from pgcite.retrieve._marks import mark_passages, stemmer_for

# How many hits get a snippet when the caller does not say: a page of results. The one place for
# this default (Python, async, HTTP).
DEFAULT_SNIPPETS = 10


def snippet_limit(snippets: bool | int, hits: int) -> int:
    """How many of ``hits`` get a snippet: ``True`` every one, ``False`` none, a number that many."""
    if snippets is True:
        return hits
    if snippets is False:
        return 0
    return max(0, min(int(snippets), hits))


def marked_here(result: SearchResult, ts_config: str,
                limit: int) -> tuple[SearchResult, int]:
    """``result`` with the first ``limit`` hits' snippets marked in Python, and how many are
    left for the database to mark (:func:`with_snippets`): none, or all of them when
    ``ts_config`` is one Python cannot stem as PostgreSQL does."""
    stem = stemmer_for(ts_config) if limit else None
    if stem is None:
        return result, limit
    started = time.perf_counter()
    marks = mark_passages([h.body for h in result.hits[:limit]], result.lexemes, stem)
    hits = [h.model_copy(update={"snippet": m.snippet, "highlights": m.highlights})
            for h, m in zip(result.hits, marks, strict=False)]
    timings = {**result.timings_ms, "snippets": (time.perf_counter() - started) * 1000}
    return result.model_copy(update={"hits": [*hits, *result.hits[limit:]],
                                     "timings_ms": timings}), 0


# Private-use characters as markers: they never occur in real text, and are removed again.
_START, _STOP = "\ue000", "\ue001"
_MARKERS = re.compile(f"([{_START}{_STOP}])")  # split at, kept (unmark)
_OPTIONS = (f'StartSel="{_START}", StopSel="{_STOP}", MaxWords=35, MinWords=15, ShortWord=2, '
            'MaxFragments=2, FragmentDelimiter=" … "')

_SQL = sql.SQL("""
WITH q AS (
    SELECT coalesce(string_agg(quote_literal(lexeme), ' | '), '') AS text
    FROM unnest(%(lexemes)s::text[]) AS lexeme
)
SELECT ts_headline({cfg}::regconfig, t.body, q.text::tsquery, %(options)s)
FROM unnest(%(bodies)s::text[]) WITH ORDINALITY AS t(body, n), q
ORDER BY t.n
""")


def with_snippets(conn: psycopg.Connection, ts_config: str, lexemes: Sequence[str],
                  hits: list[Hit], limit: int) -> list[Hit]:
    """``hits`` with ``snippet`` and ``highlights`` filled in by the database for the first
    ``limit`` of them, in one statement, around ``lexemes`` (the search's: ``SearchResult.
    lexemes``, as Python marks them); the others as they were."""
    if not limit:
        return hits
    statement, params = snippet_statement(ts_config, lexemes, hits, limit)
    return apply_snippets(hits, conn.execute(statement, params).fetchall(), limit)


def snippet_statement(ts_config: str, lexemes: Sequence[str], hits: list[Hit],
                      limit: int) -> tuple[sql.Composed, dict[str, Any]]:
    """The one statement that marks the first ``limit`` hits' windows (sync and async searches
    alike): an OR of ``lexemes``."""
    return _SQL.format(cfg=sql.Literal(ts_config)), {
        "lexemes": list(lexemes), "options": _OPTIONS,
        "bodies": [h.body for h in hits[:limit]]}


def apply_snippets(hits: list[Hit], rows: Sequence[Sequence[Any]], limit: int) -> list[Hit]:
    """``hits`` with the statement's marked windows turned into snippets and highlights, a row
    for each of the first ``limit`` hits; the hits after them as they were."""
    out = []
    for hit, (marked,) in zip(hits[:limit], rows, strict=True):
        text, spans = unmark(marked)
        out.append(hit.model_copy(update={"snippet": text, "highlights": spans}))
    return [*out, *hits[limit:]]


def unmark(marked: str) -> tuple[str, list[tuple[int, int]]]:
    """Text without the markers, and the ``[start, end)`` spans they enclosed."""
    text: list[str] = []
    spans: list[tuple[int, int]] = []
    start: int | None = None
    length = 0
    # split at the markers (kept): a page of ten snippets in ~40 us, where a scan of every
    # character took ~130 us
    for part in _MARKERS.split(marked):
        if part == _START:
            start = length
        elif part == _STOP:
            if start is not None and length > start:
                spans.append((start, length))
            start = None
        elif part:
            text.append(part)
            length += len(part)
    return "".join(text), spans
