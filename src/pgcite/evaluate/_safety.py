"""Safety counts: results a query forbids, counted over everything the searcher returned.

* cutoff violation -- on a query with a cutoff, a hit dated after it, or an undated hit (an undated
  passage cannot be shown to respect the cutoff);
* must_not hit -- a hit whose document is in the query's ``must_not`` list.

Counts are over *all* hits (chunks), not the top k documents: anything returned can be shown to a
user or quoted by a model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pgcite.evaluate._base import Frozen
from pgcite.evaluate._golden import GoldenQuery
from pgcite.evaluate._runs import RankedHit


class QuerySafety(Frozen):
    """Forbidden hits for one query."""

    cutoff_violations: int = 0
    undated_on_cutoff: int = 0  # the part of cutoff_violations that had no date at all
    must_not_hits: int = 0


class SafetyCounts(Frozen):
    """Forbidden hits summed over queries: hits, and queries with at least one."""

    cutoff_violations: int = 0
    undated_on_cutoff: int = 0
    must_not_hits: int = 0
    queries_with_cutoff_violations: int = 0
    queries_with_must_not_hits: int = 0


class Safety(Frozen):
    """Totals overall and per query kind."""

    total: SafetyCounts
    by_kind: dict[str, SafetyCounts]


def check_query(query: GoldenQuery, hits: Sequence[RankedHit]) -> QuerySafety:
    """Count the forbidden hits among everything returned for ``query``."""
    late = undated = 0
    if query.cutoff is not None:
        for hit in hits:
            if hit.date_end is None:
                undated += 1
            elif hit.date_end > query.cutoff:
                late += 1
    must_not = set(query.must_not)
    return QuerySafety(
        cutoff_violations=late + undated,
        undated_on_cutoff=undated,
        must_not_hits=sum(hit.document_id in must_not for hit in hits),
    )


def summarize_safety(rows: Iterable[tuple[str, QuerySafety]]) -> Safety:
    """Sum per-query counts (given as ``(kind, counts)``) overall and per kind."""
    rows = list(rows)
    kinds = dict.fromkeys(kind for kind, _ in rows)
    return Safety(
        total=_sum(counts for _, counts in rows),
        by_kind={k: _sum(counts for kind, counts in rows if kind == k) for k in kinds},
    )


def _sum(rows: Iterable[QuerySafety]) -> SafetyCounts:
    rows = list(rows)
    return SafetyCounts(
        cutoff_violations=sum(r.cutoff_violations for r in rows),
        undated_on_cutoff=sum(r.undated_on_cutoff for r in rows),
        must_not_hits=sum(r.must_not_hits for r in rows),
        queries_with_cutoff_violations=sum(r.cutoff_violations > 0 for r in rows),
        queries_with_must_not_hits=sum(r.must_not_hits > 0 for r in rows),
    )
