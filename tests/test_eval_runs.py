"""Chunk-to-document collapsing and TREC run files."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from ranx import Qrels
from ranx import Run as RanxRun
from ranx import evaluate as ranx_evaluate

from pgcite._errors import ConfigError
from pgcite.evaluate import (
    Run,
    ScoredHit,
    collapse_to_documents,
    load_golden,
    read_trec_run,
    score_run,
    write_trec_run,
)
from pgcite.evaluate._metrics import to_ranx_qrels

FIXTURES = Path(__file__).parent / "fixtures" / "eval"


def test_collapse_keeps_best_chunk_per_document_in_order() -> None:
    hits = [
        ScoredHit("a-2", "A", 0.9),
        ScoredHit("b-1", "B", 0.8, dt.date(1660, 1, 1)),
        ScoredHit("a-1", "A", 0.7),
        ScoredHit("c-1", "C", 0.6),
        ScoredHit("b-3", "B", 0.5),
    ]
    kept = collapse_to_documents(hits)
    assert [h.id for h in kept] == ["a-2", "b-1", "c-1"]
    assert kept[1] is hits[1]
    assert collapse_to_documents([]) == []


def test_round_trip_keeps_decreasing_scores_exactly(tmp_path: Path) -> None:
    run: Run = {"q1": [("d1", 0.91), ("d2", 0.5 + 1e-12), ("d3", 0.5)], "q2": [("d9", -1.25)]}
    path = tmp_path / "run.trec"
    write_trec_run(path, run, tag="hybrid")
    assert path.read_text().splitlines()[0] == "q1 Q0 d1 1 0.91 hybrid"
    assert read_trec_run(path) == run


def test_round_trip_preserves_order_when_scores_tie_or_rise(tmp_path: Path) -> None:
    # Rank order is the truth; these scores would reorder the list in any TREC tool.
    run: Run = {"q1": [("z", 0.2), ("a", 0.2), ("m", 0.9)], "q2": [("x", 1.0), ("y", 1.0)]}
    path = tmp_path / "run.trec"
    write_trec_run(path, run, tag="t")
    back = read_trec_run(path)
    assert {q: [d for d, _ in r] for q, r in back.items()} == {
        "q1": ["z", "a", "m"],
        "q2": ["x", "y"],
    }
    assert back["q1"] == [("z", 3.0), ("a", 2.0), ("m", 1.0)]  # rank-derived, documented


def test_ranx_scoring_the_written_file_matches_score_run(tmp_path: Path) -> None:
    golden = load_golden(FIXTURES / "golden.jsonl")
    run: Run = {
        "g1": [("d9", 0.5), ("d2", 0.5), ("d1", 0.7)],  # ties and a rise: rank order rules
        "g2": [("d3", 3.0)],
        "g3": [("d6", 0.9), ("x", 0.8), ("d4", 0.1)],
        "g5": [("d1", 0.3)],
    }
    path = tmp_path / "run.trec"
    write_trec_run(path, run, tag="t")
    ours = score_run(golden, run, k=10)
    metrics = ours.metrics
    ranx_run = RanxRun.from_file(str(path), kind="trec")
    theirs = ranx_evaluate(
        Qrels.from_dict(to_ranx_qrels(golden)), ranx_run, metrics, make_comparable=True
    )
    for metric in metrics:
        assert ours.overall[metric] == pytest.approx(theirs[metric], abs=1e-9)
    # Reading the file back through our own reader gives the same numbers again.
    assert score_run(golden, read_trec_run(path), k=10).overall == pytest.approx(ours.overall)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.4\n", r"run.trec:2: expected 6 fields"),
        ("q1 Q0 d1 1 high t\n", r"run.trec:1: rank must be an integer and score a number"),
        ("q1 Q0 d1 one 0.5 t\n", r"run.trec:1: rank must be an integer"),
        ("q1 Q0 d1 1 nan t\n", r"run.trec:1: score is NaN"),
        ("q1 Q0 d1 1 0.5 t\n\nq1 Q0 d1 2 0.4 t\n", r"run.trec:3: document 'd1' listed twice"),
    ],
)
def test_malformed_run_lines(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "run.trec"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        read_trec_run(path)


def test_read_sorts_by_score_and_keeps_file_order_on_ties(tmp_path: Path) -> None:
    path = tmp_path / "other.txt"
    path.write_text("q1 Q0 b 1 0.5 t\nq1 Q0 c 2 0.9 t\nq1 Q0 a 3 0.5 t\n")
    assert read_trec_run(path) == {"q1": [("c", 0.9), ("b", 0.5), ("a", 0.5)]}


def test_missing_run_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such run file"):
        read_trec_run(tmp_path / "none.trec")


@pytest.mark.parametrize(
    ("qid", "doc", "tag"), [("q 1", "d", "t"), ("q", "d 1", "t"), ("q", "d", "")]
)
def test_ids_that_would_break_columns_are_refused(
    tmp_path: Path, qid: str, doc: str, tag: str
) -> None:
    with pytest.raises(ConfigError, match="cannot be written to a TREC run"):
        write_trec_run(tmp_path / "r.trec", {qid: [(doc, 1.0)]}, tag=tag)
