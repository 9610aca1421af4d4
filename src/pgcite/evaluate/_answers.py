"""Answer quality without a model, where the gold answer and evidence are known (ALCE-style).

Per answer: does it contain a gold answer string (anywhere; in its first sentence), how many of
the passages it cites are evidence (the judged passage, or one that contains a gold string:
citation precision), whether it cites the judged evidence at all (citation recall), its length
in words, whether it abstained, whether its first quoted sentence is a heading, date line,
salutation or signature (:mod:`pgcite.answer._roles`), and how many cited passages are dated after
the query's cutoff (or undated under one). :func:`summarize` turns records into rates per query
kind.
Citations ``[id]`` are removed before any text comparison: an id must never "contain" an answer.
"""

from __future__ import annotations

import datetime as dt
import re
import statistics
import time
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence

from psycopg import sql
from pydantic import BaseModel, ConfigDict

from pgcite.answer._roles import Role, frame_role
from pgcite.answer._sentences import split_sentences
from pgcite.answer._types import Answer
from pgcite.evaluate._golden import GoldenQuery, GoldenSet
from pgcite.retrieve._query_text import unaccented
from pgcite.retrieve._view import SearchView

_CITATION = re.compile(r"\[[^\[\]\n]*\]")
_QUOTED = re.compile(r"^[^“\n]{0,160}?:\s*“(.+?)”?\s*$")  # "X wrote on …: “quote”"


class Passage(BaseModel):
    """What the scorer knows of a citable passage: its document and its full text."""

    model_config = ConfigDict(frozen=True)

    document_id: str
    text: str
    date_end: dt.date | None = None  # the last day it covers (None: undated)


class AnswerRecord(BaseModel):
    """One scored answer (``None``: the metric does not apply to this query)."""

    query_id: str
    kind: str
    answerable: bool
    abstained: bool
    contains: bool | None
    first_contains: bool | None
    cited: list[str]
    precision: float | None
    only_evidence: bool | None
    gold_cited: bool | None
    words: int
    latency_ms: float
    answer: str = ""
    # the role of the answer's first quoted sentence (None: a statement, or nothing said)
    first_frame: Role | None = None
    cutoff_violations: int = 0  # cited passages dated after the cutoff, or undated under one


def strip_citations(text: str) -> str:
    return _CITATION.sub(" ", text)


def normalize(text: str) -> str:
    """Casefolded words without punctuation or combining marks (Arabic vowel signs too)."""
    kept = (" " if unicodedata.category(ch)[0] in "PSZ" else ch for ch in unaccented(text))
    return " ".join("".join(kept).split())


def contains_answer(text: str, answers: Iterable[str]) -> bool:
    """A gold string appears in the text as whole words (so "four" is not in "fourteen")."""
    haystack = f" {normalize(strip_citations(text))} "
    return any(n and f" {n} " in haystack for n in (normalize(a) for a in answers))


def first_sentence(text: str) -> str:
    """The answer's first sentence (its first line's, for one-claim-a-line answers)."""
    sentences = split_sentences(text, keep_lines=True)
    if not sentences:
        return ""
    inner = split_sentences(strip_citations(sentences[0]))
    return inner[0] if inner else sentences[0]


def first_quote(text: str) -> str:
    """The first sentence the answer quotes or says: inside the quotation marks of an
    attributed line ("Samuel Pepys wrote on …: “…”"), else the first sentence."""
    line = strip_citations(text).strip().splitlines()[0] if text.strip() else ""
    quoted = _QUOTED.match(line.strip())
    sentences = split_sentences(quoted.group(1) if quoted else line)
    return sentences[0] if sentences else ""


def late_citations(query: GoldenQuery, cited: Sequence[str],
                   passages: Mapping[str, Passage]) -> int:
    """Cited passages the query's cutoff forbids: dated after it, or undated."""
    if query.cutoff is None:
        return 0
    ends = [passages[c].date_end if c in passages else None for c in cited]
    return sum(end is None or end > query.cutoff for end in ends)


def word_count(text: str) -> int:
    return len(strip_citations(text).split())


def is_evidence(passage: Passage | None, query: GoldenQuery) -> bool:
    """The judged passage, or one that contains a gold answer string."""
    if passage is None:
        return False
    return passage.document_id in query.relevant_ids or (
        bool(query.answers) and contains_answer(passage.text, query.answers))


def score_answer(query: GoldenQuery, *, answer: str, abstained: bool, cited: Sequence[str],
                 passages: Mapping[str, Passage], latency_ms: float) -> AnswerRecord:
    evidence = [is_evidence(passages.get(c), query) for c in cited]
    gold = query.answers if query.answerable else []
    said = not abstained
    return AnswerRecord(
        query_id=query.id, kind=query.kind, answerable=query.answerable, abstained=abstained,
        contains=(said and contains_answer(answer, gold)) if gold else None,
        first_contains=(said and contains_answer(first_sentence(answer), gold)) if gold else None,
        cited=list(cited),
        precision=sum(evidence) / len(evidence) if evidence else None,
        only_evidence=all(evidence) if evidence else None,
        gold_cited=(any(passages[c].document_id in query.relevant_ids for c in cited
                        if c in passages) if query.answerable else None),
        words=word_count(answer) if said else 0, latency_ms=latency_ms, answer=answer,
        first_frame=frame_role(first_quote(answer)) if said else None,
        cutoff_violations=late_citations(query, cited, passages),
    )


def _rate(values: Iterable[bool | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(sum(kept) / len(kept), 4) if kept else None


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(statistics.fmean(kept), 4) if kept else None


def summarize(records: Sequence[AnswerRecord]) -> dict[str, float | int | None]:
    """Rates over ``records``. Containment counts an abstention on an answerable query as a
    miss; citation precision averages over answers that cite something; words average over
    answers given; abstention is reported separately for absent and answerable queries."""
    answerable = [r for r in records if r.answerable]
    answered = [r for r in answerable if not r.abstained]
    latencies = sorted(r.latency_ms for r in records)
    return {
        "queries": len(records),
        "containment": _rate(r.contains for r in answerable),
        "first_sentence_containment": _rate(r.first_contains for r in answerable),
        "citation_precision": _mean(r.precision for r in answered),
        "cites_only_evidence": _rate(bool(r.only_evidence) for r in answered),
        "citation_recall": _rate(r.gold_cited for r in answerable),
        # of the answerable questions answered: at least one cited passage is judged relevant
        "cites_relevant": _rate(r.gold_cited for r in answered),
        "first_sentence_frames": sum(r.first_frame is not None for r in records),
        "cutoff_violations": sum(r.cutoff_violations for r in records),
        "words": _mean(float(r.words) for r in answered),
        "abstain_absent": _rate(r.abstained for r in records if not r.answerable),
        "abstain_answerable": _rate(r.abstained for r in answerable),
        "latency_ms_p50": round(latencies[len(latencies) // 2], 1) if latencies else None,
    }


def summarize_by_kind(records: Sequence[AnswerRecord]) -> dict[str, dict[str, float | int | None]]:
    """``{"all": …, kind: …}`` in order of first appearance."""
    kinds = list(dict.fromkeys(r.kind for r in records))
    return {"all": summarize(records),
            **{k: summarize([r for r in records if r.kind == k]) for k in kinds}}


def collection_passages(view: SearchView) -> dict[str, Passage]:
    """Every passage of the view's snapshot: id -> (document id, full text)."""
    with view.connection() as conn:
        rows = conn.execute(sql.SQL(
            "SELECT c.id, c.document_id, c.body, c.date_end FROM {s}.chunks c"
            " JOIN {s}.snapshot_members m USING (version_pk) WHERE m.snapshot_id = %s"
        ).format(s=view.info.schema_id), (view.snapshot.snapshot_id,)).fetchall()
    return {r[0]: Passage(document_id=r[1], text=r[2], date_end=r[3]) for r in rows}


# One golden query in, its answer out (e.g. Collection.answer with the query's cutoff, pinned
# to the snapshot the passages were read from).
AskFn = Callable[[GoldenQuery], Answer]


def answer_golden(ask: AskFn, passages: Mapping[str, Passage], golden: GoldenSet
                  ) -> list[AnswerRecord]:
    """Ask every golden query and score each answer against ``passages``."""
    records = []
    for query in golden.queries:
        started = time.perf_counter()
        answer = ask(query)
        records.append(score_answer(
            query, answer=answer.answer, abstained=answer.abstained, cited=answer.citations,
            passages=passages, latency_ms=(time.perf_counter() - started) * 1000))
    return records
