"""The answerability model that ships with pgcite: it loads from the package, decides for a
collection that has no fitted model, a fitted model overrides it, a caller's threshold
overrides both; and the year rule's "long before the sources" half."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pgcite
from pgcite.answer._pipeline import EARLY_YEARS, asks_outside_sources
from pgcite.config import Settings
from pgcite.retrieve._answerability import (
    ANY_MODEL,
    LEXICAL,
    SIGNALS,
    AnswerabilityModel,
    DefaultAnswerability,
    metadata_words,
    model_family,
    read_wording,
    respellings,
    shipped_default,
    store_model,
)
from pgcite.retrieve._hits import Hit

from .conftest import DIARY, FIXTURES

ABSENT = "Did Pepys eat potatoes?"
ANSWERABLE = "Where did Pepys bury his Parmazan cheese?"


def test_the_shipped_model_loads_and_serves_every_embedding_model() -> None:
    default = shipped_default()
    assert [m.model_key for m in default.models] == [ANY_MODEL]
    assert default.figures  # the leave-one-collection-out figures it was shipped with
    minilm = default.for_key("all-MiniLM-L6-v2@0123abcd")
    assert minilm is not None and minilm.model_key == "all-MiniLM-L6-v2@0123abcd"
    # no cosine, no gap: their scales belong to one embedding model
    assert tuple(minilm.signals) == LEXICAL and "cosine" not in minilm.signals
    # fp32 and int8 MiniLM (either way a key may name it), e5, a server's: the same weights,
    # each keyed to the model it scores (probability() refuses a result of another model)
    for key in ("all-MiniLM-L6-v2@0123abcd+int8", "all-MiniLM-L6-v2-int8@0123abcd",
                "multilingual-e5-small@1", "tei:bge-small@1"):
        model = default.for_key(key)
        assert model is not None and model.model_key == key
        assert model.weights == minilm.weights and model.cut == minilm.cut


def test_a_family_model_comes_before_the_catch_all() -> None:
    shipped = shipped_default().models[0]
    own = shipped.model_copy(update={"model_key": "all-MiniLM-L6-v2", "bias": 9.0})
    default = DefaultAnswerability(models=[shipped, own])
    minilm = default.for_key("all-MiniLM-L6-v2@ab+int8")
    other = default.for_key("multilingual-e5-small@1")
    assert minilm is not None and minilm.bias == 9.0
    assert other is not None and other.bias == shipped.bias


def test_model_family() -> None:
    assert model_family("all-MiniLM-L6-v2@ab+int8") == "all-MiniLM-L6-v2"
    assert model_family("all-MiniLM-L6-v2-int8@ab") == "all-MiniLM-L6-v2"
    assert model_family("multilingual-e5-small@x") == "multilingual-e5-small"


def test_without_a_catch_all_another_embedder_has_no_default() -> None:
    shipped = shipped_default().models[0]
    only = DefaultAnswerability(models=[shipped.model_copy(update={"model_key": "e5"})])
    assert only.for_key("tei:bge@1") is None


@pytest.fixture(scope="module")
def fresh(client: pgcite.Client) -> Iterator[pgcite.Collection]:
    """A collection of its own, never fitted: the tests store models in its settings."""
    col = client.create_collection("default_answerability")
    col.ingest([DIARY])
    yield col
    client.drop_collection("default_answerability")


def test_the_default_decides_for_a_fresh_collection(fresh: pgcite.Collection) -> None:
    assert fresh.info.settings.abstention == {}  # nothing fitted
    absent = fresh.answer(ABSENT)
    assert absent.abstained, absent.answer
    cut = shipped_default().models[0].cut
    assert f"is below {cut:.3f} (the default model" in absent.trace[-1].detail
    assert absent.threshold is None  # a probability decided, not the cosine threshold
    answered = fresh.answer(ANSWERABLE)
    assert not answered.abstained and "Parmazan" in answered.answer
    assert answered.threshold is None
    # an answer's trace says how the model scored it, as an abstention's does
    verdicts = [t.detail for t in answered.trace if t.step == "answerability"]
    assert any(f"is at or above {cut:.3f} (the default model" in v for v in verdicts), verdicts


def _surface_answers(client: pgcite.Client, collection: str,
                     question: str) -> dict[str, tuple[bool, str]]:
    """(abstained, the last trace line) of ``question`` asked with defaults -- no threshold,
    nothing fitted -- on the CLI, over HTTP and over MCP."""
    import asyncio
    import json

    from fastapi.testclient import TestClient
    from typer.testing import CliRunner

    from pgcite.cli import app as cli_app
    from pgcite.service import ServiceConfig, create_app, create_key

    out: dict[str, tuple[bool, str]] = {}
    cli = CliRunner().invoke(cli_app, ["ask", collection, question, "--json"])
    assert cli.exit_code == 0, cli.output
    body = json.loads(cli.stdout)
    out["cli"] = (body["abstained"], body["trace"][-1]["detail"])
    with client.db.transaction() as conn:
        token = create_key(conn, collection, "reader").token
    app = create_app(client=client, config=ServiceConfig(warm_up=False))
    with TestClient(app) as api:
        resp = api.post(f"/v1/collections/{collection}/answer", json={"question": question},
                        headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    out["http"] = (body["abstained"], body["trace"][-1]["detail"])
    mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from pgcite.mcp import build_server, open_access

    access = open_access(client, None)
    server = build_server(lambda ctx: access)

    async def ask() -> Any:
        async with mcp.Client(server) as session:
            return await session.call_tool("answer", {"collection": collection,
                                                      "question": question})
    result = asyncio.run(ask())
    assert not result.is_error, result.content
    data = result.structured_content
    data = data["result"] if set(data) == {"result"} else data
    out["mcp"] = (data["abstained"], data["notes"][-1])
    return out


def test_every_surface_decides_by_the_default_model(
        client: pgcite.Client, settings: Settings, fresh: pgcite.Collection,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With defaults the CLI, HTTP and MCP decide as Python does: by the shipped model."""
    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))  # the CLI's database
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)
    assert client.collection(fresh.name).info.settings.abstention == {}  # nothing fitted
    cut = f"is below {shipped_default().models[0].cut:.3f} (the default model"
    for surface, (abstained, why) in _surface_answers(client, fresh.name,
                                                      ABSENT).items():
        assert abstained and cut in why, (surface, why)
    for surface, (abstained, why) in _surface_answers(client, fresh.name,
                                                      ANSWERABLE).items():
        assert not abstained, (surface, why)


def _model(key: str, bias: float) -> AnswerabilityModel:
    n = len(SIGNALS)
    return AnswerabilityModel(model_key=key, signals=list(SIGNALS), mean=[0.0] * n,
                              scale=[1.0] * n, weights=[0.0] * n, bias=bias)


def test_a_fitted_model_overrides_the_default_and_a_threshold_both(
        client: pgcite.Client, fresh: pgcite.Collection) -> None:
    key = fresh.active_snapshot().embed_model
    with client.connection() as conn:
        store_model(conn, fresh.name, _model(key, 5.0))  # "answerable" to everything
    fitted = client.collection(fresh.name)
    answer = fitted.answer(ABSENT)
    assert not answer.abstained  # the default would abstain (test above); the fit answers
    with client.connection() as conn:
        store_model(conn, fresh.name, _model(key, -5.0))  # "absent" to everything
    refusing = client.collection(fresh.name)
    answer = refusing.answer(ANSWERABLE)
    assert answer.abstained and "(the fitted model" in answer.trace[-1].detail
    # the caller's threshold wins over both: a low one answers, a high one abstains
    assert not refusing.answer(ANSWERABLE, options={"threshold": 0.0}).abstained
    assert not refusing.answer(ABSENT, options={"threshold": 0.0}).abstained
    high = refusing.answer(ANSWERABLE, options={"threshold": 0.99})
    assert high.abstained and "below the threshold 0.990" in high.trace[-1].detail
    with client.connection() as conn:  # leave the collection unfitted again
        conn.execute("UPDATE pgcite.collections SET settings = settings - 'abstention'"
                     " WHERE name = %s", (fresh.name,))


def test_other_modes_fall_back_to_the_cosine_threshold(fresh: pgcite.Collection) -> None:
    """The signals need both legs: a vector-only answer is decided by the threshold."""
    answer = fresh.answer(ANSWERABLE, mode="vector")
    assert answer.threshold == pgcite.answer.DEFAULT_THRESHOLDS["all-MiniLM-L6-v2"]


def _hit(date: str | None, body: str = "a passage", author: str | None = None) -> Hit:
    import datetime as dt

    day = dt.date.fromisoformat(date) if date else None
    return Hit(id="x", document_id="x", citation="x", author=author, corpus=None,
               date_start=day, date_end=day, source=None, locator=None, title=None, body=body,
               score=1.0, rank=1)


def test_metadata_words_are_the_writers_name_and_the_sources_years() -> None:
    hits = [_hit("1660-01-01", author="Samuel Pepys"), _hit("1668-05-31", author="Samuel Pepys")]
    assert metadata_words("What did Pepys's wife think of Hamlet in 1661?", hits) \
        == ["Pepys", "1661"]
    assert metadata_words("When did Samuel Pepys see the comet?", hits) == ["Samuel", "Pepys"]
    # a year outside the passages' dates is a question about another time: it stays
    assert metadata_words("What did Pepys think in 1690?", hits) == ["Pepys"]
    # ... unless it bounds the question: "up to 1690" is the time frame a cutoff states
    assert metadata_words("Who was at Deptford with Pepys up to 1690?", hits) == ["Pepys", "1690"]
    assert metadata_words("What happened before 1690 or in 1650?", hits) == ["1690"]
    # lower case is not a name; an author the passages do not have is a topic
    assert metadata_words("did pepys eat potatoes?", hits) == []
    assert metadata_words("What did Evelyn write?", hits) == []
    assert metadata_words("What happened in 1666?", [_hit(None, author="Editor")]) == []


def test_the_signals_are_read_without_the_metadata_words(fresh: pgcite.Collection) -> None:
    """The fixture never writes "Pepys" or its years; its passages are by Samuel Pepys and
    dated 1660-1668: a question naming them reads as one without them."""
    question = "Where did Pepys bury his Parmazan cheese in 1666?"
    result = fresh.search(question, top_k=5)
    assert result.signals["unknown_names"] == 1.0  # "Pepys", as the statement reads it
    calls: list[str] = []

    def keyword(text: str) -> pgcite.SearchResult:
        calls.append(text)
        return fresh.search(text, top_k=5, mode="keyword")

    read, wording = read_wording(question, result, keyword)
    assert wording.left_out == ["Pepys", "1666"] and wording.respelled == {}
    assert calls == ["Where did bury his Parmazan cheese in ?"]
    assert read.signals["unknown_names"] == 0.0 and read.signals["terms"] == 3.0
    assert read.signals["coverage"] == 1.0 > result.signals["coverage"]  # type: ignore[operator]
    assert read.signals["cosine"] == result.signals["cosine"]  # the legs' signals are kept
    assert read.hits == result.hits
    unchanged, none = read_wording("Where is the cheese?", result, keyword)
    assert unchanged is result and not none.left_out and not none.respelled and len(calls) == 1


def test_respellings_are_the_names_the_passages_write_with_other_accents() -> None:
    hits = [_hit(None, "Thomas de Maizière is the Federal Minister of the Interior."),
            _hit(None, "Herr Muller and Zoë Brontë met in Zürich.")]
    assert respellings("Thomas de Maiziere serves what role?", hits) == {"Maiziere": "Maizière"}
    # either way round, possessives read as the name, each name once (and "meet" as written)
    assert respellings("Did Müller's wife meet Zoe Bronte in Zurich?", hits) \
        == {"Müller": "Muller", "Zoe": "Zoë", "Bronte": "Brontë", "Zurich": "Zürich",
            "meet": "met"}
    # spelled as the passages spell it, a name the passages lack, a word that is not a name
    assert respellings("Where is Maizière? Who is Rembrandt? What of zurich?", hits) == {}
    # a passage that writes the name as asked: nothing to respell
    assert respellings("Where is Maiziere?", [*hits, _hit(None, "Maiziere said so.")]) == {}


def test_respellings_are_irregular_verbs_in_the_form_the_passages_write() -> None:
    minutes = [_hit(None, "Instruments lent by J. Hartley; the rain began at nine."),
               _hit(None, "He was lending a globe.")]
    # "lend" is written "lending" too: the stemmer folds that one, nothing to respell
    assert respellings("What did Hartley lend?", minutes) == {}
    assert respellings("What did Hartley lend?", minutes[:1]) == {"lend": "lent"}
    assert respellings("When did the rain Begin?", minutes) == {"begin": "began"}
    # a regular verb, a verb the passages do not write, a noun: none
    assert respellings("What did Hartley borrow or eat? What cost?", minutes) == {}


ACCENTS = [{"_id": "interior", "title": "", "text": "Thomas de Maizière serves as the Federal "
            "Minister of the Interior in the German cabinet."},
           {"_id": "fire", "title": "", "text": "The fire began in a baker's house in Pudding "
            "Lane and burned for four days."},
           {"_id": "plague", "title": "", "text": "The plague took a great many people in the "
            "city that summer."}]


def test_a_name_typed_without_its_accents_is_not_unknown(client: pgcite.Client,
                                                         tmp_path: Path) -> None:
    """PostgreSQL's english configuration folds case, not accents: "Maiziere" is a lexeme the
    collection lacks. Read as the passages spell it, the question names nothing unknown."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in ACCENTS))
    col = client.create_collection("answerability_accents")
    try:
        col.ingest([corpus])
        question = "What role does Thomas de Maiziere hold in the German cabinet?"
        result = col.search(question, top_k=5)
        assert result.signals["unknown_names"] == 1.0

        def keyword(text: str) -> pgcite.SearchResult:
            return col.search(text, top_k=5, mode="keyword")

        read, wording = read_wording(question, result, keyword)
        assert wording.respelled == {"Maiziere": "Maizière"} and not wording.left_out
        assert read.signals["unknown_names"] == 0.0
        answer = col.answer(question)
        assert any("Maiziere -> Maizière" in t.detail for t in answer.trace), answer.trace
        # a name no passage writes, however spelled, is still unknown
        other = col.search("What role does Thomas Rembrandt hold in the cabinet?", top_k=5)
        assert read_wording("What role does Thomas Rembrandt hold in the cabinet?", other,
                            keyword)[0].signals["unknown_names"] == 1.0
    finally:
        client.drop_collection("answerability_accents")


def test_a_year_long_before_the_sources_is_absent_unless_a_passage_names_it() -> None:
    letters = [_hit("1851-03-02"), _hit("1855-07-01")]
    question = "Which steam railways were running in England in 1600?"
    reason = asks_outside_sources(question, letters)
    assert reason is not None and "1600" in reason and "1851 or later" in reason
    # a passage that names the year: the sources do speak of it
    assert asks_outside_sources(question, [*letters, _hit("1852-01-01", "founded in 1600")]) \
        is None
    # within a generation of the sources: they may remember it without writing the year
    recent = f"What did they say of the events of {1851 - EARLY_YEARS + 1}?"
    assert asks_outside_sources(recent, letters) is None
    assert asks_outside_sources(f"What happened in {1851 - EARLY_YEARS}?", letters) is not None
    # years inside the sources' span, undated passages, no year: no rule
    assert asks_outside_sources("What happened in 1853?", letters) is None
    assert asks_outside_sources(question, [*letters, _hit(None)]) is None
    assert asks_outside_sources("Which railways ran?", letters) is None
    # the other half, unchanged: every year after the sources
    assert "1855 or earlier" in (asks_outside_sources("What happened in 1870?", letters) or "")
    # a month is read as a month: the sources end in July 1855, their year does not
    assert "July 1855 or earlier" in (
        asks_outside_sources("What did she write of her illness in November 1855?", letters) or "")
    assert asks_outside_sources("What did she write in July 1855?", letters) is None
    assert asks_outside_sources("What happened between June 1855 and December 1855?",
                                letters) is None


def test_an_answer_abstains_on_a_year_long_before_its_passages(diary: pgcite.Collection) -> None:
    answer = diary.answer("Which steam railways were running in England in 1600?",
                          # no score: only the year rule can abstain
                          options={"threshold": -1.0},
                          # dated passages only (an undated one stops the rule)
                          filters={"corpora": ["A"]})
    assert answer.abstained and "none names the year" in answer.trace[-1].detail


# A new user's archive in small: nine letters and minutes of a learned society, 1851-1855,
# none of which names a railway, Queen Victoria or potatoes (tests/fixtures/letters/).
NEW_USER = [
    ("Which steam railways were running in England in 1600?", None, False),
    ("What did Queen Victoria say at the opening of the Great Exhibition?", None, False),
    ("Did Hartley eat potatoes?", None, False),
    # the keyword leg's first hit states it ("raised from six shillings to eight shillings"),
    # though the best cosine is low: the default must answer, not abstain
    ("What was the annual subscription?", "1853-01-01", True),
    ("Who fell ill with a fever?", None, True),
]


@pytest.fixture(scope="module")
def letters(client: pgcite.Client) -> Iterator[pgcite.Collection]:
    col = client.create_collection("default_letters")
    report = col.ingest([FIXTURES / "letters" / "minutes.jsonl"])
    assert not report.failed and report.activated
    yield col
    client.drop_collection("default_letters")


@pytest.mark.parametrize(("question", "cutoff", "answers"), NEW_USER,
                         ids=[q for q, _, _ in NEW_USER])
def test_a_new_users_archive_with_defaults(letters: pgcite.Collection, question: str,
                                           cutoff: str | None, answers: bool) -> None:
    answer = letters.answer(question, filters={"cutoff": cutoff})
    assert answer.abstained is not answers, answer.trace[-1].detail
    if answers:
        assert answer.citations


@pytest.mark.parametrize(("question", "persona", "absent"), [
    ("When and where did Samuel Pepys die?", None, True),
    ("How old was Pepys when he died?", None, True),
    ("Who attended the funeral of Samuel Pepys?", None, True),
    ("When did the diarist die?", None, True),
    ("How did you die?", "Samuel Pepys", True),
    ("Where were you buried?", "Samuel Pepys", True),
    ("What was said at your funeral?", "Samuel Pepys", True),
    ("How old were you when you died?", "Samuel Pepys", True),
    # the persona asked about someone else's death: answerable
    ("What did you write about the death of your father?", "Samuel Pepys", False),
    ("What did you do when he died?", "Samuel Pepys", False),
    # someone else's death, a fear, a near thing, or no persona to be "you": answerable
    ("What did Pepys write about his wife's death?", None, False),
    ("Did Pepys fear he would die of the plague?", None, False),
    ("Did Pepys nearly die of the stone?", None, False),
    ("What did Pepys bury in his garden during the Great Fire?", None, False),
    ("How did you die?", None, False),
])
def test_nothing_a_writer_wrote_reports_the_writers_own_death(
        question: str, persona: str | None, absent: bool) -> None:
    from pgcite.answer._pipeline import asks_own_death

    diary = [_hit("1660-01-01", author="Samuel Pepys"), _hit("1669-05-31", author="Samuel Pepys")]
    assert (asks_own_death(question, diary, persona) is not None) is absent
    # a passage by another hand (his wife's letters) may tell of it
    assert asks_own_death(question, [*diary, _hit("1670-01-01", author="Elizabeth Pepys")],
                          persona) is None
    # no author (or a blank one): nobody's own death to rule out
    for blank in (None, "", "  "):
        assert asks_own_death(question, [_hit("1660-01-01", author=blank)], persona) is None
