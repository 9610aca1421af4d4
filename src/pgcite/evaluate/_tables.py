"""The report's tables, built once and rendered as Markdown or HTML (same numbers in both)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pgcite.evaluate._result import PASS_RATE, ConfigResult, EvalResult


@dataclass(frozen=True)
class Table:
    """A titled table of preformatted cells; ``best`` marks cells to emphasise (row, column)."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    note: str = ""
    best: set[tuple[int, int]] = field(default_factory=set)


def fmt(value: float | int | None, digits: int = 3) -> str:
    """A number for a table: fixed decimals, ``-inf``/``inf`` spelled out, ``-`` when missing."""
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}f}"


def report_tables(result: EvalResult) -> list[Table]:
    """Every table of the report, in order; sections with nothing to show are left out."""
    tables = [_overall(result), *_by_kind(result)]
    configs = list(result.configurations.values())
    if any(c.safety is not None for c in configs):
        tables += [_safety(configs), _safety_by_kind(result, configs)]
    if any(c.threshold is not None for c in configs):
        tables.append(_thresholds(configs))
    if any(c.latency for c in configs):
        tables.append(_latency(configs))
    if any(c.budgets for c in configs):
        tables.append(_budgets(configs))
    return tables


def _overall(result: EvalResult) -> Table:
    names = list(result.configurations)
    rows: list[list[str]] = []
    best: set[tuple[int, int]] = set()
    for i, figure in enumerate(result.figure_names()):
        values = [c.overall.get(figure) for c in result.configurations.values()]
        rows.append([figure, *(fmt(v) for v in values)])
        best |= {(i, j + 1) for j in _argmax(values)}
    scored = [str(c.scored_queries) for c in result.configurations.values()]
    rows.append(["queries scored by ranx", *scored])
    return Table(
        "Metrics by configuration",
        ["metric", *names],
        rows,
        note="Means over queries with judgments (ranx); pass rates over all queries.",
        best=best if len(names) > 1 else set(),
    )


def _by_kind(result: EvalResult) -> list[Table]:
    k = result.k
    tables = []
    for figure in [f"ndcg@{k}", f"recall@{k}", f"mrr@{k}", PASS_RATE]:
        kinds = [
            kind
            for kind in result.kinds()
            if any(figure in c.by_kind.get(kind, {}) for c in result.configurations.values())
        ]
        if not kinds:
            continue
        rows = [
            [
                kind,
                str(result.golden.by_kind[kind]),
                *(fmt(c.by_kind.get(kind, {}).get(figure)) for c in result.configurations.values()),
            ]
            for kind in kinds
        ]
        tables.append(Table(f"{figure} by query kind", ["kind", "n", *result.configurations], rows))
    return tables


def _safety(configs: list[ConfigResult]) -> Table:
    rows = []
    for c in configs:
        if c.safety is None:
            continue
        t = c.safety.total
        rows.append(
            [
                c.name,
                str(t.cutoff_violations),
                str(t.undated_on_cutoff),
                str(t.queries_with_cutoff_violations),
                str(t.must_not_hits),
                str(t.queries_with_must_not_hits),
            ]
        )
    headers = [
        "configuration",
        "cutoff violations",
        "of which undated",
        "queries affected",
        "must_not hits",
        "queries affected",
    ]
    note = "Counted over every hit returned (chunks), not only the top k. Zero is the only pass."
    return Table("Safety", headers, rows, note=note)


def _safety_by_kind(result: EvalResult, configs: list[ConfigResult]) -> Table:
    rows = []
    for c in configs:
        if c.safety is None:
            continue
        for kind in result.kinds():
            counts = c.safety.by_kind.get(kind)
            if counts is not None:
                rows.append(
                    [c.name, kind, str(counts.cutoff_violations), str(counts.must_not_hits)]
                )
    headers = ["configuration", "kind", "cutoff violations", "must_not hits"]
    return Table("Safety by query kind", headers, rows)


def _thresholds(configs: list[ConfigResult]) -> Table:
    rows = []
    for c in configs:
        t = c.threshold
        if t is None:
            continue
        rows.append(
            [
                c.name,
                fmt(t.value, 4),
                t.method,
                fmt(t.answer_rate),
                fmt(t.abstain_rate),
                fmt(t.balanced_accuracy),
                t.reason,
            ]
        )
    headers = [
        "configuration",
        "threshold",
        "method",
        "answer rate (answerable)",
        "abstain rate (absent)",
        "balanced accuracy",
        "how chosen",
    ]
    note = "A query abstains when it returns nothing or its confidence is below the threshold."
    return Table("Abstention thresholds", headers, rows, note=note)


def _latency(configs: list[ConfigResult]) -> Table:
    rows = [
        [c.name, stage, str(s.n), fmt(s.p50, 2), fmt(s.p95, 2), fmt(s.p99, 2), fmt(s.mean, 2)]
        for c in configs
        for stage, s in c.latency.items()
    ]
    headers = ["configuration", "stage", "n", "p50 ms", "p95 ms", "p99 ms", "mean ms"]
    return Table("Latency", headers, rows)


def _budgets(configs: list[ConfigResult]) -> Table:
    rows = [[c.name, b.line] for c in configs for b in c.budgets]
    return Table("Latency budgets", ["configuration", "result"], rows)


def _argmax(values: list[float | None]) -> list[int]:
    present = [v for v in values if v is not None]
    if not present:
        return []
    top = max(present)
    return [i for i, v in enumerate(values) if v == top]
