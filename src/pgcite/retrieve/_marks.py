"""Marking a passage's matched words in Python: the window (snippet) around them and their
spans, for a text-search config whose stemming Python can do as PostgreSQL does.

PostgreSQL's built-in configs stem with Snowball (``english_stem``, ``arabic_stem`` ...), which
PyStemmer runs too, and ``simple`` only lowercases; a word matches when its stem is one of the
query's lexemes as the search statement read them (``SearchResult.lexemes``), so stop words and
the config's own stems come from the database. ``ts_headline`` did this in a statement of its
own, and most of its time was parsing every passage: at SciFact top-10 it took 1.98 ms p50
against 1.23 here, at top-100 with every hit's snippet 14.4 against 9.1 (side by side,
bench/results/search_latency at 70b68d6, its summary in git at 5309621). A config made in
the database (another dictionary, unaccent) has no such twin: :func:`stemmer_for` says None
and the database marks it (pgcite.retrieve._snippets).

The window follows ``ts_headline``'s options as pgcite set them (MaxWords=35, MinWords=15,
MaxFragments=2, " … " between fragments): up to two windows of at most MAX_WORDS words, each
around the run of matches with the most distinct lexemes, in text order; a passage with no
match gives its first MIN_WORDS words.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import Stemmer

MAX_WORDS = 35
MIN_WORDS = 15
MAX_FRAGMENTS = 2
DELIMITER = " … "

# Words are what lies between separators: whitespace, ASCII punctuation but "_", and the
# punctuation of the scripts pgcite serves (Arabic's comma, semicolon and question mark,
# typographic quotes and dashes). Each becomes a space in a copy of the text of the same length,
# so that str.split and str.find do the work at C speed (a regex pass per passage cost as much as
# all the rest); a word keeps its combining marks (Arabic tanween, accents), as PostgreSQL's
# parser does. Other symbols stay on their word ("x²"): such a word may go unmarked.
_SEPARATORS = "".join(c for c in string.punctuation if c != "_") + "—–…«»‘’“”،؛؟·•"
_SPACES = string.whitespace + "\u00a0\u2002\u2003\u2009\u200a\u200b\u202f\u3000"
_SPACED = str.maketrans({c: " " for c in _SEPARATORS + _SPACES})


def words_in(text: str) -> list[str]:
    """The words of ``text`` as the marking counts them (lowercased)."""
    return _spaced(text).split()


class Stems:
    """One config's stemming of lowercased words, each word's stem kept: a collection's passages
    share most of their words, so a page of ten SciFact abstracts (~850 distinct words) mostly
    finds them here. ``language`` None: ``simple``, a word is its own lexeme. Emptied when it
    grows past KEPT words, so that it cannot grow without bound."""

    KEPT = 200_000

    def __init__(self, language: str | None) -> None:
        self.language = language
        self._stems: dict[str, str] = {}
        self._words: dict[str, set[str]] = {}  # stem -> the words kept that have it

    def matching(self, words: set[str], lexemes: set[str]) -> dict[str, str]:
        """Each of ``words`` whose stem is one of ``lexemes``, with that lexeme."""
        if self.language is None:
            return {w: w for w in words & lexemes}
        missing = words.difference(self._stems)  # set operations: C speed, no Python loop
        if missing:
            if len(self._stems) > self.KEPT:
                self._stems, self._words = {}, {}
            new = list(missing)
            # a Stemmer is not thread-safe: one for each call (making one takes ~0.3 us)
            for word, stem in zip(new, Stemmer.Stemmer(self.language).stemWords(new),
                                  strict=True):
                self._stems[word] = stem
                self._words.setdefault(stem, set()).add(word)
        return {w: lexeme for lexeme in lexemes
                for w in self._words.get(lexeme, set()) & words}


@functools.cache
def _algorithms() -> frozenset[str]:
    return frozenset(Stemmer.algorithms())


@functools.cache
def stemmer_for(ts_config: str) -> Stems | None:
    """How ``ts_config`` stems lowercased words, or None when Python cannot do it as the
    database does (a config made in the database). One per config, kept with its stems."""
    name = ts_config.removeprefix("pg_catalog.")
    if name == "simple":
        return Stems(None)
    if name not in _algorithms() or name == "porter":  # "porter" is no PostgreSQL config
        return None
    return Stems(name)


@dataclass(frozen=True)
class Marked:
    """A snippet and the ``[start, end)`` spans of its matched words."""

    snippet: str
    highlights: list[tuple[int, int]]


Span = tuple[int, int, str]  # a matched word: [start, end) in its passage, and its lexeme


def mark_passages(bodies: Sequence[str], lexemes: Iterable[str], stems: Stems) -> list[Marked]:
    """Each body's window and matched words: those whose stem is one of ``lexemes``."""
    spaced = [_spaced(body) for body in bodies]
    return [_mark(body, text, spans) for body, text, spans in zip(
        bodies, spaced, _matches(spaced, lexemes, stems), strict=True)]


def matched_spans(bodies: Sequence[str], lexemes: Iterable[str], stems: Stems) -> list[list[Span]]:
    """Every matched word of each whole body, in order (the windows pick among them)."""
    return _matches([_spaced(body) for body in bodies], lexemes, stems)


def _matches(spaced: list[str], lexemes: Iterable[str], stems: Stems) -> list[list[Span]]:
    wanted = set(lexemes)
    vocabularies = [set(text.split()) for text in spaced]
    matched = stems.matching(set().union(*vocabularies), wanted) if wanted else {}
    return [_spans(text, {w: matched[w] for w in vocabulary & matched.keys()})
            for text, vocabulary in zip(spaced, vocabularies, strict=True)]


def _spaced(body: str) -> str:
    """``body`` lowercased, its separators spaces, its length kept (offsets into it are offsets
    into ``body``): a character whose lowercase is longer ("İ") stays as it is."""
    low = body.lower()
    if len(low) != len(body):
        low = "".join(c if len(c.lower()) != 1 else c.lower() for c in body)
    return low.translate(_SPACED)


def _spans(text: str, matched: dict[str, str]) -> list[Span]:
    """Every whole-word occurrence of a matched word: (start, end, its lexeme), in order."""
    found: list[Span] = []
    for word, lexeme in matched.items():
        i = text.find(word)
        while i >= 0:
            end = i + len(word)
            if (i == 0 or text[i - 1] == " ") and (end == len(text) or text[end] == " "):
                found.append((i, end, lexeme))
            i = text.find(word, end)
    return sorted(found)


def _mark(body: str, text: str, spans: list[Span]) -> Marked:
    if not spans:
        return Marked(_first_words(body, text, MIN_WORDS), [])
    numbers: list[int] = []  # each match's word number
    count, at = 0, 0
    for start, _, _ in spans:
        count += len(text[at:start].split())
        numbers.append(count)
        at = start
    fragments: list[tuple[int, int]] = []  # [start, end) in the body, in text order
    for first, last in _windows(spans, numbers):
        inside = numbers[last] - numbers[first] + 1
        before = (MAX_WORDS - inside) // 2
        # words the text's end does not have go before the matches instead
        end, after = _forward(text, spans[last][1], MAX_WORDS - inside - before)
        start = _back(text, spans[first][0], MAX_WORDS - inside - after)
        if fragments and start <= fragments[-1][1]:  # windows that meet are one
            fragments[-1] = (fragments[-1][0], max(end, fragments[-1][1]))
        else:
            fragments.append((start, end))
    parts: list[str] = []
    highlights: list[tuple[int, int]] = []
    length = 0
    for start, end in fragments:
        if parts:
            parts.append(DELIMITER)
            length += len(DELIMITER)
        parts.append(body[start:end])
        highlights += [(s - start + length, e - start + length)
                       for s, e, _ in spans if start <= s and e <= end]
        length += end - start
    return Marked("".join(parts), highlights)


def _windows(spans: list[Span], numbers: list[int]) -> list[tuple[int, int]]:
    """Up to MAX_FRAGMENTS runs of matches (first, last index), each within MAX_WORDS words
    and sharing no match with the others, the run with the most distinct lexemes first (then
    the most matches, then the earliest), returned in text order."""
    runs: list[tuple[int, int, int, int]] = []  # (-distinct, -matches, first, last)
    last = 0
    for first in range(len(spans)):
        last = max(last, first)
        while last + 1 < len(spans) and numbers[last + 1] - numbers[first] < MAX_WORDS:
            last += 1
        distinct = len({lexeme for _, _, lexeme in spans[first:last + 1]})
        runs.append((-distinct, -(last - first + 1), first, last))
    chosen: list[tuple[int, int]] = []
    for _, _, first, last in sorted(runs):
        if len(chosen) == MAX_FRAGMENTS:
            break
        if all(last < a or first > b for a, b in chosen):
            chosen.append((first, last))
    return sorted(chosen)


def _back(text: str, start: int, words: int) -> int:
    """The start of the word ``words`` words before the one at ``start`` (or of the first)."""
    for _ in range(max(0, words)):
        end = start - 1
        while end >= 0 and text[end] == " ":  # the separators before it: a few characters
            end -= 1
        if end < 0:
            break
        start = text.rfind(" ", 0, end) + 1
    return start


def _forward(text: str, end: int, words: int) -> tuple[int, int]:
    """The end of the word ``words`` words on from ``end`` (or of the last), and how many it
    took."""
    taken = 0
    while taken < words:
        begin = end
        while begin < len(text) and text[begin] == " ":
            begin += 1
        if begin == len(text):
            break
        stop = text.find(" ", begin)
        end = len(text) if stop < 0 else stop
        taken += 1
    return end, taken


def _first_words(body: str, text: str, words: int) -> str:
    begin = len(text) - len(text.lstrip())
    return body[begin:_forward(text, begin, words)[0]]
