"""Query decomposition for multi-concept questions.

A regex heuristic (microseconds) spots "X vs Y", "difference between X and Y", "compare X and
Y", "how does X affect Y", "relationship between X and Y". Only when it fires is an LLM (if one
is configured) asked for 2–4 concept queries; otherwise — or when the LLM fails — the
heuristic's own split is used. The caller retrieves the original question and every concept
query, and fuses the lists with RRF.
"""

from __future__ import annotations

import json
import re

from pgcite.llm import ChatModel, LLMError, call_bounded

_SPLITTERS: tuple[re.Pattern[str], ...] = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"^(?:what (?:is|are) the )?differences? between (?P<a>.+?) and (?P<b>.+?)\??$",
    r"^(?:what is the )?relationship between (?P<a>.+?) and (?P<b>.+?)\??$",
    r"^compare (?P<a>.+?) (?:and|with|to|against) (?P<b>.+?)\??$",
    r"^(?:how|why) (?:does|do|did|can|could|might|would) (?P<a>.+?) "
    r"(?:affects?|influences?|impacts?|changes?|causes?|relates? to|lead to) (?P<b>.+?)\??$",
    r"^(?P<a>.+?)\s+(?:vs\.?|versus)\s+(?P<b>.+?)\??$",
))
DECOMPOSE_SYSTEM = (
    "Split the question into 2 to 4 short standalone search queries, one per concept it "
    'combines. Reply with a JSON list of strings only, e.g. ["query one", "query two"].'
)


def split_heuristic(question: str) -> list[str] | None:
    """The concepts of a multi-concept question, or None when it does not look like one."""
    text = " ".join(question.split())
    for pattern in _SPLITTERS:
        match = pattern.match(text)
        if match:
            parts = [match["a"].strip(" ,;:"), match["b"].strip(" ,;:?")]
            if all(len(p) >= 2 for p in parts):
                return parts
    return None


def split_with_llm(chat: ChatModel, question: str, *, timeout_s: float) -> list[str]:
    """2–4 concept queries from the LLM; LLMError when it is late or the output is unusable."""
    raw = call_bounded(lambda: chat.chat(DECOMPOSE_SYSTEM, question, max_tokens=120),
                       timeout_s, "decompose")
    return _parse_queries(raw, question)


def _parse_queries(raw: str, question: str) -> list[str]:
    match = re.search(r"\[.*\]", raw, re.DOTALL)
    items: list[object] = []
    if match:
        try:
            loaded = json.loads(match.group(0))
            items = loaded if isinstance(loaded, list) else []
        except ValueError:
            items = []
    if not items:  # one query per line, bullets and numbers stripped
        items = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line) for line in raw.splitlines()]
    seen: set[str] = {question.casefold().strip()}
    queries: list[str] = []
    for item in items:
        text = " ".join(str(item).split()).strip('"\' ')
        if 2 <= len(text) <= 300 and text.casefold() not in seen:
            seen.add(text.casefold())
            queries.append(text)
    if not 2 <= len(queries) <= 4:
        raise LLMError(f"decompose: expected 2-4 queries, got {len(queries)}")
    return queries
