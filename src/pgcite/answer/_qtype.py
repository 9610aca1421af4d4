"""What kind of answer a question asks for, and whether a sentence holds one (answer-type cues).

English and Arabic question words; anything else is "other" and gives no cue. A cue only
says a sentence has a token of the right shape (a date, a number, a name); it never decides.
"""

from __future__ import annotations

import re

_EN = [
    ("how many", r"how (?:many|much|long|old|far|large|big|tall|often)"
                 r"|(?:what|which) (?:percentage|percent|proportion|number|amount|fraction)"),
    ("when", r"when|(?:what|which) (?:year|date|day|month|decade|century|time|period)"
             r"|in (?:what|which) (?:year|decade|century)"),
    ("who", r"who|whom|whose"),
    ("where", r"where"),
    ("which", r"which"),
    ("what", r"what"),
    ("why", r"why"),
    ("how", r"how"),
]
_AR = [
    ("how many", r"كم"),
    ("when", r"متى|في أي عام|في أي سنة"),
    ("who", r"من|لمن"),
    ("where", r"أين|اين"),
    ("which", r"أي|اي"),
    ("what", r"ما|ماذا|مالذي|ما هو|ما هي"),
    ("why", r"لماذا|لم"),
    ("how", r"كيف"),
]
_PATTERNS = [(kind, re.compile(rf"(?:^|[\s,؛،])(?:{words})(?=[\s؟?]|$)", re.IGNORECASE))
             for kind, words in [*_EN, *_AR]]
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|"
           "december|يناير|فبراير|مارس|أبريل|مايو|يونيو|يوليو|أغسطس|سبتمبر|أكتوبر|نوفمبر|ديسمبر")
_DATE = re.compile(rf"\b(?:1[0-9]{{3}}|20[0-9]{{2}})s?\b|[١٢][٠-٩]{{3}}|(?:{_MONTHS})|"
                   r"\bcentury\b|القرن", re.IGNORECASE)
_NUMBER_WORDS = ("one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|"
                 "thirty|forty|fifty|hundred|thousand|million|billion|dozen|half")
_NUMBER = re.compile(rf"[0-9٠-٩]|\b(?:{_NUMBER_WORDS})\b|مليون|ألف|مئة|مائة", re.IGNORECASE)
# A capitalised word that does not open the sentence: a crude name detector (Latin script);
# or a name after a title, wherever it stands ("Capt. Lloyd killed …", "Sir W. Batten did …":
# journals open sentences with the person they are about).
_NAME = re.compile(r"(?<=[a-z,;] )[A-Z][a-z]+(?: [A-Z][a-z]+)*"
                   r"|\b(?:Mr|Mrs|Ms|Dr|Sir|Lord|Lady|Capt|Captain|Col|Colonel|Lieut|Lt|Maj|"
                   r"Gen|Sgt|Cpl|Pte|Rev|Revd|Deacon|Esq|Aunt|Uncle|Cousin)\.? (?:[A-Z]\. )*"
                   r"[A-Z][a-z]+")


def question_kind(question: str) -> str:
    """The first question word's kind ("how many" before "how", "when" before "what")."""
    text = f" {question.strip()}"
    found = [(m.start(), n, kind) for n, (kind, pattern) in enumerate(_PATTERNS)
             if (m := pattern.search(text))]
    return min(found)[2] if found else "other"


def has_answer_type(kind: str, sentence: str) -> bool:
    """Does the sentence hold a token of the shape ``kind`` asks for?"""
    if kind == "when":
        return bool(_DATE.search(sentence))
    if kind == "how many":
        return bool(_NUMBER.search(sentence))
    if kind == "who":
        return bool(_NAME.search(sentence))
    return False


# "What instruments …", "Which other members …": a plural noun after what/which asks for several
# things, which a list holds (not "What does …", "What did his …").
_SEVERAL = re.compile(r"^\s*(?:what|which)\s+(?:[a-z]+\s+)?([a-z]{3,}s)\b", re.IGNORECASE)
_NOT_PLURAL = frozenset(("does", "was", "has", "this", "his", "its", "hers", "ours", "yours",
                         "theirs", "thus", "always", "perhaps", "happens", "means", "goes", "says"))


def asks_for_several(question: str) -> bool:
    """Does the question ask for several things ("What instruments did Hartley lend?")?"""
    match = _SEVERAL.search(question)
    return (match is not None and match[1].casefold() not in _NOT_PLURAL
            and not match[1].casefold().endswith("ss"))


def cue_applies(kind: str) -> bool:
    return kind in ("when", "how many", "who")
