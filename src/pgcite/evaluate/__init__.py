"""Evaluation harness: judged queries, ranx metrics, abstention, safety, latency and reports.

Nothing here touches the database. A caller turns each retrieval configuration into a
:data:`Searcher` (query -> :class:`SearchOutcome`) and calls :func:`evaluate`; or scores an
existing TREC run file with :func:`score_external_run`. :func:`write_reports` writes
``results.json``, ``report.md`` and ``report.html``; :func:`compare_results` diffs two results.
"""

import warnings
from typing import TYPE_CHECKING

from pgcite._lazy import lazy_exports
from pgcite.evaluate._abstain import Threshold, abstains, calibrate_threshold, fixed_threshold
from pgcite.evaluate._driver import Searcher, SearchOutcome, evaluate, score_external_run
from pgcite.evaluate._golden import GoldenQuery, GoldenSet, load_golden
from pgcite.evaluate._latency import (
    DEFAULT_BUDGETS,
    GOALS,
    HOUSE_BUDGETS,
    Budget,
    BudgetResult,
    LatencySummary,
    check_budgets,
    summarize_latencies,
)
from pgcite.evaluate._metrics import QueryScores, metric_names, score_run
from pgcite.evaluate._report import (
    compare_results,
    render_markdown,
    save_runs,
    summary_json,
    write_reports,
    write_summary,
)
from pgcite.evaluate._result import ConfigResult, EvalResult, PassRates, QueryRow, load_result
from pgcite.evaluate._runs import (
    RankedHit,
    Run,
    ScoredHit,
    collapse_to_documents,
    read_trec_run,
    write_trec_run,
)
from pgcite.evaluate._safety import QuerySafety, Safety, SafetyCounts, check_query
from pgcite.evaluate._tables import report_tables

if TYPE_CHECKING:
    from pgcite.evaluate._answers import answer_golden, collection_passages, summarize_by_kind
    from pgcite.evaluate._collection import collection_searcher, index_usage, run_metadata
    from pgcite.evaluate._fit_abstention import fit_abstention, render_fit

# What `pgcite eval` needs beside the harness: imported on first use, since they talk to the
# database (the harness itself does not)
_lazy = lazy_exports(__name__, {
    "answer_golden": "._answers", "collection_passages": "._answers",
    "summarize_by_kind": "._answers", "collection_searcher": "._collection",
    "index_usage": "._collection", "run_metadata": "._collection",
    "fit_abstention": "._fit_abstention", "render_fit": "._fit_abstention",
})

__all__ = [
    "DEFAULT_BUDGETS",
    "GOALS",
    "HOUSE_BUDGETS",
    "Budget",
    "BudgetResult",
    "ConfigResult",
    "EvalResult",
    "GoldenQuery",
    "GoldenSet",
    "LatencySummary",
    "PassRates",
    "QueryRow",
    "QueryScores",
    "QuerySafety",
    "RankedHit",
    "Run",
    "Safety",
    "SafetyCounts",
    "ScoredHit",
    "SearchOutcome",
    "Searcher",
    "Threshold",
    "abstains",
    "answer_golden",
    "calibrate_threshold",
    "check_budgets",
    "check_query",
    "collapse_to_documents",
    "collection_passages",
    "collection_searcher",
    "compare_results",
    "evaluate",
    "fit_abstention",
    "fixed_threshold",
    "index_usage",
    "load_golden",
    "load_result",
    "metric_names",
    "read_trec_run",
    "render_fit",
    "render_markdown",
    "report_tables",
    "run_metadata",
    "save_runs",
    "score_external_run",
    "score_run",
    "summarize_by_kind",
    "summarize_latencies",
    "summary_json",
    "write_reports",
    "write_summary",
    "write_trec_run",
]


def __getattr__(name: str) -> object:
    # pgcite.evaluate.Hit was a second public Hit beside pgcite.Hit: renamed, kept for a release
    if name == "Hit":
        warnings.warn("pgcite.evaluate.Hit is deprecated: use pgcite.evaluate.ScoredHit "
                      "(pgcite.Hit is the hit a search returns)", DeprecationWarning, stacklevel=2)
        return ScoredHit
    return _lazy(name)
