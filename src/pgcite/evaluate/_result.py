"""The evaluation result: everything a report, a comparison or a later re-scoring needs.

One :class:`EvalResult` holds every configuration side by side. It is plain pydantic, so
``results.json`` is ``result.model_dump_json()`` and :func:`load_result` reads it back.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from pgcite._errors import ConfigError
from pgcite.evaluate._abstain import Threshold
from pgcite.evaluate._base import Frozen
from pgcite.evaluate._golden import GoldenSet
from pgcite.evaluate._latency import BudgetResult, LatencySummary
from pgcite.evaluate._safety import QuerySafety, Safety

SCHEMA_VERSION = 1

PASS_RATE = "pass_rate"
PASS_RATE_ANSWERABLE = "pass_rate_answerable"
PASS_RATE_ABSENT = "pass_rate_absent"


class GoldenInfo(Frozen):
    """Which judgments the result was computed against."""

    name: str
    path: str
    sha256: str
    queries: int
    by_kind: dict[str, int]
    answerable: int

    @classmethod
    def of(cls, golden: GoldenSet) -> GoldenInfo:
        """Describe ``golden``."""
        by_kind: dict[str, int] = {}
        for q in golden.queries:
            by_kind[q.kind] = by_kind.get(q.kind, 0) + 1
        return cls(
            name=golden.name,
            path=golden.path,
            sha256=golden.sha256,
            queries=len(golden.queries),
            by_kind=by_kind,
            answerable=sum(q.answerable for q in golden.queries),
        )


class PassRates(Frozen):
    """Share of queries that passed (answerable: a relevant document in the top k and no
    abstention; absent: abstained). A query that is neither (judged, but only grade 0) has no
    right behaviour and is left out of every rate; ``total`` counts the queries that have one."""

    overall: float
    answerable: float | None
    absent: float | None
    by_kind: dict[str, float]
    passed: int
    total: int


class QueryRow(Frozen):
    """One query under one configuration."""

    id: str
    kind: str
    answerable: bool
    n_hits: int  # chunks returned
    n_documents: int  # after collapsing chunks to documents
    first_relevant_rank: int | None  # 1-based, among documents; None if none was returned
    metrics: dict[str, float]  # ranx, empty for queries without judgments
    confidence: float | None = None
    abstained: bool | None = None  # None: not known (run file)
    passed: bool | None = None
    safety: QuerySafety | None = None
    timings_ms: dict[str, float] = Field(default_factory=dict)


class ConfigResult(Frozen):
    """One configuration's figures, details and raw material."""

    name: str
    overall: dict[str, float]  # ranx means over scored queries, plus the pass rates
    by_kind: dict[str, dict[str, float]]  # the same per kind (IR metrics only where judged)
    scored_queries: int
    unscored_queries: list[str]
    threshold: Threshold | None = None
    pass_rates: PassRates | None = None
    safety: Safety | None = None
    latency: dict[str, LatencySummary] = Field(default_factory=dict)
    latency_samples_ms: dict[str, list[float]] = Field(default_factory=dict)
    budgets: list[BudgetResult] = Field(default_factory=list)
    queries: list[QueryRow] = Field(default_factory=list)  # empty in a summary.json
    # query -> documents in rank order, every one returned. Kept in memory for save_runs, left out
    # of results.json by default (it is most of the size; the TREC files hold it).
    run: dict[str, list[tuple[str, float]]] = Field(default_factory=dict)


class EvalResult(Frozen):
    """Configurations side by side, with what they were evaluated on and how."""

    schema_version: int = SCHEMA_VERSION
    created_at: dt.datetime
    source: Literal["searchers", "run-file"]
    golden: GoldenInfo
    k: int
    metrics: list[str]  # the ranx metric names, in table order
    metadata: dict[str, Any] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    configurations: dict[str, ConfigResult]

    def figure_names(self) -> list[str]:
        """Every headline figure any configuration has, in table order."""
        names = list(self.metrics)
        for config in self.configurations.values():
            names += [n for n in config.overall if n not in names]
        return names

    def kinds(self) -> list[str]:
        """The golden set's kinds, in order."""
        return list(self.golden.by_kind)


def load_result(path: Path) -> EvalResult:
    """Read a ``results.json`` written by :func:`pgcite.evaluate.write_reports` (or its folder)."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    try:
        return EvalResult.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such results file") from None
    except ValidationError as exc:
        raise ConfigError(
            f"{path}: not a pgcite results.json ({exc.error_count()} errors)"
        ) from None
