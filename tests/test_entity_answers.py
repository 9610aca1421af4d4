"""Entity questions answered from the graph: who/where/how-often questions get the people or
places named with the question's entity, each with citation ids of passages that name both --
read from the answer's snapshot under its filters (never a passage after the cutoff) -- over
Python, the CLI, HTTP and MCP; and ``entity_facts=False`` leaves the answer as it was."""

from __future__ import annotations

import json

import pytest
from psycopg import sql

import pgcite
from pgcite.retrieve._entities import query_candidates, recognise
from pgcite.retrieve._filters import Filters
from pgcite.retrieve._route import entity_ask, entity_question
from tests.test_entities import _has_model

CUTOFF = "1666-12-31"
DOCS = [
    {"_id": "e-1660", "date": "1660-03-01",
     "text": "Up, and to the office, where I dined with Sir W. Pen and Sir W. Batten, and after "
             "dinner to Deptford by water."},
    {"_id": "e-1661", "date": "1661-05-10",
     "text": "This morning Sir William Penn and I walked to Deptford, and there met Mr. "
             "Coventry upon business of the Navy."},
    {"_id": "e-1662", "date": "1662-05-02",
     "text": "This day Mr. May dined with Sir W. Batten and me at the Dolphin, and after "
             "dinner to Deptford."},
    {"_id": "e-1663", "date": "1663-08-14",
     "text": "Up, and with Sir W. Batten and Mr. Coventry to Whitehall, where we met the "
             "Duke of York."},
    {"_id": "e-1665", "date": "1665-07-01",
     "text": "To Woolwich with Sir W. Batten, where we viewed the rope-yard and dined at the "
             "King's Head."},
    {"_id": "e-1667", "date": "1667-06-20",
     "text": "Sir W. Penn and Sir W. Batten and I to Chatham by coach, and there met "
             "Commissioner Pett about the Dutch."},
    {"_id": "e-lute", "date": "1662-01-01",
     "text": "Played upon my lute alone all the evening, and so to bed."},
]
AFTER_CUTOFF = {"e-1667"}
WHO = "Who was with Sir W. Batten?"
needs_model = pytest.mark.skipif(not _has_model(), reason="no English spaCy pipeline installed")


def _doc(citation: str) -> str:
    return citation.rsplit("-", 1)[0]


# -- the question side (no model, no database) ---------------------------------------------------

@pytest.mark.parametrize(("question", "ask"), [
    ("Who was with Sir W. Batten?", "who"), ("With whom did Pepys dine?", "who"),
    ("whose coach was it", "who"), ("Where did Pepys meet the Duke?", "where"),
    ("How often did Pepys see Sir W. Penn?", "how often"),
    ("How many times was he at Deptford?", "how often"),
    ("How many ships were lost?", None), ("What did Pepys eat?", None), ("", None),
])
def test_entity_ask_reads_who_where_and_how_often(question: str, ask: str | None) -> None:
    assert entity_ask(question) == ask
    if ask is not None:  # the router boosts them all
        assert entity_question(question) == f"asks {ask}"


def test_month_and_weekday_names_are_no_query_entities() -> None:
    keys = query_candidates("Who dined with Sir W. Batten in May 1662?")
    assert "w batten" in keys and "may" not in keys
    assert not {"june", "monday"} & set(query_candidates("Who came on Monday, June 3?"))
    assert "may" not in query_candidates("who dined with batten in may")
    # after a title the word is a name again
    assert "may" in query_candidates("Who dined with Mr. May?")


# -- on a collection with entities ---------------------------------------------------------------

@pytest.fixture(scope="module")
def navy(client: pgcite.Client,
         tmp_path_factory: pytest.TempPathFactory) -> pgcite.Collection:
    if not _has_model():
        pytest.skip("no English spaCy pipeline installed: pip install 'pgcite[entities]'")
    folder = tmp_path_factory.mktemp("navy_answers")
    path = folder / "navy.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    aliases = folder / "aliases.yaml"
    aliases.write_text("Sir William Penn: [Sir W. Pen]\n")
    client.drop_collection("entity_answers", missing_ok=True)
    col = client.create_collection("entity_answers")
    assert col.ingest([path], aliases=aliases).activated
    return col


def _entities_of(col: pgcite.Collection, citation: str) -> set[str]:
    """The canonical keys the stored entities of the passage ``citation`` resolve to."""
    with col.client.connection() as conn:
        rows = conn.execute(sql.SQL(
            "SELECT coalesce(a.canonical, ce.key) FROM {s}.chunks c"
            " JOIN {s}.chunk_entities ce USING (chunk_pk)"
            " LEFT JOIN {s}.entity_aliases a ON a.alias = ce.key WHERE c.id = %s").format(
                s=col.info.schema_id), (citation,)).fetchall()
    return {r[0] for r in rows}


@needs_model
def test_a_month_name_in_the_question_is_not_its_entity(navy: pgcite.Collection) -> None:
    view = navy.view()
    with navy.client.connection() as conn:  # "may" is stored: Mr. May is a person here
        named = recognise(conn, view.info, view.snapshot, "Who dined with Mr. May?", Filters())
        dated = recognise(conn, view.info, view.snapshot,
                          "Who dined with Sir W. Batten in May?", Filters())
    assert [e.key for e in named] == ["may"]
    with navy.client.connection() as conn:  # two names sharing an initial are both found
        both = recognise(conn, view.info, view.snapshot,
                         "How often was Sir W. Penn with Sir W. Batten?", Filters())
    assert [e.key for e in both] == ["william penn", "w batten"]
    # so Mr. May is among those named with Batten, not taken for the question's entity
    evidence = view.entity_evidence("Who dined with Sir W. Batten in May?")
    assert evidence is not None and evidence.anchor.key == "w batten"
    assert "may" in {e.key for e in evidence.entities}
    assert [e.key for e in dated] == ["w batten"]


@needs_model
def test_evidence_ranks_the_asked_kind_and_holds_the_cutoff(navy: pgcite.Collection) -> None:
    view = navy.view()
    cut = view.entity_evidence(WHO, filters=Filters(cutoff=CUTOFF), citations=5)
    assert cut is not None and cut.ask == "who" and cut.anchor.key == "w batten"
    people = {e.key: e for e in cut.entities}
    assert people and all(e.label in ("PERSON", "PER") for e in cut.entities)
    assert "w batten" not in people and "pett" not in people  # only 1667 names Pett
    assert people["coventry"].chunks == 1 and people["coventry"].citations == ["e-1663-a"]
    assert {h.id for h in cut.passages} == {c for e in cut.entities for c in e.citations}
    for passage in cut.passages:  # never after the cutoff, and every one names both
        assert passage.date_end is not None and passage.date_end.isoformat() <= CUTOFF
    for entity in cut.entities:
        for citation in entity.citations:
            assert {"w batten", entity.key} <= _entities_of(navy, citation)
    every = view.entity_evidence(WHO)  # the filter, not the data, kept 1667 out
    assert every is not None and "pett" in {e.key for e in every.entities}
    assert "e-1667" in {_doc(h.id) for h in every.passages}
    # the same filters as a search: a corpus nothing is in sees no entity at all
    assert view.entity_evidence(WHO, filters=Filters(corpora=["Z"])) is None
    assert view.entity_evidence("What did Sir W. Batten eat?") is None  # not an entity ask


@needs_model
def test_evidence_cites_the_preferred_passages_first(navy: pgcite.Collection) -> None:
    view = navy.view()
    oldest = view.entity_evidence(WHO, citations=1)
    assert oldest is not None
    penn = next(e for e in oldest.entities if e.key == "william penn")
    assert penn.chunks == 2 and penn.citations == ["e-1660-a"]  # oldest first by default
    preferred = view.entity_evidence(WHO, citations=1, prefer=["e-lute-a", "e-1667-a"])
    assert preferred is not None
    assert next(e for e in preferred.entities
                if e.key == "william penn").citations == ["e-1667-a"]
    where = view.entity_evidence("Where did Sir W. Batten go?")
    assert where is not None and where.ask == "where"
    assert {e.key for e in where.entities} == {"king head", "chatham"}  # FAC, GPE: places


@needs_model
def test_how_often_counts_one_entity_or_two_together(navy: pgcite.Collection) -> None:
    view = navy.view()
    pair = view.entity_evidence("How often was Sir W. Penn with Sir W. Batten?",
                                filters=Filters(cutoff=CUTOFF))
    assert pair is not None and pair.ask == "how often"
    assert [(e.key, e.chunks) for e in pair.entities] == [("w batten", 1)]
    assert [_doc(h.id) for h in pair.passages] == ["e-1660"]
    alone = view.entity_evidence("How often did Pepys see Sir W. Batten?")
    assert alone is not None and alone.entities == [alone.anchor] and alone.anchor.chunks == 5
    assert set(alone.anchor.citations) <= {h.id for h in alone.passages}
