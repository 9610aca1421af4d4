"""The context a generator sees: retrieved passages, best first, cut to a token budget, each in a
``<passage id=… author=… date=…>`` tag.

Tokens are counted approximately as ``ceil(words * 1.3)`` (whitespace-separated words): English
text runs at about 1.3 BPE tokens per word, so the estimate stays within ~15 % of a real tokenizer
for prose without pulling in one. The budget is a safety margin, not an exact fit.
"""

from __future__ import annotations

import math
import re
from html import escape

from pgcite.answer._dates import iso_stated
from pgcite.answer._types import ContextPassage
from pgcite.retrieve._hits import Hit

TOKENS_PER_WORD = 1.3
DEFAULT_TOKEN_BUDGET = 4000
MIN_TRUNCATED_TOKENS = 40  # a cut passage shorter than this is more noise than evidence

# A passage must not be able to close its own tag (or open a fake one) and smuggle text out.
_TAG_LIKE = re.compile(r"<(/?)(passage)", re.IGNORECASE)


def approx_tokens(text: str) -> int:
    """Approximate token count: ``ceil(words * 1.3)``."""
    return math.ceil(len(text.split()) * TOKENS_PER_WORD)


def to_passage(hit: Hit) -> ContextPassage:
    date = hit.date_start.isoformat() if hit.date_start else None
    end = hit.date_end.isoformat() if hit.date_end and hit.date_end != hit.date_start else None
    return ContextPassage(id=hit.id, author=hit.author, date=date, date_end=end, text=hit.body,
                          rank=hit.rank)


def render_passage(passage: ContextPassage) -> str:
    """``<passage id="…" author="…" date="…">text</passage>``, attribute values escaped."""
    attrs = [f'id="{escape(passage.id, quote=True)}"']
    if passage.author:
        attrs.append(f'author="{escape(passage.author, quote=True)}"')
    stated = iso_stated(passage.date, passage.date_end)  # "1855", never an invented day
    if stated:
        attrs.append(f'date="{escape(stated, quote=True)}"')
    body = _TAG_LIKE.sub(r"&lt;\1\2", passage.text)
    return f"<passage {' '.join(attrs)}>{body}</passage>"


def render_context(passages: list[ContextPassage]) -> str:
    return "\n\n".join(render_passage(p) for p in passages)


def _truncate(passage: ContextPassage, budget: int) -> ContextPassage | None:
    """The passage cut to fit ``budget`` tokens (tag included), or None if too little is left."""
    overhead = approx_tokens(render_passage(passage.model_copy(update={"text": ""}))) + 1
    words = passage.text.split()
    keep = math.floor((budget - overhead) / TOKENS_PER_WORD)
    if keep * TOKENS_PER_WORD < MIN_TRUNCATED_TOKENS:
        return None
    return passage.model_copy(update={"text": " ".join(words[:keep]) + " …", "truncated": True})


def fit_context(hits: list[Hit], budget: int) -> tuple[list[ContextPassage], list[str]]:
    """Passages in rank order while they fit ``budget``; the first that does not fit is cut to
    the space left (if that is worth it) and the rest are dropped. Returns (kept, dropped ids)."""
    kept: list[ContextPassage] = []
    used = 0
    for index, hit in enumerate(hits):
        passage = to_passage(hit)
        cost = approx_tokens(render_passage(passage))
        if used + cost <= budget:
            kept.append(passage)
            used += cost
            continue
        cut = _truncate(passage, budget - used)
        if cut is not None:
            kept.append(cut)
            index += 1
        return kept, [h.id for h in hits[index:]]
    return kept, []
