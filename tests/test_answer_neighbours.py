"""Neighbouring passages as answerer context: ``Collection.answer(neighbours=n)`` gives the
answerer, after each retrieved passage, the passages before and after it in its document --
read from the answer's snapshot under the answer's filters, so a neighbour after the cutoff,
in another corpus, outside a metadata filter or of another snapshot's version is never given,
so never cited. Against the real database, on a fixture of its own (one paragraph per
passage)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

import pgcite
from pgcite.answer import AnswerOptions
from pgcite.answer._pipeline import DEFAULT_NEIGHBOURS
from pgcite.answer._search import SearchFn
from pgcite.retrieve._filters import Filters, MetadataPredicate

VOYAGE = [
    "We set out from Deptford at dawn upon the tide, the wind being fair from the west and "
    "the river full of small boats going down to the fleet.",
    "At noon the captain ordered the silver plate to be hidden from the Dutch privateers, "
    "who had been seen off the coast of Kent for three days together.",
    "So we dug a deep pit behind the chapel and laid in it the plate, the captain's wine and "
    "my Parmesan cheese, and covered all with earth and old straw.",
    "In the evening we supped upon bread and small beer at the inn by the quay, and so to "
    "bed very weary with the day's labour and the heat.",
]
LETTER = [
    "My dear brother, the harvest is come in well this year and the barns are full to the "
    "roof with wheat and barley from the lower fields.",
    "Our mother is in good health and sends her love, and bids you write more often from "
    "London when the business of the office allows it.",
]
QUESTION = "Why did the captain order the silver plate to be hidden?"
CUTOFF = dt.date(1666, 9, 30)


def _write(path: Path, voyage: list[str]) -> Path:
    rows = [
        {"_id": "voyage", "date": "1666-09-02", "corpus": "A", "room": "ship",
         "text": "\n\n".join(voyage)},
        {"_id": "letter", "date": "1666-08-01", "corpus": "B", "room": "home",
         "text": "\n\n".join(LETTER)},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def ship(client: pgcite.Client, tmp_path_factory: pytest.TempPathFactory) -> pgcite.Collection:
    """Two documents cut one paragraph per passage (a small chunk budget)."""
    col = client.create_collection("neighbours_fixture", settings=pgcite.CollectionSettings(
        chunk_tokens=48, contextual="off", entities="off"))
    report = col.ingest([_write(tmp_path_factory.mktemp("ship") / "ship.jsonl", VOYAGE)])
    assert not report.failed and report.activated
    return col


def _ids(col: pgcite.Collection, document: str) -> list[str]:
    """The document's passages in order, as the active snapshot holds them."""
    view = col.view(embedder=False)
    with view.connection() as conn:
        rows = conn.execute(sql.SQL(
            "SELECT c.id FROM {s}.chunks c JOIN {s}.snapshot_members m USING (version_pk)"
            " WHERE m.snapshot_id = %s AND c.document_id = %s ORDER BY c.ordinal").format(
                s=view.info.schema_id), (view.snapshot.snapshot_id, document)).fetchall()
    return [r[0] for r in rows]


def _answer(col: pgcite.Collection, *, neighbours: int | None = None,
            **kw: object) -> pgcite.Answer:
    # top 1 and no abstention: what the answerer gets beside the one retrieved passage is
    # what these tests look at
    options = {"threshold": 0.0, **({} if neighbours is None else {"neighbours": neighbours})}
    return col.answer(QUESTION, top_k=1, options=options, **kw)  # type: ignore[arg-type]


def test_the_fixture_has_one_passage_per_paragraph(ship: pgcite.Collection) -> None:
    assert len(_ids(ship, "voyage")) == len(VOYAGE)
    assert len(_ids(ship, "letter")) == len(LETTER)


def test_neighbours_come_in_after_the_passage_they_are_beside(ship: pgcite.Collection) -> None:
    first, captain, pit, evening = _ids(ship, "voyage")
    alone = _answer(ship, neighbours=0)
    assert [s.id for s in alone.sources] == [captain]
    assert not any(t.step == "neighbours" for t in alone.trace)

    beside = _answer(ship, neighbours=1)
    assert [s.id for s in beside.sources] == [captain, first, pit]
    assert beside.sources[1].score == 0.0 and beside.sources[1].distance is None  # unranked
    assert any(t.step == "neighbours" and t.detail.startswith("2 passage")
               for t in beside.trace)
    assert set(beside.citations) <= {s.id for s in beside.sources}
    wide = _answer(ship, neighbours=2)
    assert [s.id for s in wide.sources] == [captain, first, pit, evening]


def test_a_neighbour_is_ranked_as_the_passage_it_is_beside(ship: pgcite.Collection) -> None:
    """The answerer weighs a sentence by its passage's rank: a neighbour ranked by its place in
    the list pushed the next retrieved passage down (2 -> 3) and changed what was quoted from
    it."""
    first, captain, pit, evening = _ids(ship, "voyage")
    given: list[list[tuple[str, int]]] = []

    class Recorder:
        name = "recorder"

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def generate(self, request: Any) -> str:
            given.append([(p.id, p.rank) for p in request.passages])
            return str(self.inner.generate(request))

    ship.answer(QUESTION, top_k=2, options={"threshold": 0.0, "neighbours": 1},
                wrap_generator=Recorder)
    # retrieved: the captain's passage, then the pit's; each followed by its new neighbour,
    # and the pit's passage still 2nd
    assert given == [[(captain, 1), (first, 1), (pit, 2), (evening, 2)]]


def test_a_neighbour_can_be_quoted_and_cited(ship: pgcite.Collection) -> None:
    """The pit passage answers "what was laid in the pit"; retrieval (here: the search for
    QUESTION, as a search that ranks the wrong passage first) gives only the captain's."""
    _, captain, pit, _ = _ids(ship, "voyage")

    def misranked(search: SearchFn) -> SearchFn:
        def retrieve(query: str, **kw: Any) -> pgcite.SearchResult:
            return search(QUESTION, **kw)
        return retrieve  # type: ignore[return-value]

    asked = "What did they lay in the pit with the plate?"
    alone = ship.answer(asked, top_k=1, wrap_search=misranked, options={"threshold": 0.0, "neighbours": 0})
    assert [s.id for s in alone.sources] == [captain] and pit not in alone.citations
    beside = ship.answer(asked, top_k=1, wrap_search=misranked, options={"threshold": 0.0, "neighbours": 1})
    assert pit in [s.id for s in beside.sources]
    assert pit in beside.citations and "Parmesan" in beside.answer


def test_options_hold_the_one_default(ship: pgcite.Collection) -> None:
    assert AnswerOptions().neighbours == DEFAULT_NEIGHBOURS
    plain = _answer(ship)
    explicit = _answer(ship, neighbours=DEFAULT_NEIGHBOURS)
    assert [s.id for s in plain.sources] == [s.id for s in explicit.sources]
    with pytest.raises(ValueError):
        AnswerOptions(neighbours=-1)


@pytest.fixture
def ship_one_late(client: pgcite.Client, tmp_path: Path) -> Iterator[pgcite.Collection]:
    """The same documents; the pit passage dated after the cutoff, filed in corpus C and
    tagged with another room. Ingest dates, files and tags a whole document, but the store
    keeps them per passage and the neighbour read must filter per passage (an entity filter
    always differs per passage), so the test makes one passage differ."""
    col = client.create_collection("neighbours_late", settings=pgcite.CollectionSettings(
        chunk_tokens=48, contextual="off", entities="off"))
    report = col.ingest([_write(tmp_path / "ship.jsonl", VOYAGE)])
    assert not report.failed and report.activated
    pit = _ids(col, "voyage")[2]
    view = col.view(embedder=False)
    with view.connection() as conn:
        conn.execute(sql.SQL(
            "UPDATE {s}.chunks SET date_start = %s, date_end = %s, corpus = 'C',"
            " metadata = metadata || %s::jsonb WHERE id = %s").format(s=view.info.schema_id),
            (dt.date(1667, 1, 5), dt.date(1667, 1, 5), json.dumps({"room": "hold"}), pit))
    yield col
    client.drop_collection("neighbours_late")


@pytest.mark.parametrize("limit", [
    {"filters": {"cutoff": CUTOFF}}, {"filters": {"corpora": ["A"]}},
    {"filters": {"metadata": [{"key": "room", "op": "eq", "value": "ship"}]}},
], ids=["cutoff", "corpora", "metadata"])
def test_a_neighbour_outside_the_filters_is_never_given_nor_cited(
        ship_one_late: pgcite.Collection, limit: dict[str, object]) -> None:
    first, captain, pit, _ = _ids(ship_one_late, "voyage")
    unfiltered = _answer(ship_one_late, neighbours=1)
    assert pit in [s.id for s in unfiltered.sources]  # the passage is there to be left out
    answer = _answer(ship_one_late, neighbours=1, **limit)
    assert [s.id for s in answer.sources] == [captain, first]
    assert pit not in answer.citations and "Parmesan" not in answer.answer
    for source in answer.sources:
        assert source.date is None or dt.date.fromisoformat(source.date) <= CUTOFF
        assert source.corpus == "A"


def test_the_neighbour_read_applies_every_filter(ship_one_late: pgcite.Collection) -> None:
    view = ship_one_late.view(embedder=False)
    first, captain, pit, evening = _ids(ship_one_late, "voyage")
    every = view.neighbours([captain, pit], n=1)
    assert [h.id for h in every[captain]] == [first, pit]
    assert [h.id for h in every[pit]] == [captain, evening]
    for filters in (Filters(cutoff=CUTOFF), Filters(corpora=["A"]),
                    Filters(metadata=[MetadataPredicate(key="room", op="eq", value="ship")])):
        got = view.neighbours([captain, pit], filters=filters, n=1)
        assert [h.id for h in got[captain]] == [first]
        assert pit not in got  # a target outside the filters has no neighbours either
    assert view.neighbours([captain], filters=Filters(authors=["Nobody"]), n=1) == {}
    assert view.neighbours(["no-such-passage"], n=1) == {}
    assert view.neighbours([captain], n=0) == {}


def test_neighbours_come_from_the_answers_snapshot(client: pgcite.Client,
                                                   tmp_path: Path) -> None:
    """After a re-ingest changes the document, an answer from the old snapshot gets the old
    version's neighbours, and one from the new snapshot the new version's."""
    col = client.create_collection("neighbours_versions", settings=pgcite.CollectionSettings(
        chunk_tokens=48, contextual="off", entities="off"))
    try:
        path = _write(tmp_path / "ship.jsonl", VOYAGE)
        assert col.ingest([path]).activated
        old = col.active_snapshot().snapshot_id
        changed = [*VOYAGE[:2], "So we sank the plate in the millpond by the church, with "
                   "the captain's wine, and marked the place with a white stone.", VOYAGE[3]]
        assert col.ingest([_write(path, changed)]).activated
        new = col.active_snapshot().snapshot_id
        assert new != old
        before = _answer(col, neighbours=1, snapshot_id=old)
        after = _answer(col, neighbours=1)
        assert before.snapshot_id == old and after.snapshot_id == new
        texts_before = " ".join(s.excerpt for s in before.sources)
        texts_after = " ".join(s.excerpt for s in after.sources)
        assert "chapel" in texts_before and "millpond" not in texts_before
        assert "millpond" in texts_after and "chapel" not in texts_after
    finally:
        client.drop_collection("neighbours_versions")


# -- the other surfaces pass the option through ---------------------------------------------------

def test_cli_ask_takes_neighbours(ship: pgcite.Collection, settings: pgcite.Settings,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from pgcite.cli import app

    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)
    first, captain, pit, _ = _ids(ship, "voyage")
    base = ["ask", ship.name, QUESTION, "--top-k", "1", "--threshold", "0", "--json"]
    result = CliRunner().invoke(app, [*base, "--neighbours", "1"])
    assert result.exit_code == 0, result.output
    assert [s["id"] for s in json.loads(result.output)["sources"]] == [captain, first, pit]
    bad = CliRunner().invoke(app, [*base, "--neighbours", "9"])
    assert bad.exit_code != 0 and "Traceback" not in bad.output


def test_http_answer_takes_neighbours(client: pgcite.Client, ship: pgcite.Collection) -> None:
    from tests.test_entities import reader_api

    first, captain, pit, _ = _ids(ship, "voyage")
    url = f"/v1/collections/{ship.name}/answer"
    body = {"question": QUESTION, "top_k": 1, "threshold": 0}
    for api in reader_api(client, ship.name):
        resp = api.post(url, json={**body, "neighbours": 0})  # type: ignore[attr-defined]
        assert resp.status_code == 200, resp.text
        assert [s["id"] for s in resp.json()["sources"]] == [captain]
        # the default: 1 either side
        plain = api.post(url, json=body)  # type: ignore[attr-defined]
        assert [s["id"] for s in plain.json()["sources"]] == [captain, first, pit]
        assert api.post(url, json={**body, "neighbours": 9}).status_code == 422  # type: ignore[attr-defined]


def test_mcp_answer_takes_neighbours(client: pgcite.Client, ship: pgcite.Collection) -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    import asyncio

    from mcp import Client

    from pgcite.mcp import build_server, open_access

    server = build_server(lambda ctx: open_access(client, None))
    first, captain, pit, _ = _ids(ship, "voyage")

    async def main() -> dict[str, Any]:
        async with Client(server) as session:
            result = await session.call_tool("answer", {
                "collection": ship.name, "question": QUESTION, "top_k": 1, "neighbours": 1})
        assert not result.is_error, result.content  # type: ignore[attr-defined]
        return result.structured_content  # type: ignore[attr-defined,no-any-return]

    data = asyncio.run(main())
    assert set(data["citations"]) <= {captain, first, pit}
    assert [s["citation_id"] for s in data["sources"]] == [captain, first, pit]
