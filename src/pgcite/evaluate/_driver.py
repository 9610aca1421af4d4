"""The evaluation driver: run searchers over a golden set and measure everything at once.

It knows nothing about the database: a *searcher* is any callable from a query to a
:class:`SearchOutcome`. Per configuration it

1. calls the searcher once per query, timing the call (the ``total`` stage unless the searcher
   reports its own);
2. collapses the chunk hits to documents (best chunk) and builds the run ``query -> [(doc, score)]``;
3. scores the run with ranx (:func:`score_run`);
4. picks the abstention threshold (given, or calibrated on this configuration's confidences);
5. computes pass rates, safety counts over all hits, and latency percentiles and budgets.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pgcite._progress import progress_bar
from pgcite.evaluate._abstain import (
    Threshold,
    abstains,
    calibrate_threshold,
    effective_confidence,
    fixed_threshold,
)
from pgcite.evaluate._golden import GoldenQuery, GoldenSet
from pgcite.evaluate._latency import DEFAULT_BUDGETS, Budget, check_budgets, summarize_latencies
from pgcite.evaluate._metrics import QueryScores, metric_names, score_run
from pgcite.evaluate._result import (
    PASS_RATE,
    PASS_RATE_ABSENT,
    PASS_RATE_ANSWERABLE,
    ConfigResult,
    EvalResult,
    GoldenInfo,
    PassRates,
    QueryRow,
)
from pgcite.evaluate._runs import RankedHit, Run, collapse_to_documents, read_trec_run
from pgcite.evaluate._safety import check_query, summarize_safety

TOTAL_STAGE = "total"


@dataclass(frozen=True)
class SearchOutcome:
    """What a searcher returns for one query.

    ``hits`` are chunks in rank order (all of them: safety counts look past the top k);
    ``confidence`` drives abstention (None: never abstain unless there are no hits);
    ``timings_ms`` are per-stage latencies in milliseconds.
    """

    hits: Sequence[RankedHit]
    confidence: float | None = None
    timings_ms: Mapping[str, float] = field(default_factory=dict)


Searcher = Callable[[GoldenQuery], SearchOutcome]


@dataclass
class _Collected:
    """One configuration's raw outcomes, before scoring."""

    outcomes: dict[str, SearchOutcome] = field(default_factory=dict)
    timings: dict[str, dict[str, float]] = field(default_factory=dict)
    run: Run = field(default_factory=dict)


def evaluate(
    golden: GoldenSet,
    configs: Mapping[str, Searcher],
    *,
    k: int = 10,
    threshold: float | None = None,
    budgets: Sequence[Budget] = DEFAULT_BUDGETS,
    progress: bool = True,
    metadata: Mapping[str, Any] | None = None,
) -> EvalResult:
    """Run every configuration over every query and measure it (see module doc)."""
    if not configs:
        raise ValueError("no configurations to evaluate")
    with progress_bar(progress) as bar:
        collected: dict[str, _Collected] = {}
        for name, searcher in configs.items():
            task = bar.add_task(name, total=len(golden.queries))
            collected[name] = _collect(golden, searcher, partial(bar.advance, task))
    results = {
        name: _config_result(name, golden, c, k=k, threshold=threshold, budgets=budgets)
        for name, c in collected.items()
    }
    notes = []
    if threshold is None:
        notes.append(
            "Abstention thresholds were calibrated on these same queries, so absent-query pass "
            "rates are optimistic; pass a fixed threshold for an unbiased figure."
        )
    return _result(golden, results, k=k, source="searchers", metadata=metadata, notes=notes)


def score_external_run(
    golden: GoldenSet,
    run_path: Path,
    *,
    k: int = 10,
    metadata: Mapping[str, Any] | None = None,
) -> EvalResult:
    """Score a TREC run file: IR metrics only (the file has no confidences, dates or timings)."""
    run = read_trec_run(run_path)
    scores = score_run(golden, run, k=k)
    rows = [_query_row(q, run.get(q.id, []), scores, k=k) for q in golden.queries]
    name = Path(run_path).stem
    config = ConfigResult(
        name=name,
        overall=dict(scores.overall),
        by_kind={kind: dict(m) for kind, m in scores.by_kind.items()},
        scored_queries=len(scores.per_query),
        unscored_queries=scores.unscored,
        queries=rows,
        run={q.id: run.get(q.id, []) for q in golden.queries},
    )
    notes = [
        f"Scored from the run file {run_path}: IR metrics only. A run file carries no "
        "confidences, dates or timings, so there is no pass rate, abstention, safety count or "
        "latency; absent queries are counted but not scored."
    ]
    return _result(golden, {name: config}, k=k, source="run-file", metadata=metadata, notes=notes)


# --- collecting ---------------------------------------------------------------------------------


def _collect(golden: GoldenSet, searcher: Searcher, advance: Callable[[], None]) -> _Collected:
    collected = _Collected()
    for query in golden.queries:
        start = time.perf_counter()
        outcome = searcher(query)
        wall_ms = (time.perf_counter() - start) * 1000.0
        timings = dict(outcome.timings_ms)
        timings.setdefault(TOTAL_STAGE, wall_ms)  # the searcher's own figure wins
        collected.outcomes[query.id] = outcome
        collected.timings[query.id] = timings
        documents = collapse_to_documents(outcome.hits)
        collected.run[query.id] = [(h.document_id, float(h.score)) for h in documents]
        advance()
    return collected


# --- scoring one configuration ------------------------------------------------------------------


def _config_result(
    name: str,
    golden: GoldenSet,
    collected: _Collected,
    *,
    k: int,
    threshold: float | None,
    budgets: Sequence[Budget],
) -> ConfigResult:
    scores = score_run(golden, collected.run, k=k)
    chosen = _threshold(golden, collected.outcomes, threshold)
    rows = [
        _query_row(
            q,
            collected.run[q.id],
            scores,
            k=k,
            outcome=collected.outcomes[q.id],
            threshold=chosen.value,
            timings=collected.timings[q.id],
        )
        for q in golden.queries
    ]
    rates = _pass_rates(rows)
    samples = _samples(rows)
    latency = summarize_latencies(samples)
    return ConfigResult(
        name=name,
        overall=_with_pass_rates(scores.overall, rates),
        by_kind=_by_kind(golden, scores, rates),
        scored_queries=len(scores.per_query),
        unscored_queries=scores.unscored,
        threshold=chosen,
        pass_rates=rates,
        safety=summarize_safety((r.kind, r.safety) for r in rows if r.safety is not None),
        latency=latency,
        latency_samples_ms=samples,
        budgets=check_budgets(latency, budgets),
        queries=rows,
        run=collected.run,
    )


def _threshold(
    golden: GoldenSet, outcomes: Mapping[str, SearchOutcome], given: float | None
) -> Threshold:
    answerable: list[float] = []
    absent: list[float] = []
    for query in golden.queries:
        outcome = outcomes[query.id]
        confidence = effective_confidence(outcome.confidence, bool(outcome.hits))
        if query.answerable:
            answerable.append(confidence)
        elif query.kind == "absent":
            absent.append(confidence)
    if given is not None:
        return fixed_threshold(given, answerable, absent)
    return calibrate_threshold(answerable, absent)


def _query_row(
    query: GoldenQuery,
    ranking: list[tuple[str, float]],
    scores: QueryScores,
    *,
    k: int,
    outcome: SearchOutcome | None = None,
    threshold: float | None = None,
    timings: Mapping[str, float] | None = None,
) -> QueryRow:
    docs = [doc for doc, _ in ranking]
    relevant = query.relevant_ids
    first = next((i for i, doc in enumerate(docs, start=1) if doc in relevant), None)
    row = QueryRow(
        id=query.id,
        kind=query.kind,
        answerable=query.answerable,
        n_hits=len(outcome.hits) if outcome is not None else len(docs),
        n_documents=len(docs),
        first_relevant_rank=first,
        metrics=dict(scores.per_query.get(query.id, {})),
    )
    if outcome is None or threshold is None:
        return row  # a run file: nothing known about abstention, safety or time
    abstained = abstains(outcome.confidence, bool(outcome.hits), threshold)
    return row.model_copy(
        update={
            "confidence": outcome.confidence,
            "abstained": abstained,
            "passed": _passed(query, abstained, first, k),
            "safety": check_query(query, outcome.hits),
            "timings_ms": dict(timings or {}),
        }
    )


def _passed(query: GoldenQuery, abstained: bool, first_relevant: int | None, k: int) -> bool | None:
    if query.answerable:
        # Abstaining on an answerable query shows the user nothing, whatever was retrieved.
        return not abstained and first_relevant is not None and first_relevant <= k
    if query.kind == "absent":
        return abstained
    return None  # judged, but nothing relevant and not marked absent: no right behaviour known


def _pass_rates(rows: Sequence[QueryRow]) -> PassRates:
    flags = [(r.kind, r.answerable, r.passed) for r in rows if r.passed is not None]
    kinds = dict.fromkeys(kind for kind, _, _ in flags)
    return PassRates(
        overall=_share([p for _, _, p in flags]) or 0.0,
        answerable=_share([p for _, a, p in flags if a]),
        absent=_share([p for kind, _, p in flags if kind == "absent"]),
        by_kind={k: _share([p for kind, _, p in flags if kind == k]) or 0.0 for k in kinds},
        passed=sum(p for _, _, p in flags),
        total=len(flags),
    )


def _share(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def _with_pass_rates(metrics: Mapping[str, float], rates: PassRates) -> dict[str, float]:
    figures = dict(metrics)
    figures[PASS_RATE] = rates.overall
    if rates.answerable is not None:
        figures[PASS_RATE_ANSWERABLE] = rates.answerable
    if rates.absent is not None:
        figures[PASS_RATE_ABSENT] = rates.absent
    return figures


def _by_kind(
    golden: GoldenSet, scores: QueryScores, rates: PassRates
) -> dict[str, dict[str, float]]:
    by_kind: dict[str, dict[str, float]] = {}
    for kind in golden.kinds():
        figures = dict(scores.by_kind.get(kind, {}))
        if kind in rates.by_kind:
            figures[PASS_RATE] = rates.by_kind[kind]
        if figures:
            by_kind[kind] = figures
    return by_kind


def _samples(rows: Sequence[QueryRow]) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {}
    for row in rows:
        for stage, ms in row.timings_ms.items():
            samples.setdefault(stage, []).append(float(ms))
    return samples


def _result(
    golden: GoldenSet,
    configurations: dict[str, ConfigResult],
    *,
    k: int,
    source: str,
    metadata: Mapping[str, Any] | None,
    notes: list[str],
) -> EvalResult:
    return EvalResult.model_validate(
        {
            "created_at": dt.datetime.now(dt.UTC),
            "source": source,
            "golden": GoldenInfo.of(golden),
            "k": k,
            "metrics": metric_names(k),
            "metadata": dict(metadata or {}),
            "notes": notes,
            "configurations": configurations,
        }
    )
