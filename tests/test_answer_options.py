"""`answer` takes the shape `search` has: the question, `filters`, an `options` object
(`AnswerOptions` or a dict) with the `top_k`/`mode` shorthands; the keywords it took before still
work, each with a DeprecationWarning at the caller's line."""

from __future__ import annotations

import datetime as dt
import warnings

import pytest

import pgcite
from pgcite._client import answer_arguments

QUESTION = "What happened during the great fire?"
CUTOFF = dt.date(1666, 9, 5)


def test_the_options_object_gives_the_answer_the_old_keywords_gave(
        diary: pgcite.Collection) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the new shape warns of nothing
        new = diary.answer(QUESTION, filters={"cutoff": CUTOFF}, top_k=4,
                           options=pgcite.AnswerOptions(token_budget=600, neighbours=0))
        as_dict = diary.answer(QUESTION, filters=pgcite.Filters(cutoff=CUTOFF),
                               options={"top_k": 4, "token_budget": 600, "neighbours": 0})
    with pytest.warns(DeprecationWarning) as caught:
        old = diary.answer(QUESTION, cutoff=CUTOFF, top_k=4, token_budget=600, neighbours=0)
    for other in (as_dict, old):
        assert other.answer == new.answer and other.citations == new.citations
        assert [s.id for s in other.sources] == [s.id for s in new.sources]
        assert other.undated_excluded == new.undated_excluded
    assert new.sources and all(s.date is None or s.date <= CUTOFF.isoformat() for s in new.sources)
    # said once, at this file's line (not in pgcite's replica wrapper), naming where each goes
    assert len(caught) == 1 and caught[0].filename == __file__
    message = str(caught[0].message)
    assert "cutoff in filters=" in message and "token_budget in options=" in message


def test_shorthands_and_old_keywords_go_on_top_of_the_options() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        filters, options = answer_arguments(
            2, None, {"corpora": ["A"]}, {"top_k": 8, "mode": "keyword", "threshold": 0.3},
            {"route": False}, 7, {})
    assert (options.top_k, options.mode, options.threshold) == (2, "keyword", 0.3)
    assert options.stages == {"route": False} and options.snapshot_id == 7
    assert filters.corpora == ["A"] and filters.cutoff is None
    with pytest.warns(DeprecationWarning, match="corpora in filters=, persona in options="):
        filters, options = answer_arguments(
            None, None, {"cutoff": "1666-01-01"}, pgcite.AnswerOptions(persona="X"), None, None,
            {"corpora": ["B"], "persona": "Samuel Pepys", "self_check": {"grade": True}})
    assert filters.cutoff == dt.date(1666, 1, 1) and filters.corpora == ["B"]
    assert options.persona == "Samuel Pepys" and options.self_check.grade


def test_bad_options_are_a_config_error_naming_the_field() -> None:
    with pytest.raises(pgcite.ConfigError, match="token_budget"):
        answer_arguments(None, None, None, {"token_budget": 1}, None, None, {})
    with pytest.raises(pgcite.ConfigError, match="temprature"):
        answer_arguments(None, None, None, {"temprature": 0.2}, None, None, {})
