"""Ranked results as the evaluation sees them, and TREC run files.

A searcher returns chunks; judgments are about documents. :func:`collapse_to_documents` turns a
chunk ranking into a document ranking by keeping each document at the rank of its best chunk.

TREC run files (``qid Q0 docid rank score tag``) are ordered by *score* by every TREC tool
(trec_eval, ranx, pytrec_eval), never by the rank column, and each breaks score ties its own way.
So :func:`write_trec_run` writes our own scores only when they strictly decrease down a query's
list; otherwise it writes rank-derived scores (``n, n-1, ..., 1``) for that query, which makes every
tool see exactly our order. Reading such a file back gives those rank-derived scores.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from pgcite._errors import ConfigError

Run = dict[str, list[tuple[str, float]]]
"""Query id -> [(document id, score)] in rank order, best first."""


class RankedHit(Protocol):
    """What the evaluation needs from one search result (a chunk)."""

    @property
    def id(self) -> str: ...  # chunk id

    @property
    def document_id(self) -> str: ...

    @property
    def score(self) -> float: ...

    @property
    def date_end(self) -> dt.date | None: ...


@dataclass(frozen=True)
class ScoredHit:
    """A plain :class:`RankedHit`, for tests and for searchers that have nothing richer (not
    :class:`pgcite.Hit`, the one hit a search returns)."""

    id: str
    document_id: str
    score: float
    date_end: dt.date | None = None


H = TypeVar("H", bound=RankedHit)


def collapse_to_documents(hits: Sequence[H]) -> list[H]:
    """Keep each document's first (best-ranked) chunk, drop its later chunks, keep the order."""
    seen: set[str] = set()
    kept: list[H] = []
    for hit in hits:
        if hit.document_id not in seen:
            seen.add(hit.document_id)
            kept.append(hit)
    return kept


def strictly_ranked(ranking: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """The ranking with scores that strictly decrease: ours if they already do, else ``n..1``.

    Scoring tools sort by score, so this is what makes them see our order (see module doc).
    """
    scores = [score for _, score in ranking]
    decreasing = all(math.isfinite(s) for s in scores) and all(
        a > b for a, b in zip(scores, scores[1:], strict=False)
    )
    if decreasing:
        return list(ranking)
    n = len(ranking)
    return [(doc, float(n - i)) for i, (doc, _) in enumerate(ranking)]


_TOKEN = re.compile(r"^\S+$")


def write_trec_run(path: Path, run: Run, tag: str) -> None:
    """Write ``run`` as a TREC run file, queries in ``run``'s order, scores strictly decreasing."""
    _check_token("tag", tag)
    lines: list[str] = []
    for qid, ranking in run.items():
        _check_token("query id", qid)
        for rank, (doc, score) in enumerate(strictly_ranked(ranking), start=1):
            _check_token("document id", doc)
            # repr() round-trips a float exactly, so strict decrease survives the file.
            lines.append(f"{qid} Q0 {doc} {rank} {score!r} {tag}\n")
    Path(path).write_text("".join(lines), encoding="utf-8")


def read_trec_run(path: Path) -> Run:
    """Read a TREC run file; each query's documents sorted by score, best first.

    Ties (only in files we did not write) keep file order. A document listed twice for one query,
    a wrong column count or an unparsable rank/score is an error naming the line.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such run file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 (byte {exc.start})") from None
    run: Run = {}
    seen: dict[str, set[str]] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        qid, doc, score = _parse_line(path, n, line)
        if doc in seen.setdefault(qid, set()):
            raise ConfigError(f"{path}:{n}: document {doc!r} listed twice for query {qid!r}")
        seen[qid].add(doc)
        run.setdefault(qid, []).append((doc, score))
    # sorted() is stable, so equal scores keep their file order.
    return {qid: sorted(ranking, key=lambda p: -p[1]) for qid, ranking in run.items()}


def _parse_line(path: Path, n: int, line: str) -> tuple[str, str, float]:
    fields = line.split()
    if len(fields) != 6:
        raise ConfigError(
            f"{path}:{n}: expected 6 fields 'qid Q0 docid rank score tag', found {len(fields)}"
        )
    qid, _, doc, rank, score_text, _ = fields
    try:
        int(rank)
        score = float(score_text)
    except ValueError:
        raise ConfigError(f"{path}:{n}: rank must be an integer and score a number") from None
    if math.isnan(score):
        raise ConfigError(f"{path}:{n}: score is NaN")
    return qid, doc, score


def _check_token(what: str, value: str) -> None:
    # A TREC line is whitespace-separated: an id with a space would shift every column after it.
    if not _TOKEN.match(value):
        raise ConfigError(f"{what} {value!r} cannot be written to a TREC run (empty or has spaces)")
