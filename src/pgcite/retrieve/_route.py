"""The adaptive router: a few microseconds of regexes decide how to retrieve for a question.

Routes: ``keyword`` (exact names, quoted phrases, ids, bare terms → keyword-heavy hybrid),
``decompose`` (multi-concept), ``hyde`` (long abstract questions in everyday words, where the
sources' vocabulary likely differs → HyDE, or the plain hybrid without an LLM) and
``direct`` (plain hybrid). When the signals are weak the heuristic says it is unsure, and an LLM
router (if configured) may decide instead; its answer is validated against these four names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from pgcite.llm._parse import MATERIAL_RULE, clean_reply, json_value, tag, unquote
from pgcite.llm._types import ChatModel, LLMError
from pgcite.retrieve._decompose import split_heuristic

ROUTES: tuple[str, ...] = ("keyword", "direct", "decompose", "hyde")
_TOKEN = re.compile(r"[\w'’-]+")
# Codes: a short letter prefix and at least two digits (ISO-9001, RFC2616, p53, ERR_404), or
# digits then a code (2024-001A). Not acronyms (UK, SIDS) and not "0-dimensional" or "5th":
# on SciFact those sent half the claims keyword-heavy and cost nDCG (bench/stages.py).
_ID = re.compile(r"^[A-Za-z]{1,6}[-_]?\d{2,}[A-Za-z\d-]*$|^\d+[-_][A-Z\d]+$")
_QUESTION_WORDS = frozenset(
    ["what", "how", "why", "when", "where", "who", "whom", "whose", "which", "did", "does", "do", "is", "are", "was", "were", "can", "could", "should", "would", "will", "has", "have", "had", "tell", "explain", "describe"])

# How a question asks for people, places or a count of them (English; elsewhere the keyword
# route decides): its first words, lowercased.
EntityAsk = Literal["who", "where", "how often"]
_ENTITY_ASKS: tuple[tuple[tuple[str, ...], EntityAsk], ...] = (
    (("who",), "who"), (("whom",), "who"), (("whose",), "who"), (("with", "whom"), "who"),
    (("to", "whom"), "who"), (("where",), "where"), (("how", "often"), "how often"),
    (("how", "many", "times"), "how often"), (("how", "frequently"), "how often"),
)


class Route(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    reason: str
    sure: bool


def heuristic_route(question: str) -> Route:
    """The route for ``question`` and why (see module doc)."""
    text = " ".join(question.split())
    words = _TOKEN.findall(text)
    if '"' in text:
        return Route(name="keyword", reason="quoted phrase", sure=True)
    ids = [w for w in words if _ID.match(w) and not _is_roman(w)]
    if ids:
        return Route(name="keyword", reason=f"identifier {ids[0]!r}", sure=True)
    if split_heuristic(text):
        return Route(name="decompose", reason="multi-concept question", sure=True)
    asks = bool(words) and words[0].lower() in _QUESTION_WORDS
    names = _names(words)
    if not asks and len(words) <= 4:
        return Route(name="keyword", reason="a few bare terms, not a question", sure=True)
    if asks and not names and len(words) >= 10:
        return Route(name="hyde", reason=f"{len(words)}-word question without names", sure=True)
    if names and len(words) <= 8:
        return Route(name="keyword", reason=f"short question naming {names[0]!r}", sure=False)
    return Route(name="direct", reason="no strong signal", sure=False)


def entity_question(question: str) -> str | None:
    """Why ``question`` is about the people and places it names (None: it is not): it asks
    who, where or how often (:func:`entity_ask`), or the router sends it keyword-heavy (a short question naming someone, a few
    bare terms, a quoted phrase, a code). Such questions get the entity boost by default
    (``Stages.entity_boost`` "auto"); others -- a longer question about an event, where a
    name is often its setting ("the Great Plague ... affect London") -- do not: on the Pepys
    golden set boosting every question lowered fact questions (bench/results/entities)."""
    ask = entity_ask(question)
    if ask is not None:
        return f"asks {ask}"
    route = heuristic_route(question)
    return f"keyword route: {route.reason}" if route.name == "keyword" else None


def entity_ask(question: str) -> EntityAsk | None:
    """What an entity question asks for, from its first words: "who" (people: who, whom,
    whose, with whom), "where" (places) or "how often" (how often, how many times) -- None for
    any other question. The answerer states the graph's facts for these
    (:mod:`pgcite.answer._facts`)."""
    words = [w.lower() for w in _TOKEN.findall(" ".join(question.split())[:80])]
    for start, ask in _ENTITY_ASKS:
        if tuple(words[: len(start)]) == start:
            return ask
    return None


def _names(words: list[str]) -> list[str]:
    """Capitalised words after the first (proper names in English; other scripts have none)."""
    return [w for w in words[1:] if w[:1].isupper() and w != "I"]


def _is_roman(word: str) -> bool:
    return re.fullmatch(r"[IVXLC]+", word) is not None  # "Charles II" is a name, not an id


def parse_route(reply: str, routes: Sequence[str]) -> str:
    """The route named by ``{"route": "…"}`` or by the bare reply; strictly one of ``routes``."""
    text = clean_reply(reply)
    value = json_value(text)
    if isinstance(value, dict) and isinstance(value.get("route"), str):
        text = value["route"]
    elif value is not None and not isinstance(value, str):
        raise LLMError(f"router: expected {{\"route\": …}}: {reply[:80]!r}")
    name = unquote(text).strip(" .")
    if name in routes:
        return name
    folded = [r for r in routes if r.casefold() == name.casefold()]
    if len(folded) == 1:
        return folded[0]
    raise LLMError(f"router: {name[:40]!r} is not one of {', '.join(routes)}")


def route_with_llm(chat: ChatModel, question: str, *, routes: Sequence[str],
                   max_tokens: int = 40) -> str:
    """Pick one of ``routes`` for ``question`` (used only when the heuristic router is unsure).

    Raises :class:`LLMError` if the model fails or names anything but one of ``routes``.
    """
    if not routes:
        raise ValueError("route_with_llm needs at least one route")
    system = "\n".join([
        "You choose how to search for the answer to a question.",
        MATERIAL_RULE,
        'Reply with only a JSON object {"route": "<route>"}, where <route> is exactly one of: '
        + ", ".join(routes) + ".",
    ])
    user = f"Question: {tag('question', question)}\nRoutes: {', '.join(routes)}"
    return parse_route(chat.chat(system, user, max_tokens=max_tokens), routes)
