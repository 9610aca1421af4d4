"""Safety counts (cutoff, must_not) and latency summaries and budgets."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from pgcite.evaluate import (
    Budget,
    GoldenQuery,
    ScoredHit,
    check_budgets,
    check_query,
    summarize_latencies,
)
from pgcite.evaluate._safety import summarize_safety

CUTOFF = GoldenQuery(
    id="c",
    text="t",
    kind="cutoff",
    relevant={"d1": 1},
    cutoff=dt.date(1663, 12, 31),
    must_not=["late"],
)


def test_cutoff_violations_count_late_and_undated_hits() -> None:
    hits = [
        ScoredHit("d1-a", "d1", 0.9, dt.date(1663, 12, 31)),  # on the cutoff: allowed
        ScoredHit("d2-a", "d2", 0.8, dt.date(1664, 1, 1)),  # one day late
        ScoredHit("d3-a", "d3", 0.7, None),  # undated: cannot be shown to respect the cutoff
        ScoredHit("d4-a", "d4", 0.6, dt.date(1660, 1, 1)),
    ]
    counts = check_query(CUTOFF, hits)
    assert (counts.cutoff_violations, counts.undated_on_cutoff) == (2, 1)


def test_no_cutoff_means_no_violations_even_undated() -> None:
    query = GoldenQuery(id="f", text="t", kind="fact", relevant={"d1": 1})
    assert check_query(
        query, [ScoredHit("x", "x", 1.0, None), ScoredHit("y", "y", 1.0, dt.date(1669, 1, 1))]
    ) == (check_query(query, []))


def test_must_not_counts_every_chunk_at_any_depth() -> None:
    filler = [ScoredHit(f"f{i}", f"f{i}", 1.0, dt.date(1660, 1, 1)) for i in range(50)]
    late = [
        ScoredHit("late-a", "late", 0.1, dt.date(1660, 1, 1)),
        ScoredHit("late-b", "late", 0.1, dt.date(1660, 1, 2)),
    ]
    counts = check_query(CUTOFF, filler + late)  # far beyond any top k
    assert counts.must_not_hits == 2
    assert counts.cutoff_violations == 0


def test_safety_summary_by_kind() -> None:
    rows = [
        ("cutoff", check_query(CUTOFF, [ScoredHit("a", "late", 1.0, dt.date(1665, 1, 1))])),
        ("cutoff", check_query(CUTOFF, [])),
        ("fact", check_query(CUTOFF, [ScoredHit("b", "x", 1.0, None), ScoredHit("c", "y", 1.0, None)])),
    ]
    safety = summarize_safety(rows)
    assert safety.total.cutoff_violations == 3
    assert safety.total.must_not_hits == 1
    assert safety.total.queries_with_cutoff_violations == 2
    assert safety.total.queries_with_must_not_hits == 1
    assert safety.by_kind["cutoff"].cutoff_violations == 1
    assert safety.by_kind["fact"].undated_on_cutoff == 2


def test_latency_percentiles_match_numpy() -> None:
    samples = {"database": [float(x) for x in range(1, 101)], "embed": [5.0], "idle": []}
    summary = summarize_latencies(samples)
    assert set(summary) == {"database", "embed"}  # no samples, no row
    db = summary["database"]
    expected = np.percentile(samples["database"], [50, 95, 99])
    assert (db.p50, db.p95, db.p99) == pytest.approx(tuple(expected))
    assert (db.mean, db.n) == (50.5, 100)
    assert summary["embed"].p99 == 5.0


def test_budgets_pass_fail_skip_and_inclusive_edges() -> None:
    summary = summarize_latencies({"database": [4.0, 4.0, 4.0], "vector": [100.0] * 3})
    results = check_budgets(
        summary,
        [
            Budget("database", 4.0, 50, inclusive=True, label="goal"),  # at the limit: passes
            Budget("vector", 100.0, 95, label="house budget"),  # strict: 100 is not < 100
            Budget("keyword", 50.0, 95),
        ],
    )
    assert [r.passed for r in results] == [True, False, None]
    assert results[0].line == "PASS  database p50 <= 4 ms (goal): 4.00 ms"
    assert results[1].line.startswith("FAIL  vector p95 < 100 ms (house budget)")
    assert results[2].line.startswith("SKIP  keyword")


def test_default_budgets_are_the_house_rules_and_goals() -> None:
    summary = summarize_latencies({"total": [90.0] * 20, "database": [3.0] * 20})
    lines = [r.line for r in check_budgets(summary)]
    assert "PASS  total p95 < 500 ms (house budget): 90.00 ms" in lines
    assert "PASS  total p95 <= 100 ms (goal): 90.00 ms" in lines
    assert "PASS  database p50 <= 4 ms (goal): 3.00 ms" in lines
    assert "PASS  database p95 < 150 ms (house budget): 3.00 ms" in lines
    assert sum(line.startswith("SKIP") for line in lines) == 2  # vector, keyword not measured
