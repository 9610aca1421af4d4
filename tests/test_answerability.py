"""Answerability: the retrieval signals (against hand computation on the real fixture), the
logistic fit, storage per collection and embedding model, the answer hook, the CLI."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from psycopg import sql
from typer.testing import CliRunner

import pgcite
from pgcite._errors import ConfigError
from pgcite.cli import app
from pgcite.config import Settings
from pgcite.evaluate._fit_abstention import rates, wilson
from pgcite.retrieve._answerability import (
    SIGNALS,
    AnswerabilityModel,
    fit_logistic,
    fit_model,
    names_text,
    store_model,
    stored_model,
)

from .conftest import DIARY

QUERY = "fire in the garden seen through a telescope"


def _lexemes(diary: pgcite.Collection) -> tuple[dict[str, set[str]], float, list[str]]:
    """Each chunk's lexemes, the chunk count, and the query's lexemes, straight from SQL."""
    snap = diary.active_snapshot()
    with diary.client.connection() as conn:
        rows = conn.execute(sql.SQL(
            "SELECT c.id, t.lexeme FROM {s}.chunks c JOIN {s}.snapshot_members m"
            " USING (version_pk), unnest(c.tsv) t WHERE m.snapshot_id = %s").format(
            s=diary.info.schema_id), (snap.snapshot_id,)).fetchall()
        terms = [r[0] for r in conn.execute(
            "SELECT lexeme FROM unnest(to_tsvector('english', %s))", (QUERY,))]
    chunks: dict[str, set[str]] = {}
    for cid, lex in rows:
        chunks.setdefault(cid, set()).add(lex)
    return chunks, float(len(chunks)), terms


def test_signals_match_a_hand_computation(diary: pgcite.Collection) -> None:
    chunks, n, terms = _lexemes(diary)
    df = {t: sum(1 for lex in chunks.values() if t in lex) for t in terms}
    assert 0 in df.values() and any(df.values())  # the query has both kinds of lexeme

    def idf(t: str) -> float:
        return math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))

    total = sum(idf(t) for t in terms)
    keyword = diary.search(QUERY, mode="keyword", top_k=5)
    vector = diary.search(QUERY, mode="vector", top_k=5)
    best_lexemes = chunks[keyword.hits[0].id]
    sims = [h.score for h in vector.hits]
    overlap = {h.id for h in keyword.hits} & {h.id for h in vector.hits}

    got = diary.search(QUERY, top_k=5, stages={"route": False}).signals
    assert set(got) == set(SIGNALS)
    assert got["coverage"] == pytest.approx(sum(idf(t) for t in terms if df[t]) / total)
    assert got["best_coverage"] == pytest.approx(
        sum(idf(t) for t in terms if t in best_lexemes) / total)
    assert got["agreement"] == pytest.approx(len(overlap) / 5)
    assert got["cosine"] == pytest.approx(sims[0], abs=1e-6)
    assert got["gap"] == pytest.approx(sims[0] - sims[4], abs=1e-6)


# Names the fixture has (Chatham, Pudding) and names it lacks (Rembrandt, Sedgemoor), plus
# lower-case words it lacks, which are not names and must not count.
NAMED = "Did Rembrandt paint the Chatham docks or Pudding Lane before Sedgemoor? zebras quasars"


def test_names_text_keeps_the_capitalised_words() -> None:
    assert names_text(NAMED) == "Did Rembrandt Chatham Pudding Lane Sedgemoor"
    assert names_text("Milton's Paradise Lost, 1667") == "Milton's Paradise Lost"
    assert names_text("ما هو  zebras") == ""  # no capitals: nothing counts as a name
    # regnal numerals are not names ("Charles II" is "Charles the Second" in the diary)
    assert names_text("King Charles II and Henry VIII, Part IV") == "King Charles Henry Part"
    assert names_text("Ivan met Xavier and Vi") == "Ivan Xavier Vi"
    # a hyphenated word by its capitalised parts: the compound itself is a lexeme of its own
    # ("huguenot-descend") that a text writing the parts apart never holds
    assert names_text("Who was a Huguenot-descended maker at Fox-Hall?") == "Who Huguenot Fox Hall"


def test_terms_counts_the_query_lexemes(diary: pgcite.Collection) -> None:
    text = "What did Pepys think of the fire and the fire engines?"
    with diary.client.connection() as conn:
        lexemes = conn.execute("SELECT count(*) FROM unnest(to_tsvector('english', %s))",
                               (text,)).fetchone()
    got = diary.search(text, top_k=3, stages={"route": False}).signals["terms"]
    assert lexemes is not None and got == lexemes[0] == 4  # pepi, think, fire, engin
    assert diary.search(text, mode="vector").signals["terms"] is None


def test_unknown_names_counts_the_names_the_snapshot_lacks(diary: pgcite.Collection) -> None:
    chunks, _, _ = _lexemes(diary)
    seen = set().union(*chunks.values())
    with diary.client.connection() as conn:
        names = [r[0] for r in conn.execute(
            "SELECT lexeme FROM unnest(to_tsvector('english', %s))", (names_text(NAMED),))]
        lower = [r[0] for r in conn.execute(
            "SELECT lexeme FROM unnest(to_tsvector('english', 'zebras quasars'))")]
    unknown = [t for t in names if t not in seen]
    assert 0 < len(unknown) < len(names) and not any(t in seen for t in lower)
    got = diary.search(NAMED, top_k=5, stages={"route": False}).signals
    assert got["unknown_names"] == len(unknown) == 2  # rembrandt, sedgemoor
    assert diary.search(NAMED.lower(), stages={"route": False}).signals["unknown_names"] == 0
    assert diary.search(NAMED, mode="vector").signals["unknown_names"] is None


def test_signals_do_not_move_with_top_k(diary: pgcite.Collection) -> None:
    few = diary.search(QUERY, top_k=2, stages={"route": False}).signals
    many = diary.search(QUERY, top_k=10, stages={"route": False}).signals
    assert few == pytest.approx(many)


def test_one_leg_modes_leave_the_other_legs_signals_empty(diary: pgcite.Collection) -> None:
    vector = diary.search(QUERY, mode="vector").signals
    assert vector["coverage"] is None and vector["best_coverage"] is None
    keyword = diary.search(QUERY, mode="keyword").signals
    assert keyword["cosine"] is None and keyword["gap"] is None
    assert diary.search("fire", filters={"cutoff": "1600-01-01"}).signals == {}


def test_stop_words_only_have_no_coverage(diary: pgcite.Collection) -> None:
    got = diary.search("what was it that he did", stages={"route": False}).signals
    assert got["coverage"] is None and got["cosine"] is not None


def _blobs(rng: np.random.Generator, shift: float) -> tuple[np.ndarray, np.ndarray]:
    x = np.vstack([rng.normal(0, 1, (40, 2)), rng.normal(shift, 1, (40, 2))])
    return x, np.array([0.0] * 40 + [1.0] * 40)


def test_logistic_fit_is_optimal_and_finite_on_separable_data() -> None:
    rng = np.random.default_rng(1)
    x, y = _blobs(rng, 10.0)  # perfectly separable
    w, b = fit_logistic(x, y, l2=1.0)
    p = 1 / (1 + np.exp(-(x @ w + b)))
    assert np.all((p > 0.5) == (y == 1))
    assert np.all(np.isfinite(w))
    # the penalised optimum: gradient of the loss plus l2 * w is zero, bias unpenalised
    assert np.allclose(x.T @ (p - y) + 1.0 * w, 0, atol=1e-6)
    assert abs(float(np.sum(p - y))) < 1e-6


def test_logistic_fit_on_inseparable_data_stays_near_chance() -> None:
    rng = np.random.default_rng(2)
    x, y = _blobs(rng, 0.0)  # same distribution for both labels
    w, b = fit_logistic(x, y)
    assert np.all(np.abs(w) < 0.5) and abs(b) < 0.5
    # and it matches an unpenalised-bias closed check: the mean prediction is the base rate
    p = 1 / (1 + np.exp(-(x @ w + b)))
    assert float(p.mean()) == pytest.approx(0.5, abs=1e-6)


def test_fit_model_weighs_classes_equally() -> None:
    rng = np.random.default_rng(3)
    x = np.vstack([rng.normal(0, 1, (5, 1)), rng.normal(2, 1, (95, 1))])
    y = np.array([0.0] * 5 + [1.0] * 95)
    model = fit_model(x, y, model_key="m@1", names=["cosine"])
    # unweighted, 95% answerable would push the cut far below the minority; balanced, the
    # boundary sits between the two centres
    boundary = model.mean[0] - model.bias * model.scale[0] / model.weights[0]
    assert 0.3 < boundary < 1.7
    with pytest.raises(ConfigError):
        fit_model(x, np.ones(100), model_key="m@1", names=["cosine"])


def test_rates_and_intervals() -> None:
    y = np.array([1, 1, 1, 1, 0, 0], dtype=float)
    r = rates([False, False, False, True, True, False], y)
    assert (r.answer_rate, r.abstain_rate, r.balanced_accuracy) == (0.75, 0.5, 0.625)
    assert r.answer_ci == pytest.approx(wilson(3, 4))
    lo, hi = wilson(3, 4)
    assert lo == pytest.approx(0.3006, abs=1e-3) and hi == pytest.approx(0.9544, abs=1e-3)
    assert r.balanced_ci[0] <= 0.625 <= r.balanced_ci[1]


@pytest.fixture(scope="module")
def own(client: pgcite.Client) -> Iterator[pgcite.Collection]:
    """A collection of its own: these tests write fitted models into its settings."""
    col = client.create_collection("abstain_fixture")
    col.ingest([DIARY])
    yield col
    client.drop_collection("abstain_fixture")


def _model(key: str, bias: float) -> AnswerabilityModel:
    """A model whose answer is its bias alone (zero weights)."""
    n = len(SIGNALS)
    return AnswerabilityModel(model_key=key, signals=list(SIGNALS), mean=[0.0] * n,
                              scale=[1.0] * n, weights=[0.0] * n, bias=bias)


def test_storage_round_trip_per_embedding_model(client: pgcite.Client,
                                                own: pgcite.Collection) -> None:
    key = own.active_snapshot().embed_model
    with client.connection() as conn:
        store_model(conn, own.name, _model("other-model@1", 1.0))
        store_model(conn, own.name, _model(key, -3.0))
        store_model(conn, own.name, _model(key, 3.0))  # a refit replaces its model's entry
    settings = client.collection(own.name).info.settings
    assert stored_model(settings, key) == _model(key, 3.0)
    assert stored_model(settings, "other-model@1") == _model("other-model@1", 1.0)
    assert stored_model(settings, "unfitted@1") is None
    assert settings.chunk_tokens == own.info.settings.chunk_tokens  # the rest untouched
    with client.connection() as conn, pytest.raises(ConfigError):
        store_model(conn, "no_such_collection", _model(key, 0.0))


def test_a_model_for_another_embedding_model_is_refused(own: pgcite.Collection) -> None:
    result = own.search(QUERY)
    with pytest.raises(ConfigError, match="fitted for other-model@1"):
        _model("other-model@1", 0.0).probability(result)
    assert _model(result.embedding_model, 0.0).probability(result) == pytest.approx(0.5)
    assert _model(result.embedding_model, 0.0).probability(own.search(QUERY, mode="vector")) \
        is None  # fitted for hybrid: another mode is not scored


def test_answer_consults_the_stored_score(client: pgcite.Client,
                                          own: pgcite.Collection) -> None:
    key = own.active_snapshot().embed_model
    question = "Where did Pepys bury his Parmazan cheese?"
    with client.connection() as conn:
        store_model(conn, own.name, _model(key, -5.0))  # says "absent" to everything
    refusing = client.collection(own.name)
    answer = refusing.answer(question)
    assert answer.abstained and "answerability 0.007 is below 0.500" in answer.trace[-1].detail
    # a threshold the caller passes wins over the fitted score
    assert not refusing.answer(question, options={"threshold": 0.0}).abstained
    with client.connection() as conn:
        store_model(conn, own.name, _model(key, 5.0))  # says "answerable" to everything
    # ... and the fitted score replaces the default cosine threshold
    low = "quantum computing error correction codes"
    assert own.answer(low).abstained  # the default threshold, no model in this object's info
    assert not client.collection(own.name).answer(low).abstained


GOLDEN = [
    {"id": "a1", "query": "Where did Pepys bury his Parmazan cheese?", "kind": "keyword",
     "relevant": ["d-1666-09-04"]},
    {"id": "a2", "query": "the great fire in Pudding Lane", "kind": "fact",
     "relevant": ["d-1666-09-02"]},
    {"id": "a3", "query": "looking at a louse through a microscope", "kind": "paraphrase",
     "relevant": ["d-1663-08-10"]},
    {"id": "a4", "query": "houses marked with a red cross in the plague", "kind": "fact",
     "relevant": ["d-1665-06-07"]},
    {"id": "a5", "query": "the Dutch burn the ships at Chatham", "kind": "fact",
     "relevant": ["d-1667-06-12"]},
    {"id": "x1", "query": "quantum computing error correction codes", "kind": "absent"},
    {"id": "x2", "query": "electric cars and lithium batteries", "kind": "absent"},
    {"id": "x3", "query": "the rules of professional basketball", "kind": "absent"},
    {"id": "x4", "query": "smartphone app store revenue", "kind": "absent"},
]


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_cli_fits_reports_and_stores(settings: Settings, monkeypatch: pytest.MonkeyPatch,
                                     client: pgcite.Client, own: pgcite.Collection,
                                     tmp_path: Path) -> None:
    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)
    golden = _write(tmp_path / "golden.jsonl", GOLDEN)
    result = CliRunner().invoke(app, ["eval", own.name, "--golden", str(golden),
                                      "--fit-abstention", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["method"] == "leave-one-out" and payload["left_out"] == []
    assert (payload["combined"]["answerable"], payload["combined"]["absent"]) == (5, 4)
    assert payload["with_year_rule"]["absent"] == 4
    assert set(payload["per_signal"]) == set(SIGNALS)
    key = own.active_snapshot().embed_model
    stored = stored_model(client.collection(own.name).info.settings, key)
    assert stored is not None and stored.model_key == key == payload["model_key"]
    assert stored.cross_validated["balanced_accuracy"] == payload["combined"]["balanced_accuracy"]
    text = CliRunner().invoke(app, ["eval", own.name, "--golden", str(golden),
                                    "--fit-abstention"])
    assert text.exit_code == 0 and "combined score" in text.output

    only = _write(tmp_path / "answerable.jsonl", GOLDEN[:5])
    bad = CliRunner().invoke(app, ["eval", own.name, "--golden", str(only), "--fit-abstention"])
    assert bad.exit_code == 2 and "needs answerable and absent queries" in bad.output
    assert "Traceback" not in bad.output


def test_vectorised_threshold_equals_the_calibration() -> None:
    from pgcite.evaluate import calibrate_threshold
    from pgcite.evaluate._fit_abstention import best_threshold

    rng = np.random.default_rng(4)
    for _ in range(200):
        ans = np.round(rng.normal(0.5, 0.1, rng.integers(1, 12)), 2)  # rounding makes ties
        absent = np.round(rng.normal(0.4, 0.1, rng.integers(1, 8)), 2)
        expected = calibrate_threshold(ans.tolist(), absent.tolist()).value
        assert best_threshold(ans, absent) == pytest.approx(expected)


def test_a_signal_high_on_absent_queries_abstains_above_its_threshold() -> None:
    """unknown_names is high when the question names what the archive never saw: its one-signal
    rule must abstain on the high side (read the other way, it answered everything)."""
    from pgcite.evaluate._fit_abstention import loo_threshold

    y = np.array([1.0] * 6 + [0.0] * 4)
    names = np.array([0, 0, 0, 0, 0, 1, 1, 2, 1, 1], dtype=float)  # one answerable has a name
    mask = np.ones(y.size, dtype=bool)
    decided = loo_threshold(names, y, mask, "unknown_names")
    assert decided == [False] * 5 + [True] + [True] * 4
    # read the usual way (abstain below), the best rule answers everything: the old 1.0 / 0.0 row
    assert not any(loo_threshold(names, y, mask, "cosine")[6:])


def test_fit_also_decides_the_golden_queries_with_the_others(
        settings: Settings, monkeypatch: pytest.MonkeyPatch, own: pgcite.Collection,
        tmp_path: Path) -> None:
    """--fit-also: the figures count only --golden's queries, each decided by a fit on every
    other query (the further set's included); the stored model learned from all of them."""
    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)
    golden = _write(tmp_path / "golden.jsonl", GOLDEN[:3] + GOLDEN[-2:])
    extra = _write(tmp_path / "extra.jsonl", GOLDEN[3:-2])
    result = CliRunner().invoke(app, ["eval", own.name, "--golden", str(golden), "--fit-also",
                                      str(extra), "--fit-abstention", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    answerable = sum(1 for r in GOLDEN[:3] if r.get("kind") != "absent")
    assert payload["combined"]["answerable"] == answerable and payload["combined"]["absent"] == 2
    pooled = payload["pooled"]
    assert pooled["answerable"] + pooled["absent"] == len(GOLDEN)
    assert payload["also"] == ["extra"]
    assert payload["model"]["fitted_on"].endswith("5 answerable + 4 absent")
