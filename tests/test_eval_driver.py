"""evaluate() with fake searchers: runs, pass rates, thresholds, safety, latency, JSON."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import pytest

from pgcite.evaluate import (
    EvalResult,
    GoldenQuery,
    GoldenSet,
    ScoredHit,
    SearchOutcome,
    evaluate,
    load_golden,
    save_runs,
    score_external_run,
    score_run,
)

FIXTURES = Path(__file__).parent / "fixtures" / "eval"
EARLY, LATE = dt.date(1663, 6, 1), dt.date(1665, 1, 1)


def _fillers(n: int) -> list[ScoredHit]:
    return [ScoredHit(f"f{i}-a", f"f{i}", 0.5 - i / 100, EARLY) for i in range(n)]


def good(query: GoldenQuery) -> SearchOutcome:
    """Passes g1, g3, g4 and both absent queries (calibrated); misses g2 at rank 11."""
    plans: dict[str, tuple[list[ScoredHit], float | None]] = {
        "g1": ([ScoredHit("d1-a", "d1", 0.9), ScoredHit("d1-b", "d1", 0.85), ScoredHit("x-a", "x", 0.8), ScoredHit("d2-a", "d2", 0.7)], 0.9),
        "g2": ([*_fillers(10), ScoredHit("d3-a", "d3", 0.01)], 0.8),
        "g3": ([*_fillers(9), ScoredHit("d4-a", "d4", 0.01)], 0.7),
        "g4": ([ScoredHit("d7-a", "d7", 0.9, EARLY), ScoredHit("d8-a", "d8", 0.8, LATE), ScoredHit("z-a", "z", 0.7)], 0.6),
        "g5": ([ScoredHit("x-a", "x", 0.2)], 0.2),
        "g6": ([], None),
    }  # fmt: skip
    hits, confidence = plans[query.id]
    return SearchOutcome(
        hits=hits, confidence=confidence, timings_ms={"database": 3.0, "embed": 1.0}
    )


def timed(query: GoldenQuery) -> SearchOutcome:
    outcome = good(query)
    return SearchOutcome(outcome.hits, outcome.confidence, {"total": 42.0})


@pytest.fixture(scope="module")
def golden() -> GoldenSet:
    return load_golden(FIXTURES / "golden.jsonl")


@pytest.fixture(scope="module")
def result(golden: GoldenSet) -> EvalResult:
    return evaluate(
        golden,
        {"good": good, "timed": timed},
        progress=False,
        metadata={"model": "m", "commit": "abc"},
    )


def test_run_is_collapsed_to_documents(result: EvalResult) -> None:
    run = result.configurations["good"].run
    assert run["g1"] == [("d1", 0.9), ("x", 0.8), ("d2", 0.7)]
    assert run["g6"] == []
    rows = {r.id: r for r in result.configurations["good"].queries}
    assert (rows["g1"].n_hits, rows["g1"].n_documents, rows["g1"].first_relevant_rank) == (4, 3, 1)
    assert rows["g2"].first_relevant_rank == 11


def test_ir_metrics_are_score_runs(golden: GoldenSet, result: EvalResult) -> None:
    config = result.configurations["good"]
    scores = score_run(golden, config.run, k=10)
    for metric in scores.metrics:
        assert config.overall[metric] == pytest.approx(scores.overall[metric])
        assert config.by_kind["fact"][metric] == pytest.approx(scores.by_kind["fact"][metric])
    assert config.scored_queries == 4 and config.unscored_queries == ["g5", "g6"]
    assert result.metrics == scores.metrics


def test_calibrated_threshold_and_pass_rates(result: EvalResult) -> None:
    config = result.configurations["good"]
    assert config.threshold is not None and config.threshold.method == "calibrated"
    assert config.threshold.value == pytest.approx(0.4)  # between absent 0.2 and answerable 0.6
    passed = {r.id: r.passed for r in config.queries}
    assert passed == {"g1": True, "g2": False, "g3": True, "g4": True, "g5": True, "g6": True}
    rates = config.pass_rates
    assert rates is not None
    assert (rates.overall, rates.answerable, rates.absent) == (5 / 6, 3 / 4, 1.0)
    assert rates.by_kind == {
        "fact": 1.0,
        "keyword": 0.0,
        "paraphrase": 1.0,
        "cutoff": 1.0,
        "absent": 1.0,
    }
    assert config.overall["pass_rate"] == 5 / 6
    assert config.by_kind["absent"] == {"pass_rate": 1.0}  # no IR metrics for absent queries


def test_fixed_threshold_is_used_as_given(golden: GoldenSet) -> None:
    result = evaluate(golden, {"good": good}, threshold=0.85, progress=False)
    config = result.configurations["good"]
    assert config.threshold is not None
    assert (config.threshold.value, config.threshold.method) == (0.85, "fixed")
    passed = {r.id: r.passed for r in config.queries}
    # Abstaining on an answerable query fails it, whatever was retrieved.
    assert passed == {"g1": True, "g2": False, "g3": False, "g4": False, "g5": True, "g6": True}
    assert not any("calibrated on these same queries" in n for n in result.notes)


def test_no_absent_queries_never_abstain(golden: GoldenSet) -> None:
    answerable = GoldenSet(name="a", path="a", sha256="0", queries=golden.queries[:4])
    result = evaluate(answerable, {"good": good}, progress=False)
    config = result.configurations["good"]
    assert config.threshold is not None and config.threshold.value == -math.inf
    assert config.pass_rates is not None and config.pass_rates.absent is None
    assert "pass_rate_absent" not in config.overall
    assert EvalResult.model_validate_json(result.model_dump_json()) == result  # -inf survives JSON


def test_safety_counts(result: EvalResult) -> None:
    safety = result.configurations["good"].safety
    assert safety is not None
    assert (safety.total.cutoff_violations, safety.total.undated_on_cutoff) == (2, 1)
    assert safety.total.must_not_hits == 1
    assert safety.by_kind["cutoff"].cutoff_violations == 2
    assert safety.by_kind["fact"].cutoff_violations == 0  # undated hits on a query without cutoff


def test_latency_total_measured_unless_reported(result: EvalResult) -> None:
    good_cfg, timed_cfg = result.configurations["good"], result.configurations["timed"]
    assert set(good_cfg.latency) == {"database", "embed", "total"}
    assert good_cfg.latency["database"].p50 == 3.0 and good_cfg.latency["total"].n == 6
    assert len(good_cfg.latency_samples_ms["total"]) == 6
    assert timed_cfg.latency_samples_ms == {"total": [42.0] * 6}  # the searcher's own figure wins
    lines = [b.line for b in good_cfg.budgets]
    assert "PASS  database p50 <= 4 ms (goal): 3.00 ms" in lines


def test_result_metadata_and_json_round_trip(result: EvalResult) -> None:
    assert result.metadata == {"model": "m", "commit": "abc"}
    assert (
        result.golden.name == "eval"
        and result.golden.queries == 6
        and result.golden.answerable == 4
    )
    assert result.golden.by_kind == {
        "fact": 1,
        "keyword": 1,
        "paraphrase": 1,
        "cutoff": 1,
        "absent": 2,
    }
    assert result.k == 10 and result.source == "searchers"
    assert result.created_at.tzinfo is not None
    assert list(result.configurations) == ["good", "timed"]
    assert EvalResult.model_validate_json(result.model_dump_json()) == result


def test_external_run_reports_ir_metrics_only(
    golden: GoldenSet, result: EvalResult, tmp_path: Path
) -> None:
    paths = save_runs(result, tmp_path)
    external = score_external_run(golden, paths["good"], k=10)
    config = external.configurations["good"]
    for metric in external.metrics:
        assert config.overall[metric] == pytest.approx(
            result.configurations["good"].overall[metric]
        )
    assert config.pass_rates is None and config.threshold is None and config.safety is None
    assert config.latency == {} and "pass_rate" not in config.overall
    assert external.source == "run-file" and "IR metrics only" in external.notes[0]
    assert {r.id: r.passed for r in config.queries} == dict.fromkeys([q.id for q in golden.queries])


def test_no_configurations_is_an_error(golden: GoldenSet) -> None:
    with pytest.raises(ValueError, match="no configurations"):
        evaluate(golden, {}, progress=False)


def test_query_judged_only_non_relevant_has_no_pass_or_fail() -> None:
    beir = load_golden(FIXTURES / "beir")  # q1, q2 relevant; q4 judged with grade 0 only

    def search(query: GoldenQuery) -> SearchOutcome:
        return SearchOutcome(hits=[ScoredHit("d1-a", "d1", 1.0)], confidence=0.5)

    config = evaluate(beir, {"s": search}, progress=False).configurations["s"]
    assert {r.id: r.passed for r in config.queries} == {"q1": True, "q2": False, "q4": None}
    assert config.pass_rates is not None
    assert (config.pass_rates.total, config.pass_rates.overall) == (2, 0.5)
    assert config.threshold is not None and config.threshold.method == "never-abstain"
    assert config.unscored_queries == ["q4"]
