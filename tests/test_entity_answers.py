"""Entity questions answered from the graph: who/where/how-often questions get the people or
places named with the question's entity, each with citation ids of passages that name both --
read from the answer's snapshot under its filters (never a passage after the cutoff) -- over
Python, the CLI, HTTP and MCP; and ``entity_facts=False`` leaves the answer as it was."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from psycopg import sql

import pgcite
from pgcite.retrieve._entities import query_candidates, recognise
from pgcite.retrieve._filters import Filters, MetadataPredicate
from pgcite.retrieve._route import entity_ask, entity_question
from tests.test_entities import _has_model, reader_api

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
    {"_id": "e-1663", "date": "1663-08-14", "room": "court",
     "text": "Up, and with Sir W. Batten and Mr. Coventry to Whitehall, where we met the "
             "Duke of York."},
    {"_id": "e-1664", "date": "1664-03-05", "room": "office",
     "text": "At the office all the morning with Sir W. Batten and Mr. Coventry about the "
             "victualling of the fleet."},
    {"_id": "e-1666", "date": "1666-02-10",
     "text": "Sir W. Batten and Mr. Coventry and I by barge to Woolwich to see the new ship."},
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
    assert [e.key for e in dated] == ["w batten"]
    # so Mr. May is among those named with Batten, not taken for the question's entity
    evidence = view.entity_evidence("Who dined with Sir W. Batten in May?")
    assert evidence is not None and evidence.anchor.key == "w batten"
    assert "may" in {e.key for e in evidence.entities}


@needs_model
def test_evidence_ranks_the_asked_kind_and_holds_the_cutoff(navy: pgcite.Collection) -> None:
    view = navy.view()
    cut = view.entity_evidence(WHO, filters=Filters(cutoff=CUTOFF), citations=5)
    assert cut is not None and cut.ask == "who" and cut.anchor.key == "w batten"
    people = {e.key: e for e in cut.entities}
    assert people and all(e.label in ("PERSON", "PER") for e in cut.entities)
    assert "w batten" not in people and "pett" not in people  # only 1667 names Pett
    assert people["coventry"].chunks == 3
    assert people["coventry"].citations == ["e-1663-a", "e-1664-a", "e-1666-a"]  # oldest first
    assert {h.id for h in cut.passages} == {c for e in cut.entities for c in e.citations}
    for passage in cut.passages:  # never after the cutoff, and every one names both
        assert passage.date_end is not None and passage.date_end.isoformat() <= CUTOFF
    for entity in cut.entities:
        for citation in entity.citations:
            assert {"w batten", entity.key} <= _entities_of(navy, citation)
    every = view.entity_evidence(WHO)  # the filter, not the data, kept 1667 out
    assert every is not None and "pett" in {e.key for e in every.entities}
    assert "e-1667" in {_doc(h.id) for h in every.passages}
    # the same filters as a search: a corpus nothing is in sees no entity at all, and a
    # metadata predicate keeps only its passages
    assert view.entity_evidence(WHO, filters=Filters(corpora=["Z"])) is None
    court = view.entity_evidence(WHO, filters=Filters(metadata=[
        MetadataPredicate(key="room", value="court")]))
    assert court is not None and {h.id for h in court.passages} == {"e-1663-a"}
    assert [(e.key, e.chunks) for e in court.entities] == [("coventry", 1)]
    search = navy.search(WHO, filters={"metadata": [{"key": "room", "value": "court"}]})
    assert {h.id for h in search.hits} == {"e-1663-a"}  # what the search sees, too
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
    assert {e.key for e in where.entities} == {"woolwich", "king head", "chatham"}  # GPE, FAC


@needs_model
def test_how_often_counts_one_entity_or_two_together(navy: pgcite.Collection) -> None:
    view = navy.view()
    pair = view.entity_evidence("How often was Sir W. Penn with Sir W. Batten?",
                                filters=Filters(cutoff=CUTOFF))
    assert pair is not None and pair.ask == "how often"
    assert [(e.key, e.chunks) for e in pair.entities] == [("w batten", 1)]
    assert [_doc(h.id) for h in pair.passages] == ["e-1660"]
    alone = view.entity_evidence("How often did Pepys see Sir W. Batten?")
    assert alone is not None and alone.entities == [alone.anchor] and alone.anchor.chunks == 7
    assert set(alone.anchor.citations) <= {h.id for h in alone.passages}


@needs_model
def test_the_answer_states_graph_facts_citing_passages_that_name_both(
        navy: pgcite.Collection) -> None:
    answer = navy.answer(WHO, filters={"cutoff": CUTOFF}, options={"threshold": 0.0})
    assert not answer.abstained and answer.entities
    assert answer.answer.startswith("People named with W. Batten: ")
    sources = {s.id for s in answer.sources}
    assert set(answer.citations) <= sources
    assert not {_doc(s) for s in sources} & AFTER_CUTOFF
    for fact in answer.entities:
        assert fact.ask == "who" and fact.anchor == "W. Batten" and fact.citations
        assert fact.name in answer.answer
        for citation in fact.citations:
            assert citation in answer.citations and f"[{citation}]" in answer.answer
            assert {"w batten", fact.key} <= _entities_of(navy, citation)
    assert any(t.step == "entities" for t in answer.trace)
    # off: no facts, and the rest of the answer exactly as with them
    plain = navy.answer(WHO, filters={"cutoff": CUTOFF}, options={"threshold": 0.0, "entity_facts": False})
    assert plain.entities == [] and not plain.abstained
    assert answer.answer.endswith(plain.answer)
    assert "People named with" not in plain.answer
    fact_text = answer.answer[: len(answer.answer) - len(plain.answer)]
    assert re.fullmatch(r"People named with W\. Batten: .+\. ", fact_text)


@needs_model
def test_only_facts_that_aggregate_passages_are_stated(navy: pgcite.Collection) -> None:
    from pgcite.answer._facts import MIN_EACH, MIN_TOP

    answer = navy.answer(WHO, options={"threshold": 0.0})
    assert answer.entities and answer.entities[0].passages >= MIN_TOP
    assert all(f.passages >= MIN_EACH for f in answer.entities)
    evidence = navy.view().entity_evidence(WHO)
    assert evidence is not None and "may" in {e.key for e in evidence.entities}
    assert "may" not in {f.key for f in answer.entities}  # one passage: the quotes carry it
    # the people named with Mr. May are each named with him once: nothing to aggregate
    few = navy.answer("Who dined with Mr. May?", options={"threshold": 0.0})
    assert not few.abstained and few.entities == []
    # how often: the count is the answer (of a person or a place) ...
    often = navy.answer("How often did Pepys see Sir W. Batten?", options={"threshold": 0.0})
    assert [(f.key, f.passages) for f in often.entities] == [("w batten", 7)]
    assert often.answer.startswith("W. Batten is named in 7 passages [")
    # ... of how often someone is there, not of how often something happened
    won = navy.answer("How many times did Sir W. Batten win a prize?", options={"threshold": 0.0})
    assert navy.view().entity_evidence("How many times did Sir W. Batten win a prize?") is not None
    assert not won.abstained and won.entities == [] and "is named in" not in won.answer
    # ... but not of an organisation ("the Navy" is no one to see)
    navy_often = navy.view().entity_evidence("How often is the Navy named?")
    assert navy_often is not None and navy_often.anchor.label == "ORG"
    assert navy.answer("How often is the Navy named?", options={"threshold": 0.0}).entities == []


@needs_model
def test_other_questions_and_abstentions_state_no_facts(navy: pgcite.Collection) -> None:
    other = navy.answer("What did Sir W. Batten view at Woolwich?", options={"threshold": 0.0})
    assert other.entities == [] and "named with" not in other.answer
    refused = navy.answer(WHO, options={"threshold": 0.99})  # abstains before any fact is looked up
    assert refused.abstained and refused.entities == [] and refused.citations == []


@needs_model
def test_a_streamed_answer_gets_its_facts_in_the_final_event(navy: pgcite.Collection) -> None:
    from pgcite._streaming import Delta, Final, stream_answer

    events = list(stream_answer(navy, WHO, filters={"cutoff": CUTOFF}, options={"threshold": 0.0}))
    final = events[-1]
    assert isinstance(final, Final) and final.answer.entities
    streamed = "".join(e.text for e in events if isinstance(e, Delta))
    # the quotes stream as they are written; the facts come with the checked answer, so the
    # client is told to show the final text
    assert "named with" not in streamed and final.replaced
    assert final.answer.answer.endswith(streamed.strip()) and final.removed_citations == []


# -- the same over the CLI, HTTP and MCP ---------------------------------------------------------

@needs_model
def test_cli_ask_json_has_the_entities(navy: pgcite.Collection, settings: pgcite.Settings,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from pgcite.cli import app

    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)
    base = ["ask", navy.name, WHO, "--cutoff", CUTOFF, "--threshold", "0", "--json"]
    result = CliRunner().invoke(app, base)
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["entities"] and {"ask", "anchor", "name", "key", "label", "passages",
                                 "citations"} <= set(body["entities"][0])
    cited = {c for e in body["entities"] for c in e["citations"]}
    assert cited <= set(body["citations"]) and not {_doc(c) for c in cited} & AFTER_CUTOFF
    off = CliRunner().invoke(app, [*base, "--no-entity-facts"])
    assert off.exit_code == 0, off.output
    assert json.loads(off.output)["entities"] == []


@pytest.fixture(scope="module")
def api(client: pgcite.Client, navy: pgcite.Collection) -> Iterator[object]:
    yield from reader_api(client, navy.name)


@needs_model
def test_http_answer_has_the_entities(api: object) -> None:
    from fastapi.testclient import TestClient

    assert isinstance(api, TestClient)
    url = "/v1/collections/entity_answers/answer"
    body = {"question": WHO, "cutoff": CUTOFF, "threshold": 0}
    resp = api.post(url, json=body)
    assert resp.status_code == 200, resp.text
    facts = resp.json()["entities"]
    assert facts and all(f["citations"] for f in facts)
    cited = {c for f in facts for c in f["citations"]}
    assert cited <= set(resp.json()["citations"]) and not {_doc(c) for c in cited} & AFTER_CUTOFF
    off = api.post(url, json={**body, "entity_facts": False})
    assert off.status_code == 200, off.text
    assert off.json()["entities"] == [] and "named with" not in off.json()["answer"]


@needs_model
def test_mcp_answer_tool_has_the_entities(client: pgcite.Client,
                                          navy: pgcite.Collection) -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    import asyncio

    from mcp import Client

    from pgcite.mcp import build_server, open_access

    server = build_server(lambda ctx: open_access(client, None))

    async def main(**extra: object) -> dict[str, object]:
        async with Client(server) as session:
            result = await session.call_tool("answer", {
                "collection": navy.name, "question": WHO, "cutoff": CUTOFF, **extra})
        assert not result.is_error, result.content  # type: ignore[attr-defined]
        return result.structured_content  # type: ignore[attr-defined,no-any-return]

    data = asyncio.run(main())
    facts = data["entities"]
    assert isinstance(facts, list) and facts
    cited = {c for f in facts for c in f["citations"]}
    assert cited <= set(data["citations"])  # type: ignore[arg-type]
    assert not {_doc(c) for c in cited} & AFTER_CUTOFF
    assert asyncio.run(main(entity_facts=False))["entities"] == []


@pytest.mark.parametrize(("question", "presence"), [
    ("How often did Pepys see Sir W. Batten?", True),
    ("How many times was he at Deptford?", True),
    ("How many times is Mrs. Knipp mentioned?", True),
    ("How often was Sir W. Penn with Sir W. Batten?", True),
    ("How many times has Polonia won the cup?", False),
    ("How many times did plague occur in Venice?", False),
    ("How often does Doctor Who travel by himself?", False),
])
def test_a_count_of_passages_answers_only_how_often_someone_is_there(
        question: str, presence: bool) -> None:
    from pgcite.answer._facts import asks_presence

    assert asks_presence(question) is presence
