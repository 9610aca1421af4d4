"""Latency: percentiles per stage, and budgets to hold them to.

Samples are milliseconds, one per query per stage. Stage names are free-form; the ones the
budgets below know are ``vector``, ``keyword``, ``database`` (the whole hybrid query in
PostgreSQL) and ``total`` (end to end, embedding included).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from pgcite.evaluate._base import Frozen

Percentile = Literal[50, 95, 99]


class LatencySummary(Frozen):
    """Percentiles (numpy's default linear interpolation) and mean, in milliseconds."""

    p50: float
    p95: float
    p99: float
    mean: float
    n: int

    def at(self, percentile: Percentile) -> float:
        """The summary's value at ``percentile``."""
        return {50: self.p50, 95: self.p95, 99: self.p99}[percentile]


@dataclass(frozen=True)
class Budget:
    """``stage``'s ``percentile`` must stay under ``limit_ms`` (or at it, when ``inclusive``)."""

    stage: str
    limit_ms: float
    percentile: Percentile = 95
    inclusive: bool = False
    label: str = "budget"  # "house budget" or "goal", printed with the result


class BudgetResult(Frozen):
    """One budget checked against a summary; ``passed`` is None when the stage has no samples."""

    stage: str
    percentile: int
    limit_ms: float
    inclusive: bool
    label: str
    observed_ms: float | None
    passed: bool | None
    line: str


HOUSE_BUDGETS: tuple[Budget, ...] = (
    Budget("vector", 100.0, 95, label="house budget"),
    Budget("keyword", 50.0, 95, label="house budget"),
    Budget("database", 150.0, 95, label="house budget"),  # hybrid query
    Budget("total", 500.0, 95, label="house budget"),
)
"""The limits every deployment must meet (p95 where the house rule names no percentile)."""

GOALS: tuple[Budget, ...] = (
    Budget("database", 4.0, 50, inclusive=True, label="goal"),
    Budget("total", 100.0, 95, inclusive=True, label="goal"),
)
"""pgcite's own, tighter targets."""

DEFAULT_BUDGETS: tuple[Budget, ...] = HOUSE_BUDGETS + GOALS


def summarize_latencies(samples: Mapping[str, Sequence[float]]) -> dict[str, LatencySummary]:
    """Percentiles per stage; stages without samples are left out."""
    summary: dict[str, LatencySummary] = {}
    for stage, values in samples.items():
        if not values:
            continue
        arr = np.asarray(values, dtype=float)
        p50, p95, p99 = np.percentile(arr, [50, 95, 99])
        summary[stage] = LatencySummary(
            p50=float(p50), p95=float(p95), p99=float(p99), mean=float(arr.mean()), n=arr.size
        )
    return summary


def check_budgets(
    summary: Mapping[str, LatencySummary], budgets: Sequence[Budget] = DEFAULT_BUDGETS
) -> list[BudgetResult]:
    """Each budget as a pass/fail line; a stage that was not measured is reported, not failed."""
    return [_check(summary.get(b.stage), b) for b in budgets]


def _check(stats: LatencySummary | None, budget: Budget) -> BudgetResult:
    op = "<=" if budget.inclusive else "<"
    target = f"{budget.stage} p{budget.percentile} {op} {budget.limit_ms:g} ms ({budget.label})"
    if stats is None:
        observed, passed, line = None, None, f"SKIP  {target}: stage not measured"
    else:
        observed = stats.at(budget.percentile)
        ok = observed <= budget.limit_ms if budget.inclusive else observed < budget.limit_ms
        passed = bool(ok)
        line = f"{'PASS' if ok else 'FAIL'}  {target}: {observed:.2f} ms"
    return BudgetResult(
        stage=budget.stage,
        percentile=budget.percentile,
        limit_ms=budget.limit_ms,
        inclusive=budget.inclusive,
        label=budget.label,
        observed_ms=observed,
        passed=passed,
        line=line,
    )
