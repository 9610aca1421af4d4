"""The output check: citations and attribution.

Citations. An answer cites passages as ``[id]`` (several as ``[a][b]`` or ``[a, b]``). Every
bracket group is rewritten: ids among the passages the generator was given are kept, one bracket
each (``[a][b]``); anything else is dropped. Brackets that are not valid citations (``[sic]``,
an unmatched ``[``) become parentheses, so the only ``[…]`` left in a checked answer are
citations of given passages — that is the invariant the property tests check.

Attribution. A collection may speak as its persona author (``CollectionSettings.persona_author``).
A first-person sentence ("I", "my", "we" …) that uses another author's passage must say whose
words they are ("my wife wrote", "according to …", "X recorded …"); otherwise the whole answer
fails the check. A sentence's passages are the ones it cites; a sentence that cites nothing takes
the citations of the next citing sentence of its paragraph (the common "claim. claim. [id]").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pgcite.answer._sentences import split_sentences

_GROUP = re.compile(r"\[([^\[\]\n]{0,400})\]")
_SPLIT_IDS = re.compile(r"\s*[,;]\s*")

_FIRST_PERSON_I = re.compile(r"\bI\b")
_FIRST_PERSON_OTHER = re.compile(r"\b(?:me|my|mine|myself|we|us|our|ours|ourselves)\b",
                                 re.IGNORECASE)
_REPORTING = (
    r"wrote|writes|write|says|said|recorded|records|noted|notes|recalls|recalled|"
    r"recounts|recounted|reports|reported|tells|told|describes|described|mentions|mentioned|"
    r"remembers|remembered|observed|observes|complained|complains"
)
# "according to …", "in her words/diary/letter", or a reporting verb whose subject is someone
# other than I/we ("my sister wrote", "Elizabeth Pepys recorded"; "I wrote" does not count).
_ATTRIBUTION = re.compile(
    r"\baccording to\b"
    r"|\bin (?:her|his|their|its) (?:own )?(?:words|diary|letters?|account|journal|notes?)\b"
    rf"|\b(?!(?:I|we)\b)[\w’'.-]+\s+(?:{_REPORTING})\b",
    re.IGNORECASE,
)


def cited_ids(text: str) -> list[str]:
    """Ids cited in ``text`` (already checked text: one id per bracket), first-seen order."""
    seen: dict[str, None] = {}
    for match in _GROUP.finditer(text):
        seen.setdefault(match[1].strip(), None)
    return [i for i in seen if i]


@dataclass
class CitationCheck:
    text: str
    cited: list[str]
    removed: list[str] = field(default_factory=list)


def _group_ids(content: str, allowed: set[str]) -> tuple[list[str], list[str]]:
    whole = content.strip()
    if whole in allowed:
        return [whole], []
    parts = [p for p in _SPLIT_IDS.split(whole) if p]
    return [p for p in parts if p in allowed], [p for p in parts if p not in allowed]


def _unbracket(text: str) -> str:
    return text.replace("[", "(").replace("]", ")")


def check_citations(text: str, allowed: set[str]) -> CitationCheck:
    """Keep only citations of ``allowed`` ids; see the module doc for the exact rewrite."""
    # An id that itself holds a bracket could never be told apart from text: never citable.
    allowed = {a for a in allowed if "[" not in a and "]" not in a and "\n" not in a}
    pieces: list[str] = []
    cited: dict[str, None] = {}
    removed: list[str] = []
    last = 0
    for match in _GROUP.finditer(text):
        pieces.append(_unbracket(text[last:match.start()]))
        keep, drop = _group_ids(match[1], allowed)
        if keep:
            pieces.append("".join(f"[{i}]" for i in keep))
            cited.update(dict.fromkeys(keep))
            removed.extend(drop)
        elif looks_like_citation(match[1]):
            removed.extend(drop)  # a citation of something not given: drop it entirely
        else:
            pieces.append(f"({match[1]})")  # ordinary bracketed text, e.g. [sic]
        last = match.end()
    pieces.append(_unbracket(text[last:]))
    cleaned = re.sub(r"[ \t]+([.,;:!?])", r"\1", "".join(pieces))
    return CitationCheck(text=re.sub(r"[ \t]{2,}", " ", cleaned).strip(), cited=list(cited),
                         removed=removed)


def looks_like_citation(content: str) -> bool:
    """A bracket that reads as an id (no spaces inside each comma-separated part)."""
    parts = [p for p in _SPLIT_IDS.split(content.strip()) if p]
    return bool(parts) and all(" " not in p for p in parts)


@dataclass(frozen=True)
class AttributionViolation:
    sentence: str
    passage_ids: tuple[str, ...]
    authors: tuple[str, ...]


def is_first_person(sentence: str) -> bool:
    bare = _GROUP.sub(" ", sentence)
    return bool(_FIRST_PERSON_I.search(bare) or _FIRST_PERSON_OTHER.search(bare))


def is_attributed(sentence: str) -> bool:
    return bool(_ATTRIBUTION.search(_GROUP.sub(" ", sentence)))


def _sentence_citations(text: str) -> list[tuple[str, list[str]]]:
    """Each sentence with the ids it relies on (its own, else the next citing sentence's in the
    same paragraph)."""
    result: list[tuple[str, list[str]]] = []
    for paragraph in re.split(r"\n\s*\n", text):
        sentences = split_sentences(paragraph, keep_lines=True)  # one claim a line
        own = [cited_ids(s) for s in sentences]
        for i, sentence in enumerate(sentences):
            ids = own[i] or next((o for o in own[i + 1:] if o), [])
            result.append((sentence, ids))
    return result


def _same_author(a: str | None, b: str) -> bool:
    return a is not None and a.strip().casefold() == b.strip().casefold()


def check_attribution(
    text: str, authors: Mapping[str, str | None], persona: str | None
) -> list[AttributionViolation]:
    """First-person sentences that use another author's passage without saying so."""
    if not persona:
        return []
    violations = []
    for sentence, ids in _sentence_citations(text):
        others = [i for i in ids if not _same_author(authors.get(i), persona)]
        if others and is_first_person(sentence) and not is_attributed(sentence):
            violations.append(AttributionViolation(
                sentence=sentence, passage_ids=tuple(others),
                authors=tuple(authors.get(i) or "an unknown author" for i in others),
            ))
    return violations
