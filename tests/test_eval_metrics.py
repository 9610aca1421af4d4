"""score_run: ranx's numbers, per query and per kind, with the absent queries set aside."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from ranx import Qrels
from ranx import Run as RanxRun
from ranx import evaluate as ranx_evaluate

from pgcite.evaluate import GoldenQuery, GoldenSet, Run, load_golden, metric_names, score_run

FIXTURES = Path(__file__).parent / "fixtures" / "eval"


def _golden(queries: list[GoldenQuery]) -> GoldenSet:
    return GoldenSet(name="t", path="t", sha256="0", queries=queries)


def test_hand_checked_example() -> None:
    golden = _golden(
        [
            GoldenQuery(id="q1", text="t", kind="fact", relevant={"a": 1, "b": 1, "c": 1}),
            GoldenQuery(id="q2", text="t", kind="fact", relevant={"d": 2, "e": 1}),
            GoldenQuery(id="q3", text="t", kind="absent"),
            GoldenQuery(id="q4", text="t", kind="keyword", relevant={"f": 1}),  # not in the run
        ]
    )
    run: Run = {
        "q1": [("x", 0.9), ("a", 0.8), ("y", 0.7), ("b", 0.6)],
        "q2": [("e", 0.9), ("d", 0.8)],
        "q3": [("a", 0.5)],
    }
    scores = score_run(golden, run, k=10)

    # q1: relevant at ranks 2 and 4 of 3 relevant; linear gain; ideal DCG over min(3, 10) = 3.
    ndcg_q1 = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3) + 1 / math.log2(4))
    # q2: grade 1 at rank 1, grade 2 at rank 2; ideal puts the 2 first.
    ndcg_q2 = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert ndcg_q1 == pytest.approx(0.498189, abs=1e-6)  # written out by hand, too
    assert ndcg_q2 == pytest.approx(0.859719, abs=1e-6)
    q1, q2, q4 = (scores.per_query[q] for q in ("q1", "q2", "q4"))
    assert q1["ndcg@10"] == pytest.approx(ndcg_q1, abs=1e-6)
    assert q2["ndcg@10"] == pytest.approx(ndcg_q2, abs=1e-6)
    assert (q1["mrr@10"], q1["recall@10"], q1["precision@10"]) == pytest.approx((0.5, 2 / 3, 0.2))
    assert (q2["mrr@10"], q2["recall@10"], q2["precision@10"]) == pytest.approx((1.0, 1.0, 0.2))
    assert q4 == dict.fromkeys(scores.metrics, 0.0)  # judged but not retrieved: scores 0

    assert scores.unscored == ["q3"]
    assert scores.overall["ndcg@10"] == pytest.approx((ndcg_q1 + ndcg_q2 + 0.0) / 3, abs=1e-6)
    assert scores.overall["mrr@10"] == pytest.approx(0.5, abs=1e-6)
    assert scores.by_kind["fact"]["ndcg@10"] == pytest.approx((ndcg_q1 + ndcg_q2) / 2, abs=1e-6)
    assert scores.by_kind["keyword"]["recall@10"] == 0.0
    assert "absent" not in scores.by_kind
    assert scores.scored_by_kind == {"fact": 2, "keyword": 1}


def test_cutoff_k_limits_ideal_dcg_and_recall() -> None:
    golden = _golden([GoldenQuery(id="q1", text="t", relevant={"a": 1, "b": 1, "c": 1})])
    scores = score_run(golden, {"q1": [("x", 2.0), ("a", 1.0), ("b", 0.5)]}, k=2)
    assert scores.metrics == metric_names(2) == [
        "ndcg@2", "precision@2", "recall@2", "mrr@2", "recall@100"
    ]  # fmt: skip
    q1 = scores.per_query["q1"]
    # Ideal DCG@2 over min(3, 2) = 2 relevant documents.
    assert q1["ndcg@2"] == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)), abs=1e-6)
    assert (q1["recall@2"], q1["precision@2"], q1["mrr@2"]) == pytest.approx((1 / 3, 0.5, 0.5))
    assert q1["recall@100"] == pytest.approx(2 / 3)


def test_rank_order_wins_over_scores() -> None:
    # The list order is the ranking; a rising score must not promote "a" to rank 1.
    golden = _golden([GoldenQuery(id="q1", text="t", relevant={"a": 1})])
    assert score_run(golden, {"q1": [("x", 0.1), ("a", 0.9)]}).per_query["q1"]["mrr@10"] == 0.5
    assert score_run(golden, {"q1": [("x", 0.5), ("a", 0.5)]}).per_query["q1"]["mrr@10"] == 0.5


def test_synthetic_run_matches_ranx_directly() -> None:
    rng = random.Random(7)
    docs = [f"d{i}" for i in range(60)]
    queries, ranx_qrels, ranx_run, run = [], {}, {}, {}
    for i in range(25):
        qid = f"q{i}"
        relevant = {d: rng.randint(1, 3) for d in rng.sample(docs, rng.randint(1, 8))}
        queries.append(
            GoldenQuery(id=qid, text="t", kind=rng.choice(["a", "b"]), relevant=relevant)
        )
        ranx_qrels[qid] = relevant
        ranking = rng.sample(docs, rng.randint(0, 40))
        scores = sorted((rng.random() for _ in ranking), reverse=True)  # distinct, decreasing
        run[qid] = list(zip(ranking, scores, strict=True))
        if ranking:
            ranx_run[qid] = dict(run[qid])
    golden = _golden(queries)
    ours = score_run(golden, run, k=10)
    theirs = RanxRun.from_dict(ranx_run)
    means = ranx_evaluate(Qrels.from_dict(ranx_qrels), theirs, ours.metrics, make_comparable=True)
    for metric in ours.metrics:
        assert ours.overall[metric] == pytest.approx(means[metric], abs=1e-6)
        for qid in ranx_qrels:
            assert ours.per_query[qid][metric] == pytest.approx(
                theirs.scores[metric][qid], abs=1e-6
            )
    assert set(ours.per_query) == set(ranx_qrels)


def test_run_with_no_documents_scores_zero() -> None:
    golden = load_golden(FIXTURES / "golden.jsonl")
    scores = score_run(golden, {"g1": [], "g5": []})
    assert scores.overall == dict.fromkeys(scores.metrics, 0.0)
    assert scores.unscored == ["g5", "g6"]


def test_golden_set_without_judgments() -> None:
    golden = _golden([GoldenQuery(id="q1", text="t", kind="absent")])
    scores = score_run(golden, {"q1": [("a", 1.0)]})
    assert scores.per_query == {} and scores.by_kind == {} and scores.unscored == ["q1"]


def test_k_must_be_positive() -> None:
    with pytest.raises(ValueError, match="k must be"):
        score_run(_golden([]), {}, k=0)
