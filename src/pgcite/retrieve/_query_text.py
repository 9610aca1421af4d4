"""What a typed question means for the keyword leg.

Plain words are ranked with BM25 as an OR query (questions rarely contain every word of the
answer). Quoted phrases and ``-term`` exclusions keep web-search semantics: they become a hard
``websearch_to_tsquery`` constraint, so "Parmazan" or "Bond" must really be there.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_PHRASE = re.compile(r'"([^"]+)"')
_NEGATION = re.compile(r'(?:(?<=\s)|^)-(\w[\w\'’]*)')


@dataclass(frozen=True)
class ParsedQuery:
    ranking_text: str  # words to rank by (phrase words included, excluded words not)
    constraint: str | None  # websearch_to_tsquery input, or None when nothing is required


def parse_query(text: str) -> ParsedQuery:
    phrases = [p.strip() for p in _PHRASE.findall(text) if p.strip()]
    without_phrases = _PHRASE.sub(lambda m: f" {m[1]} ", text)
    negated = _NEGATION.findall(without_phrases)
    ranking = _NEGATION.sub(" ", without_phrases)
    parts = [f'"{p}"' for p in phrases] + [f"-{term}" for term in negated]
    ranking = " ".join(ranking.split())
    return ParsedQuery(ranking_text=ranking, constraint=" ".join(parts) or None)


def unaccented(text: str) -> str:
    """``text`` case-folded, decomposed (NFKD) and without its combining marks: "Maizière" ->
    "maiziere", Arabic without its vowel signs. The one fold for comparing words as typed with
    words as written (the answerer's sentence terms, the answerability respellings, the answer
    benchmark's gold strings)."""
    return "".join(ch for ch in unicodedata.normalize("NFKD", text.casefold())
                   if unicodedata.category(ch) != "Mn")
