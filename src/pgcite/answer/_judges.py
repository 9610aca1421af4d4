"""The model's judgements in self-correcting retrieval (issue 8): is each passage relevant
(Self-RAG grading), does the context suffice, what else to search for (CRAG rewrite), (the LLM
router's judgement lives with the router, in :mod:`pgcite.retrieve._route`).

Each judgement is one chat call with a strict, tiny output format, parsed defensively: models
wrap answers in JSON, markdown, quotes, labels or ``<think>`` blocks, so the parsers accept the
usual variants but never guess from prose. Text the model reads inside tags (passages, the
question) is material, never instructions. Failures of the model itself (:class:`LLMError` from
``chat``) pass through untouched: the caller decides the fallback. Unusable output raises
:class:`LLMError` too, except for the sufficiency verdict, where "unsure" is the safe answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from pgcite.answer._context import render_context, render_passage
from pgcite.answer._types import ContextPassage
from pgcite.llm._parse import MATERIAL_RULE as _MATERIAL_RULE
from pgcite.llm._parse import clean_reply as _clean_reply
from pgcite.llm._parse import json_value as _json_value
from pgcite.llm._parse import tag as _tag
from pgcite.llm._parse import unquote as _unquote
from pgcite.llm._types import ChatModel, LLMError

GRADE_CHARS = 700  # per passage: enough to judge topicality, cheap to send N at once
RAW_CHARS = 500  # how much of a reply is kept for debugging
REWRITE_MIN_CHARS, REWRITE_MAX_CHARS = 3, 300

# --- 1. relevance grading (Self-RAG) ------------------------------------------------------------

class Grades(BaseModel):
    """One relevance verdict per passage id: True (relevant), False, or None (ungraded).

    Ungraded passages are kept: missing evidence of irrelevance is not a reason to drop one.
    """

    model_config = ConfigDict(frozen=True)

    by_id: dict[str, bool | None]
    raw: str

    @property
    def kept_ids(self) -> list[str]:
        return [pid for pid, ok in self.by_id.items() if ok is not False]

    @property
    def dropped_ids(self) -> list[str]:
        return [pid for pid, ok in self.by_id.items() if ok is False]

    @property
    def relevant_fraction(self) -> float | None:
        graded = [ok for ok in self.by_id.values() if ok is not None]
        return sum(graded) / len(graded) if graded else None


_GRADE_SYSTEM = "\n".join([
    "You grade whether passages are relevant to a question: relevant means the passage "
    "contains information that helps answer it.",
    _MATERIAL_RULE,
    "Reply with one line per passage and nothing else, in the form `N: yes` or `N: no`, "
    "where N is the passage number.",
])

_NEGATIVE = re.compile(
    r"(?:not?|non)[\s-]*(?:relevant|useful|helpful|related)\b"
    r"|(?:irrelevant|unrelated|no|not|false)\b"
)
_POSITIVE = re.compile(r"(?:yes|relevant|true|useful|helpful|related)\b")
_GRADE_LINE = re.compile(
    r"^\s*(?:[-*•]\s*)?(?:passage\s*)?(?:#\s*)?[\[(]?\s*(\d{1,4})\s*[\])]?\s*"
    r"[:.)=>\-–—]*\s*(.+?)\s*$",
    re.IGNORECASE,
)
_ID_KEYS = ("id", "passage", "passage_id", "n", "number", "index", "num")
_VERDICT_KEYS = ("relevant", "is_relevant", "relevance", "grade", "verdict", "answer", "label")
_LIST_KEYS = ("grades", "passages", "results", "relevance", "items")


def _grade_word(text: str) -> bool | None:
    """yes/relevant → True, no/irrelevant/not relevant → False, anything else → None."""
    t = text.casefold().strip(" \t\"'`*_.,;:!()[]")
    if _NEGATIVE.match(t):  # first: "not relevant" must not read as "relevant"
        return False
    if _POSITIVE.match(t):
        return True
    return None


def _json_grade(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    return _grade_word(value) if isinstance(value, str) else None


def _passage_ref(key: Any, ids: Sequence[str]) -> str | None:
    """The passage id a model's key refers to: its 1-based number, or the id itself."""
    if isinstance(key, bool):
        return None
    if isinstance(key, str):
        text = key.strip()
        if text in ids:
            return text
        match = re.fullmatch(r"(?:passage\s*)?[\[#(]?\s*(\d{1,4})\s*[\])]?", text, re.IGNORECASE)
        if not match:
            return None
        key = int(match.group(1))
    if isinstance(key, int) and 1 <= key <= len(ids):
        return ids[key - 1]
    return None


def _grades_from_json(value: Any, ids: Sequence[str]) -> list[tuple[str, bool]]:
    """Grades from ``{"1": "yes"}``, ``[{"id": 1, "relevant": true}]``, ``["yes", "no"]`` or
    one of those under a ``grades``-like key."""
    if isinstance(value, dict):
        if any(k in value for k in _ID_KEYS):
            return _grades_from_json([value], ids)
        found: list[tuple[str, bool]] = []
        for key, item in value.items():
            if isinstance(item, list | dict) and key.casefold() in _LIST_KEYS:
                found += _grades_from_json(item, ids)
            elif (pid := _passage_ref(key, ids)) and (ok := _json_grade(item)) is not None:
                found.append((pid, ok))
        return found
    if not isinstance(value, list):
        return []
    found = []
    for position, item in enumerate(value):
        if isinstance(item, dict):
            ref = next((item[k] for k in _ID_KEYS if k in item), None)
            pid = _passage_ref(ref, ids)
            ok = next((_json_grade(item[k]) for k in _VERDICT_KEYS if k in item), None)
        else:  # a bare list of verdicts, in passage order
            pid = ids[position] if position < len(ids) else None
            ok = _json_grade(item)
        if pid is not None and ok is not None:
            found.append((pid, ok))
    return found


def _grades_from_lines(text: str, ids: Sequence[str]) -> list[tuple[str, bool]]:
    found = []
    for line in text.replace("*", "").replace("`", "").splitlines():
        match = _GRADE_LINE.match(line)
        if not match:
            continue
        pid = _passage_ref(int(match.group(1)), ids)
        ok = _grade_word(match.group(2))
        if pid is not None and ok is not None:
            found.append((pid, ok))
    return found


def parse_grades(reply: str, ids: Sequence[str]) -> dict[str, bool | None]:
    """Per-id grades from a grader's reply; ids it did not grade (or graded both ways) get None.

    Raises :class:`LLMError` if not a single grade can be read.
    """
    text = _clean_reply(reply)
    found = _grades_from_json(_json_value(text), ids) or _grades_from_lines(text, ids)
    if not found:
        raise LLMError(f"grader: the reply is unparseable (expected lines like '1: yes'): "
                       f"{text[:80]!r}")
    graded: dict[str, bool | None] = {}
    for pid, ok in found:
        # A contradiction is no evidence either way: the passage stays ungraded (kept).
        graded[pid] = ok if graded.get(pid, ok) == ok else None
    return {pid: graded.get(pid) for pid in ids}


def _clip(passage: ContextPassage, limit: int = GRADE_CHARS) -> ContextPassage:
    """The passage cut to about ``limit`` characters, at a word boundary where one is near."""
    if len(passage.text) <= limit:
        return passage
    cut = passage.text[:limit]
    space = cut.rfind(" ")
    if space > limit - 100:
        cut = cut[:space]
    return passage.model_copy(update={"text": cut.rstrip() + " …", "truncated": True})


def grading_prompt(question: str, passages: Sequence[ContextPassage]) -> str:
    numbered = [f"Passage {n}:\n{render_passage(_clip(p))}" for n, p in enumerate(passages, 1)]
    return (
        "\n\n".join(numbered)
        + f"\n\nQuestion: {_tag('question', question)}\n\n"
        + f"Grade each of the {len(passages)} passages, one line each: `N: yes` or `N: no`."
    )


def grade_passages(chat: ChatModel, question: str, passages: Sequence[ContextPassage], *,
                   max_tokens: int = 200) -> Grades:
    """Grade every passage's relevance to ``question`` in one call (each cut to ~700 chars).

    No passages → no call, empty grades. Raises :class:`LLMError` if the model fails or no
    grade at all can be read from its reply.
    """
    if not passages:
        return Grades(by_id={}, raw="")
    reply = chat.chat(_GRADE_SYSTEM, grading_prompt(question, passages), max_tokens=max_tokens)
    return Grades(by_id=parse_grades(reply, [p.id for p in passages]), raw=reply[:RAW_CHARS])


# --- 2. sufficiency --------------------------------------------------------------------------------

Verdict = Literal["sufficient", "insufficient", "unsure"]


class Sufficiency(BaseModel):
    """Whether the context suffices; ``parsed`` is False when the reply was not understood
    (the verdict is then "unsure")."""

    model_config = ConfigDict(frozen=True)

    verdict: Verdict
    parsed: bool
    raw: str


_SUFFICIENCY_SYSTEM = "\n".join([
    "You decide whether the passages contain enough information to answer the question.",
    _MATERIAL_RULE,
    "Reply with exactly one word: SUFFICIENT, INSUFFICIENT, or UNSURE.",
])

# Negations first in the alternation and earliest match wins, so "not sufficient" is
# insufficient and "INSUFFICIENT" never reads as "sufficient" (word boundaries).
_VERDICT_PATTERNS: tuple[tuple[Verdict, re.Pattern[str]], ...] = (
    ("insufficient", re.compile(
        r"\b(?:insufficient|cannot|can't|can not|unable|unanswerable)\b"
        r"|(?:\bnot|n't)\s+(?:\w+\s+){0,2}?(?:sufficient|enough|answerable|answer)\b")),
    ("unsure", re.compile(r"\b(?:unsure|uncertain|not sure|unclear|unknown|maybe)\b")),
    ("sufficient", re.compile(r"\b(?:sufficient|enough|answerable)\b")),
)
_FIRST_WORD: dict[str, Verdict] = {"yes": "sufficient", "no": "insufficient"}


def parse_sufficiency(reply: str) -> tuple[Verdict, bool]:
    """(verdict, parsed) from a reply; an unreadable one is ("unsure", False)."""
    text = _clean_reply(reply)
    value = _json_value(text)
    if isinstance(value, dict):
        for key in ("verdict", "answer", "sufficiency", "result", "sufficient"):
            item = value.get(key)
            if isinstance(item, bool):
                return ("sufficient" if item else "insufficient"), True
            if isinstance(item, str):
                text = item
                break
    lowered = text.casefold().replace("’", "'")
    hits = [(m.start(), verdict) for verdict, pattern in _VERDICT_PATTERNS
            if (m := pattern.search(lowered))]
    if hits:
        return min(hits, key=lambda hit: hit[0])[1], True
    # Bare yes/no only as the reply's first word: in prose they mean too many things.
    first = re.match(r"\W*(\w+)", lowered)
    if first and first.group(1) in _FIRST_WORD:
        return _FIRST_WORD[first.group(1)], True
    return "unsure", False


def judge_sufficiency(chat: ChatModel, question: str, passages: Sequence[ContextPassage], *,
                      max_tokens: int = 60) -> Sufficiency:
    """Does the context suffice to answer ``question``?

    Never raises for an unreadable verdict: that is "unsure" (``parsed=False``), which makes the
    caller retrieve wider once, the safe direction. No passages → "insufficient" without a call.
    """
    if not passages:
        return Sufficiency(verdict="insufficient", parsed=True, raw="")
    user = (f"{render_context(list(passages))}\n\nQuestion: {_tag('question', question)}\n\n"
            "Is the information in the passages sufficient to answer the question? "
            "One word: SUFFICIENT, INSUFFICIENT, or UNSURE.")
    reply = chat.chat(_SUFFICIENCY_SYSTEM, user, max_tokens=max_tokens)
    verdict, parsed = parse_sufficiency(reply)
    return Sufficiency(verdict=verdict, parsed=parsed, raw=reply[:RAW_CHARS])


# --- 3. query rewrite (CRAG) --------------------------------------------------------------------

_REWRITE_SYSTEM = "\n".join([
    "You rewrite a question into ONE alternative search query for a search over the user's "
    "own sources: use keywords and synonyms likely to appear in the sources' own wording.",
    _MATERIAL_RULE,
    "Reply with the query only, on a single line, with no explanation or label.",
])

_LABEL = re.compile(
    r"^(?:(?:alternative|rewritten|new|revised|improved|better|search|suggested)\s+)*"
    r"(?:search\s+)?(?:query|rewrite|answer|output)\s*[:=\-–—]\s*",
    re.IGNORECASE,
)
_BULLET = re.compile(r"^(?:[-*•]|\d{1,2}[.)])\s+")
def _same_query(a: str, b: str) -> bool:
    """Equal ignoring case, whitespace and punctuation at the ends (a "?" changes nothing)."""
    def norm(s: str) -> str:
        return " ".join(s.casefold().split()).strip(" \t\"'`.,;:!?")
    return norm(a) == norm(b)


def parse_rewrite(reply: str, question: str, previous: Iterable[str] = ()) -> str:
    """The one query line in a rewrite reply, or :class:`LLMError` if it is unusable."""
    query = ""
    for line in _clean_reply(reply).splitlines():
        line = _unquote(_BULLET.sub("", line.strip()))
        if not line or (line.endswith(":") and not _LABEL.match(line)):
            continue  # a preamble like "Here is a query:" is not the query
        query = _unquote(_LABEL.sub("", line))
        if query:
            break
    if not REWRITE_MIN_CHARS <= len(query) <= REWRITE_MAX_CHARS:
        raise LLMError(f"rewrite: no usable query in the reply ({len(query)} chars): "
                       f"{reply[:80]!r}")
    if _same_query(query, question):
        raise LLMError("rewrite: the query is the question again")
    if any(_same_query(query, p) for p in previous):
        raise LLMError("rewrite: the query repeats an earlier rewrite")
    return query


def rewrite_query(chat: ChatModel, question: str, *, previous: Sequence[str] = (),
                  max_tokens: int = 60) -> str:
    """One alternative search query for ``question``, different from it and from ``previous``.

    The result is query text only. It must never change filters: cutoff dates, corpora and
    every other restriction stay those of the original request, which the caller enforces.
    Raises :class:`LLMError` if the model fails or its reply is unusable.
    """
    user = f"Question: {_tag('question', question)}\n"
    if previous:
        earlier = "\n".join(_tag("previous", p) for p in previous)
        user += f"Queries already tried (give a different one):\n{earlier}\n"
    user += "One alternative search query, on a single line:"
    return parse_rewrite(chat.chat(_REWRITE_SYSTEM, user, max_tokens=max_tokens),
                         question, previous)
