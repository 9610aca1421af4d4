"""The default generator: no model. It quotes the sentences of the retrieved passages that best
answer the question and cites each one's passage.

A sentence scores the summed weight of the question's content words it contains (crudely
stemmed; rarer words among the candidate sentences weigh more) plus a small prior for its
passage's rank, so that between equal matches the better-ranked passage wins. Every quote says
whose words it is ("Elizabeth Pepys wrote on 5 September 1666: “…”"), which is what keeps
extractive answers within the persona attribution rule by construction. Headings, date lines,
salutations and signatures are never quoted (:mod:`pgcite.answer._roles`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pgcite.answer._dates import spoken
from pgcite.answer._roles import quotable
from pgcite.answer._sentences import split_sentences
from pgcite.answer._types import ContextPassage, GenerationRequest

_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")
_STOPWORD_TEXT = """
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing done down during each even ever few for from
further had has have having he her here hers herself him himself his how i if in into is it its
itself just me more most my myself no nor not now of off on once only or other our ours ourselves
out over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up upon very was we were what when where which
while who whom why will with would you your yours yourself yourselves us ever much many tell
say said think thought according whether first time thing things way day days
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
RANK_PRIOR = 0.3  # less than one matched word: rank only breaks ties between equal matches


def _stem(word: str) -> str:
    for suffix, repl in (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("es", ""),
                         ("s", ""), ("ly", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return _old_spelling(word[: -len(suffix)] + repl)
    return _old_spelling(word)


def _old_spelling(stem: str) -> str:
    """Early modern spellings read as today's: a final "ll" after a vowel ("The Rivalls",
    "generall", "severall") and "ique" ("musique") are how the diary writes what a question
    asks as "The Rivals", "general", "music". Folded on both sides, so a modern word only meets
    its own old spelling ("small" and "smal" are one)."""
    if len(stem) >= 5 and stem.endswith("ll") and stem[-3] in "aeiou":
        return stem[:-1]
    if len(stem) >= 6 and stem.endswith("ique"):
        return stem[:-3] + "c"
    return stem


def content_words(text: str) -> set[str]:
    """Lowercased, crudely stemmed words that are not stop words."""
    words = (w.lower().replace("’", "'") for w in _WORD.findall(text))
    return {_stem(w) for w in words if len(w) > 1 and w not in _STOPWORDS}


class Quoted(Protocol):
    """A sentence chosen to quote: its text and the passage it comes from."""

    @property
    def passage(self) -> ContextPassage: ...

    @property
    def text(self) -> str: ...


class SentenceQuoter:
    """What the model-free generators share: choose sentences (``select``, best first), then
    quote each on its own line citing exactly the passage it comes from (and no other)."""

    name = "extractive"
    max_words = 60
    # Say whose words a quote is even when the passage has no author and no date ("An undated
    # passage says: …"); otherwise such a quote is the sentence alone.
    always_speaker = True

    def select(self, question: str, passages: list[ContextPassage]) -> Sequence[Quoted]:
        raise NotImplementedError

    def generate(self, request: GenerationRequest) -> str:
        chosen = self.select(request.question, request.passages)
        if not chosen:
            return request.abstention_text
        question = content_words(request.question)
        return "\n".join(self._line(c, question, request.persona) for c in chosen)

    def _line(self, chosen: Quoted, question: set[str], persona: str | None) -> str:
        quote = _window(chosen.text, question, self.max_words).replace("[", "(").replace("]", ")")
        passage = chosen.passage
        if not self.always_speaker and not passage.author and not passage.date:
            return f"{quote} [{passage.id}]"
        return f"{_speaker(passage, persona)}: “{quote}” [{passage.id}]"


@dataclass(frozen=True)
class _Candidate:
    passage: ContextPassage
    position: int
    text: str
    words: frozenset[str]


class ExtractiveGenerator(SentenceQuoter):
    """Quote the best-matching sentences, one cited line each."""

    def __init__(self, *, max_sentences: int = 3, max_per_passage: int = 2,
                 max_words: int = 60) -> None:
        self.max_sentences = max_sentences
        self.max_per_passage = max_per_passage
        self.max_words = max_words

    def select(self, question: str, passages: list[ContextPassage]) -> list[_Candidate]:
        """The sentences to quote, in passage-rank then reading order."""
        candidates = [
            _Candidate(p, i, s, frozenset(content_words(s)))
            for p in passages for i, s in enumerate(split_sentences(p.text)) if quotable(s)
        ]
        if not candidates:
            return []
        weights = _weights(content_words(question), candidates)
        ranked = sorted(candidates, key=lambda c: (-_score(c, weights), c.passage.rank, c.position))
        picked: list[_Candidate] = []
        for cand in ranked:
            if len(picked) == self.max_sentences:
                break
            if picked and _score(cand, weights) <= RANK_PRIOR / cand.passage.rank:
                break  # nothing of the question left to match: stop rather than pad
            if sum(p.passage.id == cand.passage.id for p in picked) < self.max_per_passage:
                picked.append(cand)
        return sorted(picked, key=lambda c: (c.passage.rank, c.position))


def _weights(question: set[str], candidates: list[_Candidate]) -> dict[str, float]:
    """Question word -> weight: rarer among the candidate sentences = heavier (idf-like)."""
    n = len(candidates)
    return {
        w: math.log(1 + n / (1 + sum(w in c.words for c in candidates))) for w in question
    }


def _score(cand: _Candidate, weights: dict[str, float]) -> float:
    return sum(weights[w] for w in cand.words & weights.keys()) + RANK_PRIOR / cand.passage.rank


def _speaker(passage: ContextPassage, persona: str | None) -> str:
    """Whose words, and when, at the date's own precision ("in 1855", never a day the source
    does not give): "Samuel Pepys wrote on 2 September 1666", "In March 1666 I wrote", "The
    entry of 2 September 1666 says"."""
    when = spoken(passage.date, passage.date_end)
    if persona and passage.author and passage.author.casefold() == persona.casefold():
        return f"{when[0].capitalize()} {when[1]} I wrote" if when else "I wrote"
    if passage.author:
        return f"{passage.author} wrote {when[0]} {when[1]}" if when else f"{passage.author} wrote"
    if when is None:
        return "An undated passage says"
    if when[0] == "on":
        return f"The entry of {when[1]} says"
    return f"A passage from {when[1]} says" if when[0] == "in" else (
        f"A passage dated {when[0]} {when[1]} says")


def _window(sentence: str, question: set[str], max_words: int) -> str:
    """The sentence, or ``max_words`` of it starting a little before its first question word."""
    words = sentence.split()
    if len(words) <= max_words:
        return " ".join(words)
    hits = [i for i, w in enumerate(words) if content_words(w) & question]
    start = max(0, min(hits[0] - 5, len(words) - max_words)) if hits else 0
    end = start + max_words
    text = " ".join(words[start:end])
    return ("… " if start else "") + text + (" …" if end < len(words) else "")
