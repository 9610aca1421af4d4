"""A question naming a month or year prefers the passages dated in it (Stages.date_boost), and
the answerer prefers their sentences; a question naming none searches exactly as before."""

from __future__ import annotations

import datetime as dt

import pytest

import pgcite
from pgcite.answer import ContextPassage, GenerationRequest
from pgcite.answer._precise import PreciseGenerator, PreciseOptions
from pgcite.retrieve._when import asked_periods, overlaps

FLOOD = "What did the flood carry away in June 1855?"


@pytest.mark.parametrize(("question", "periods"), [
    ("What did Pepys see in September 1666?", [("1666-09-01", "1666-09-30")]),
    ("the comet of the winter of 1664-65", [("1664-01-01", "1665-12-31")]),
    ("What happened in Sept. 1666 and in 1667?", [("1666-09-01", "1666-09-30"),
                                                   ("1667-01-01", "1667-12-31")]),
    ("What did he do before 1664?", []),  # bounds the question from above: no period
    ("until June 1664", []),
    ("What did he eat?", []),
])
def test_the_periods_a_question_names(question: str, periods: list[tuple[str, str]]) -> None:
    assert asked_periods(question) == [(dt.date.fromisoformat(a), dt.date.fromisoformat(b))
                                       for a, b in periods]


def test_a_passage_falls_in_a_period_when_its_days_meet_it() -> None:
    june = asked_periods("in June 1855")
    assert overlaps(june, dt.date(1855, 6, 1), dt.date(1855, 6, 30))
    assert overlaps(june, dt.date(1855, 1, 1), dt.date(1855, 12, 31))  # a year-dated document
    assert not overlaps(june, dt.date(1855, 3, 14))
    assert not overlaps(june, None)


def test_the_entry_of_the_month_asked_comes_first(journal: pgcite.Collection) -> None:
    plain = journal.search(FLOOD, top_k=3, stages={"date_boost": 0})
    boosted = journal.search(FLOOD, top_k=3)
    assert plain.hits[0].document_id != "j-1855-06"  # the March flood entries match more
    assert boosted.hits[0].document_id == "j-1855-06"
    assert any(e.stage == "dates" and e.outcome == "applied" for e in boosted.stages)


def test_a_question_naming_no_date_searches_as_before(journal: pgcite.Collection) -> None:
    question = "What did the flood carry away?"
    plain = journal.search(question, top_k=3, stages={"date_boost": 0})
    default = journal.search(question, top_k=3)
    assert [h.id for h in default.hits] == [h.id for h in plain.hits]
    assert not any(e.stage == "dates" for e in default.stages)
    # a date no passage falls in: the usual hits, not a deeper list cut differently
    late = journal.search(f"{question} In 1901?", top_k=3)
    assert [h.id for h in late.hits] == [
        h.id for h in journal.search(f"{question} In 1901?", top_k=3,
                                     stages={"date_boost": 0}).hits]


def test_the_answerer_prefers_a_sentence_of_the_period_asked() -> None:
    passages = [
        ContextPassage(id="march", author=None, date="1855-03-14", rank=1,
                       text="The flood carried off the hen house and the fence."),
        ContextPassage(id="june", author=None, date="1855-06-01", date_end="1855-06-30",
                       rank=2, text="The flood left the peas rotten in the ground."),
    ]
    request = GenerationRequest(question="What damage did the flood do in June 1855?",
                                passages=passages, abstention_text="ABSTAIN")
    options = PreciseOptions(embedding=0.0, max_sentences=1)
    before = PreciseGenerator(options=options.model_copy(update={"date_match": 0.0}))
    assert before.generate(request).endswith("[march]")
    assert PreciseGenerator(options=options).generate(request).endswith("[june]")
