"""IR metrics, computed by ranx (https://amenra.github.io/ranx/), never by hand.

ranx conventions worth knowing when reading the numbers:

* nDCG uses linear gain (the grade itself, trec_eval's convention), ideal DCG over the best
  ``min(|relevant|, k)`` grades;
* precision@k divides by k even when fewer than k documents came back;
* a query the run does not mention scores 0 (``make_comparable=True``).

Queries without a relevant document (``absent``) cannot be scored -- ranx refuses empty
judgments, and every metric would be 0 or undefined -- so they are left out of these means and
listed in :attr:`QueryScores.unscored`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np

from pgcite.evaluate._base import Frozen
from pgcite.evaluate._golden import GoldenSet
from pgcite.evaluate._runs import Run, strictly_ranked

DEEP_RECALL_K = 100
"""recall@100 is always reported as well: how much a re-ranker could still find."""


class QueryScores(Frozen):
    """ranx scores: per query, their mean over all scored queries, and the mean per kind."""

    k: int
    metrics: list[str]  # e.g. ["ndcg@10", "precision@10", "recall@10", "mrr@10", "recall@100"]
    per_query: dict[str, dict[str, float]]  # scored queries only
    overall: dict[str, float]
    by_kind: dict[str, dict[str, float]]  # kinds with at least one scored query
    scored_by_kind: dict[str, int]
    unscored: list[str]  # query ids without relevant documents


def metric_names(k: int) -> list[str]:
    """The metrics reported at cutoff ``k``, in table order."""
    names = [f"ndcg@{k}", f"precision@{k}", f"recall@{k}", f"mrr@{k}", f"recall@{DEEP_RECALL_K}"]
    return list(dict.fromkeys(names))  # k == 100 would list recall@100 twice


def to_ranx_qrels(golden: GoldenSet) -> dict[str, dict[str, int]]:
    """Judgments of the scorable queries, positive grades only."""
    qrels: dict[str, dict[str, int]] = {}
    for query in golden.queries:
        relevant = {doc: g for doc, g in query.relevant.items() if g > 0}
        if relevant:
            qrels[query.id] = relevant
    return qrels


def to_ranx_run(run: Run) -> dict[str, dict[str, float]]:
    """The run as ranx wants it, with scores that make ranx's sort reproduce our order."""
    return {qid: dict(strictly_ranked(ranking)) for qid, ranking in run.items() if ranking}


def score_run(golden: GoldenSet, run: Run, *, k: int = 10) -> QueryScores:
    """Score ``run`` against ``golden`` with ranx at cutoff ``k`` (plus recall@100)."""
    if k < 1:
        raise ValueError("k must be at least 1")
    metrics = metric_names(k)
    qrels = to_ranx_qrels(golden)
    per_query = _ranx_per_query(qrels, to_ranx_run(run), metrics) if qrels else {}
    kind_of = {q.id: q.kind for q in golden.queries}
    by_kind: dict[str, dict[str, float]] = {}
    scored_by_kind: dict[str, int] = {}
    for kind in golden.kinds():
        ids = [qid for qid in per_query if kind_of[qid] == kind]
        if ids:
            by_kind[kind] = _means(per_query[q] for q in ids)
            scored_by_kind[kind] = len(ids)
    return QueryScores(
        k=k,
        metrics=metrics,
        per_query=per_query,
        overall=_means(per_query.values()) if per_query else dict.fromkeys(metrics, 0.0),
        by_kind=by_kind,
        scored_by_kind=scored_by_kind,
        unscored=[q.id for q in golden.queries if q.id not in qrels],
    )


def _ranx_per_query(
    qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], metrics: list[str]
) -> dict[str, dict[str, float]]:
    """Per-query ranx scores for every judged query, in ``qrels`` order."""
    # Imported here: ranx (numba) takes seconds to import, and the CLI imports this package for
    # commands that never score anything.
    from ranx import Qrels
    from ranx import evaluate as ranx_evaluate

    ranx_run = _ranx_run_covering(run, qrels)
    with warnings.catch_warnings():
        # numba warns about a uint64 -> int64 hash cast inside ranx; harmless, and noisy.
        warnings.simplefilter("ignore")
        ranx_evaluate(Qrels.from_dict(qrels), ranx_run, metrics, make_comparable=True)
    return {qid: {m: float(ranx_run.scores[m][qid]) for m in metrics} for qid in qrels}


def _ranx_run_covering(run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]]) -> Any:
    from ranx import Run as RanxRun

    # ranx cannot build a Run with no documents at all; a document id no judgment uses is
    # non-relevant to every query, so adding it to one query changes no metric.
    if not any(qid in qrels for qid in run):
        first = next(iter(qrels))
        run = {first: {"\x00no-results": 0.0}}
    return RanxRun.from_dict(run)


def _means(rows: Iterable[dict[str, float]]) -> dict[str, float]:
    rows = list(rows)
    return {m: float(np.mean([r[m] for r in rows])) for m in rows[0]}
