"""Snippets marked in Python (pgcite/retrieve/_marks.py): the words a built-in text-search
config reads as the query's lexemes, as PostgreSQL's ts_headline marks them, in a window of
at most MAX_WORDS words; a config made in the database is marked by the database."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import pgcite
from pgcite.retrieve._marks import (
    DELIMITER,
    MAX_WORDS,
    MIN_WORDS,
    mark_passages,
    stemmer_for,
    words_in,
)
from pgcite.retrieve._snippets import unmark

FILLER = ("Up early and to the office, where all the morning busy with accounts and letters "
          "to my Lord and the Duke. ") * 6
CHEESE = "At night the fires still burned, and I buried my Parmazan cheese in the garden."
ENGLISH = [
    FILLER + CHEESE,
    "The studies of happily married couples: a study that happened by accident, studying "
    "how happiness and the fire-fighters' firing of the fires relates to burying.",
    "Nothing here is asked for at all.",
]
ARABIC = [
    "سجل الفريق هدفاً متأخراً، وكان اعتراضاً قوياً على الحكم في المباراة النهائية.",
    "كتب الكاتب كتاباً عن المكتبة والكتب القديمة.",
]


def marked_words(snippet: str, highlights: list[tuple[int, int]]) -> list[str]:
    return [snippet[a:b] for a, b in highlights]


def test_the_window_holds_the_matches_and_marks_each() -> None:
    stem = stemmer_for("english")
    assert stem is not None
    (one,) = mark_passages([FILLER + CHEESE], ["fire", "buri", "chees"], stem)
    assert marked_words(one.snippet, one.highlights) == ["fires", "buried", "cheese"]
    assert "Parmazan cheese in the garden" in one.snippet
    # the text ends after the matches, so the window's words are taken before them
    assert len(words_in(one.snippet)) == MAX_WORDS


def test_two_distant_runs_of_matches_are_two_fragments() -> None:
    stem = stemmer_for("english")
    assert stem is not None
    body = "The fire began in Pudding Lane. " + FILLER * 2 + CHEESE
    (one,) = mark_passages([body], ["fire", "chees", "lane"], stem)
    fragments = one.snippet.split(DELIMITER)
    assert len(fragments) == 2 and all(len(words_in(f)) <= MAX_WORDS for f in fragments)
    assert fragments[0].startswith("The fire began in Pudding Lane")
    assert marked_words(one.snippet, one.highlights) == ["fire", "Lane", "fires", "cheese"]


def test_a_passage_without_a_match_gives_its_opening_words() -> None:
    stem = stemmer_for("english")
    assert stem is not None
    (one,) = mark_passages([FILLER], ["chees"], stem)
    assert one.highlights == [] and len(words_in(one.snippet)) == MIN_WORDS
    assert FILLER.startswith(one.snippet)


def test_offsets_hold_where_lowercasing_lengthens_a_character() -> None:
    stem = stemmer_for("simple")
    assert stem is not None
    (one,) = mark_passages(["İstanbul burned; the fire in İzmir."], ["fire", "burned"], stem)
    assert marked_words(one.snippet, one.highlights) == ["burned", "fire"]


def test_any_space_or_punctuation_ends_a_word() -> None:
    stem = stemmer_for("english")
    assert stem is not None
    (one,) = mark_passages(["fire\u00a0escape, «fires»; fire—fires…"], ["fire"], stem)
    assert marked_words(one.snippet, one.highlights) == ["fire", "fires", "fire", "fires"]


def test_a_config_made_in_the_database_has_no_python_twin() -> None:
    assert stemmer_for("pgcite_custom") is None and stemmer_for("porter") is None
    assert stemmer_for("pg_catalog.english") is not None and stemmer_for("arabic") is not None


@pytest.mark.parametrize(("config", "bodies", "query"), [
    ("english", ENGLISH, "Did the fires burn while he buried cheese? A happy study"),
    ("simple", ENGLISH, "fires buried cheese study"),
    ("arabic", ARABIC, "اعتراض الفريق على الحكم والكتاب"),
])
def test_python_marks_the_words_postgresql_marks(client: pgcite.Client, config: str,
                                                 bodies: list[str], query: str) -> None:
    """The same words as ts_headline with HighlightAll (the whole passage), counted: Python's
    stemmer is PostgreSQL's Snowball, and a word keeps its combining marks (Arabic tanween)."""
    with client.connection() as conn:
        lexemes = [r[0] for r in conn.execute(
            "SELECT lexeme FROM unnest(to_tsvector(%s::regconfig, %s))", (config, query))]
        rows = conn.execute(
            "SELECT ts_headline(%(cfg)s::regconfig, b, %(q)s::tsquery, 'StartSel=\ue000,"
            " StopSel=\ue001, HighlightAll=true') FROM unnest(%(bodies)s::text[]) b",
            {"cfg": config, "q": " | ".join(f"'{x}'" for x in lexemes),
             "bodies": bodies}).fetchall()
    stem = stemmer_for(config)
    assert stem is not None and lexemes
    marked = 0
    for body, (database,) in zip(bodies, rows, strict=True):
        text, spans = unmark(database)
        theirs = Counter(text[a:b] for a, b in spans)
        (mine,) = mark_passages([body], lexemes, stem)
        ours = Counter(marked_words(mine.snippet, mine.highlights))
        if len(words_in(body)) <= MAX_WORDS:  # the window is the whole passage
            assert ours == theirs, body
        else:
            assert set(ours) <= set(theirs), body
        marked += sum(ours.values())
    assert marked >= len(bodies) - 1  # every passage but ENGLISH's last has its matches


def test_a_config_made_in_the_database_is_marked_by_the_database(
        client: pgcite.Client, tmp_path: Path) -> None:
    with client.db.transaction() as conn:
        conn.execute("DROP TEXT SEARCH CONFIGURATION IF EXISTS pgcite_marks_custom")
        conn.execute("CREATE TEXT SEARCH CONFIGURATION pgcite_marks_custom (COPY = english)")
    source = tmp_path / "one.jsonl"
    source.write_text(json.dumps({"_id": "c-1", "text": FILLER + CHEESE}) + "\n")
    col = client.create_collection("marks_custom", language="pgcite_marks_custom")
    try:
        assert col.ingest([source]).activated
        hit = col.search("fires and cheese", top_k=1).hits[0]
        assert {w.lower() for w in marked_words(hit.snippet or "", hit.highlights)} == {
            "fires", "cheese"}
        assert "snippets" in col.search("fires and cheese", top_k=1).timings_ms
    finally:
        client.drop_collection("marks_custom")
        with client.db.transaction() as conn:
            conn.execute("DROP TEXT SEARCH CONFIGURATION IF EXISTS pgcite_marks_custom")
