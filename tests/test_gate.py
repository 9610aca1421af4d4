"""The activation gate's comparisons, without a database."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

import pgcite
from pgcite._gate_settings import DEFAULT_FLOORS, GateSettings
from pgcite.lifecycle._gate import (
    EvalSummary,
    GateRefused,
    apply_floors,
    floor_checks,
    forced_skips,
    judge,
    parse_floor,
    regression_checks,
)

GOOD = {"pass_rate": 0.95, "precision@10": 0.75, "recall@10": 0.9, "mrr@10": 0.8,
        "ndcg@10": 0.7}


def summary(figures: dict[str, float], violations: int = 0, sha: str = "abc") -> EvalSummary:
    return EvalSummary(
        golden="g", golden_path="g.jsonl", golden_sha256=sha, queries=10, mode="hybrid", k=10,
        depth=100, threshold=None, figures=figures, cutoff_violations=violations,
        evaluated_at=dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
    )


def test_house_defaults() -> None:
    gate = GateSettings()
    assert gate.floors == {"pass_rate": 0.90, "precision@10": 0.70, "recall@10": 0.85,
                           "mrr@10": 0.65}
    assert gate.tolerance == 0.02 and gate.mode == "hybrid" and gate.k == 10
    assert DEFAULT_FLOORS is not gate.floors  # each collection gets its own copy


def test_good_candidate_without_baseline_passes() -> None:
    verdict = judge(summary(GOOD), None, GateSettings(), candidate_id=1)
    assert verdict.passed and verdict.failures == []
    assert {c.kind for c in verdict.checks} == {"hard", "floor"}


def test_failing_floor_names_the_figure() -> None:
    verdict = judge(summary({**GOOD, "recall@10": 0.41}), None, GateSettings(), candidate_id=2)
    assert not verdict.passed
    assert verdict.failure_text() == "recall@10 0.41 < floor 0.85"


def test_close_values_print_with_enough_digits() -> None:
    [check] = floor_checks({"recall@10": 0.8496}, {"recall@10": 0.85})
    assert not check.passed and check.describe() == "recall@10 0.8496 < floor 0.8500"


def test_exactly_at_the_floor_passes() -> None:
    assert all(c.passed for c in floor_checks({"mrr@10": 0.65}, {"mrr@10": 0.65}))


def test_missing_figure_fails_and_says_so() -> None:
    [check] = floor_checks({}, {"ndcg@5": 0.5})
    assert not check.passed and "not measured" in check.describe()


def test_regression_beyond_tolerance_fails() -> None:
    base = summary(GOOD)
    worse = summary({**GOOD, "ndcg@10": 0.69, "mrr@10": 0.70})
    verdict = judge(worse, base, GateSettings(), candidate_id=3, baseline_id=1)
    failed = {c.metric: c for c in verdict.failures}
    assert set(failed) == {"mrr@10"}  # ndcg fell 0.01: within the tolerance
    assert failed["mrr@10"].describe() == "mrr@10 0.70 < 0.78 (active 0.80 - tolerance)"


def test_regression_within_tolerance_passes() -> None:
    base = summary(GOOD)
    slightly = summary({**GOOD, "recall@10": GOOD["recall@10"] - 0.02})
    assert judge(slightly, base, GateSettings()).passed


def test_regression_only_on_metrics_the_baseline_has() -> None:
    checks = regression_checks({"recall@10": 0.1}, {}, ["recall@10"], 0.02)
    assert checks == []


def test_cutoff_violation_is_hard_and_force_cannot_skip_it() -> None:
    verdict = judge(summary(GOOD, violations=3), None, GateSettings(), candidate_id=4)
    assert [c.describe() for c in verdict.hard_failures] == [
        "cutoff_violations 3 > 0 (hard floor)"]
    with pytest.raises(GateRefused, match="even with --force"):
        forced_skips(verdict)


def test_force_lists_what_it_skips() -> None:
    verdict = judge(summary({**GOOD, "pass_rate": 0.5}), None, GateSettings(), candidate_id=5)
    assert forced_skips(verdict) == ["pass_rate 0.50 < floor 0.90"]


@pytest.mark.parametrize("text,expected", [
    ("recall@10=0.85", ("recall@10", 0.85)),
    (" pass_rate = 0.9", ("pass_rate", 0.9)),
    ("mrr@5=none", ("mrr@5", None)),
    ("pass_rate_absent=1", ("pass_rate_absent", 1.0)),
])
def test_parse_floor(text: str, expected: tuple[str, float | None]) -> None:
    assert parse_floor(text) == expected


@pytest.mark.parametrize("text", ["recall@10", "recall@10=x", "recall@10=1.5", "bleu=0.3",
                                  "recall@0=0.5", "=0.3"])
def test_bad_floors_are_refused(text: str) -> None:
    with pytest.raises(pgcite.ConfigError):
        parse_floor(text)


def test_apply_floors_sets_and_removes() -> None:
    gate = apply_floors(GateSettings(), ["recall@10=0.5", "mrr@10=none", "ndcg@10=0.3"])
    assert gate.floors == {"pass_rate": 0.9, "precision@10": 0.7, "recall@10": 0.5,
                           "ndcg@10": 0.3}


def test_settings_refuse_bad_floors() -> None:
    with pytest.raises(ValidationError):
        GateSettings(floors={"recall@10": 2.0})
    with pytest.raises(pgcite.ConfigError):
        GateSettings(floors={"bleu": 0.5})


def test_stored_evaluation_is_reused_only_for_the_same_setup() -> None:
    s = summary(GOOD, sha="abc")
    assert s.matches("abc", GateSettings())
    assert not s.matches("def", GateSettings())
    assert not s.matches("abc", GateSettings(mode="keyword"))
    assert not s.matches("abc", GateSettings(threshold=0.5))


@given(st.dictionaries(st.sampled_from(list(GOOD)), st.floats(0, 1), min_size=1),
       st.floats(0, 0.2))
def test_a_candidate_never_regresses_against_itself(figures: dict[str, float],
                                                    tol: float) -> None:
    gate = GateSettings(floors={}, tolerance=tol)
    assert judge(summary(figures), summary(figures), gate).passed


@given(st.floats(0, 1), st.floats(0, 1))
def test_floor_check_agrees_with_comparison(value: float, floor: float) -> None:
    [check] = floor_checks({"recall@10": value}, {"recall@10": floor})
    assert check.passed == (value >= floor - 1e-9)
