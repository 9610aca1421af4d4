"""Exhibits against the real server: defined and versioned on a collection, answered under their
settings only, a visitor key refused everywhere outside its exhibit (HTTP here, MCP in
test_exhibits_mcp.py), citations opened in their document under the exhibit's cutoff (no later
neighbour, no later page), and a citation link that stays true across later ingests."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import pgcite
from pgcite._types import Document, Unit
from pgcite.embed._registry import embedder_for
from pgcite.ingest._chunking import chunk_document
from pgcite.service import ServiceConfig, create_app, create_key
from pgcite.store._snapshots import (
    activate_snapshot,
    active_snapshot,
    build_snapshot,
    insert_version,
    plan_snapshot,
)
from pgcite.ui import mount_ui

from .conftest import DIARY

NAME = "exhibit_fixture"
CUTOFF = "1666-12-31"
PEPYS = pgcite.ExhibitSettings(
    persona="Samuel Pepys", cutoff=CUTOFF, corpora=["A", "B"],
    greeting="Good day. Ask me about London in the 1660s.",
    questions=["What did you bury in the garden?", "Where did the fire begin?"],
    abstention_text="I did not write about that.")


@pytest.fixture(scope="module")
def col(client: pgcite.Client) -> pgcite.Collection:
    """The diary fixture in a collection of its own (this module ingests into it), with a
    letter-book whose passages span the cutoff: one document, dated units on both sides."""
    client.drop_collection(NAME, missing_ok=True)
    col = client.create_collection(NAME)
    assert col.ingest([DIARY]).activated
    add_document(client, col, Document(
        document_id="letter-book", source="letter-book.txt", title="Letter-book",
        author="Samuel Pepys", corpus="A", units=[
            Unit(text=f"Letter {i}: to my Lord about the {topic} at the Navy Office.",
                 locator=f"letter {i}", date_start=day, date_end=day)
            for i, (topic, day) in enumerate([
                ("victualling accounts", _d("1666-11-02")),
                ("pursers and their accounts", _d("1666-12-20")),
                ("victualling of the fleet", _d("1667-02-10")),
            ], start=1)]))
    return col


def _d(text: str) -> Any:
    import datetime as dt
    return dt.date.fromisoformat(text)


def add_document(client: pgcite.Client, col: pgcite.Collection, doc: Document) -> int:
    """``doc`` stored as a new version and made live in a new snapshot: no loader makes a
    document whose units carry different dates, which is what a neighbour after a cutoff
    needs."""
    embedder = embedder_for(col.info.embedder, client.settings)
    chunks = chunk_document(doc, count_tokens=embedder.count_tokens, max_tokens=350)
    vectors = embedder.embed_documents([c.body for c in chunks])
    with client.db.transaction() as conn:
        pk = insert_version(conn, col.info, document_id=doc.document_id,
                            content_hash=f"test-{doc.document_id}", source=doc.source,
                            chunks=chunks, vectors=vectors, spec=col.info.embedder,
                            corpus_version=None)
        active = active_snapshot(conn, col.info)
        assert active is not None
        plan = plan_snapshot(conn, col.info, [pk], spec=col.info.embedder,
                             content_id=active.snapshot_id)  # the active one, doc replaced
        snapshot = build_snapshot(conn, col.info, plan, spec=col.info.embedder)
        activate_snapshot(conn, col.info, snapshot, forced=True)
    client.active_pointers().invalidate(col.name)
    return snapshot


@pytest.fixture(scope="module")
def exhibit(col: pgcite.Collection) -> pgcite.Exhibit:
    return pgcite.Exhibit.create(col, "pepys-1666", PEPYS, replace=True)


@pytest.fixture(scope="module")
def api(client: pgcite.Client, col: pgcite.Collection) -> Iterator[TestClient]:
    app = create_app(client=client, config=ServiceConfig(warm_up=False))
    mount_ui(app)
    with TestClient(app) as test_client:
        yield test_client


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def keys(client: pgcite.Client, col: pgcite.Collection,
         exhibit: pgcite.Exhibit) -> dict[str, dict[str, str]]:
    with client.db.transaction() as conn:
        return {role: _bearer(create_key(conn, col.name, role).token)
                for role in ("reader", "admin")}


@pytest.fixture(scope="module")
def visitor(api: TestClient, keys: dict[str, dict[str, str]],
            exhibit: pgcite.Exhibit) -> dict[str, str]:
    resp = api.post(f"/v1/collections/{NAME}/exhibits/{exhibit.name}/keys",
                    headers=keys["admin"], json={"note": "kiosk 1"})
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert body["key"]["role"] == "visitor" and body["key"]["exhibit"] == exhibit.name
    return _bearer(body["token"])


# --- definitions -----------------------------------------------------------------------------


def test_an_exhibit_is_versioned_with_its_collection(
    client: pgcite.Client, col: pgcite.Collection, exhibit: pgcite.Exhibit,
) -> None:
    assert exhibit.info.collection == NAME and exhibit.settings.cutoff == _d(CUTOFF)
    again = pgcite.Exhibit.create(col, "pepys-1666", PEPYS.model_copy(
        update={"greeting": "Welcome."}), replace=True)
    assert again.info.version == exhibit.info.version + 1
    opened = pgcite.Exhibit.open(client, "pepys-1666")  # by name alone
    assert opened.info.version == again.info.version and opened.settings.greeting == "Welcome."
    assert [e.name for e in pgcite.Exhibit.list(col)] == ["pepys-1666"]
    with pytest.raises(pgcite.ExhibitExists):
        pgcite.Exhibit.create(col, "pepys-1666", PEPYS)  # not without replace
    pgcite.Exhibit.create(col, "pepys-1666", PEPYS, replace=True)  # as the fixture left it


def test_bad_settings_are_refused_clearly(col: pgcite.Collection) -> None:
    with pytest.raises(pgcite.ConfigError, match="invalid exhibit name"):
        pgcite.Exhibit.create(col, "Bad Name", PEPYS)
    with pytest.raises(ValueError, match="square brackets"):
        pgcite.ExhibitSettings(abstention_text="I [never] wrote that")
    with pytest.raises(ValueError, match="BCP 47"):
        pgcite.ExhibitSettings(language="Arabic!")
    assert pgcite.ExhibitSettings(language="ar").resolved_direction() == "rtl"
    assert pgcite.ExhibitSettings(language="ar", direction="ltr").resolved_direction() == "ltr"


def test_a_name_is_unique_across_collections(client: pgcite.Client, col: pgcite.Collection,
                                             exhibit: pgcite.Exhibit, diary: Any) -> None:
    with pytest.raises(pgcite.ExhibitExists, match="is defined on collection"):
        pgcite.Exhibit.create(diary, exhibit.name, PEPYS, replace=True)


def test_definitions_over_http(api: TestClient, keys: dict[str, dict[str, str]],
                               exhibit: pgcite.Exhibit) -> None:
    base = f"/v1/collections/{NAME}/exhibits"
    listed = api.get(base, headers=keys["reader"])
    assert listed.status_code == 200 and [e["name"] for e in listed.json()] == [exhibit.name]
    body = PEPYS.model_dump(mode="json", exclude_defaults=True)
    assert api.put(f"{base}/x-tmp", headers=keys["reader"], json=body).status_code == 403
    made = api.put(f"{base}/x-tmp", headers=keys["admin"], json=body)
    assert made.status_code == 200 and made.json()["version"] == 1
    bad = api.put(f"{base}/x-tmp", headers=keys["admin"], json={**body, "cutoff": "soon"})
    assert bad.status_code == 422
    assert api.get(f"{base}/x-tmp", headers=keys["reader"]).json()["settings"]["persona"] \
        == "Samuel Pepys"
    assert api.delete(f"{base}/x-tmp", headers=keys["admin"]).status_code == 200
    assert api.get(f"{base}/x-tmp", headers=keys["reader"]).status_code == 404
    assert api.get("/v1/exhibits/x-tmp", headers=keys["reader"]).status_code == 404


# --- the visitor's requests ------------------------------------------------------------------


def test_a_visitor_asks_under_the_exhibits_settings(
    api: TestClient, visitor: dict[str, str], col: pgcite.Collection,
) -> None:
    shown = api.get("/v1/exhibits/pepys-1666", headers=visitor).json()
    assert shown["title"] == "Samuel Pepys" and shown["direction"] == "ltr"
    assert shown["questions"] == PEPYS.questions
    resp = api.post("/v1/exhibits/pepys-1666/answer", headers=visitor,
                    json={"question": "Where did the great fire begin?"})
    assert resp.status_code == 200, resp.text
    answer = resp.json()
    assert not answer["abstained"] and answer["citations"]
    assert all(s["date"] and s["date"] <= CUTOFF and s["corpus"] in ("A", "B")
               for s in answer["sources"])
    assert "I wrote" in answer["answer"]  # her own words, in the first person
    # a question only a later passage answers: nothing after the cutoff comes back
    late = api.post("/v1/exhibits/pepys-1666/answer", headers=visitor,
                    json={"question": "Macbeth at the theatre, a most excellent play"}).json()
    assert all(s["date"] and s["date"] <= CUTOFF for s in late["sources"])
    unguarded = col.answer("Macbeth at the theatre, a most excellent play")
    assert any(s.date and s.date > CUTOFF for s in unguarded.sources)  # the test can fail


@pytest.mark.parametrize("extra", [
    {"cutoff": "1700-01-01"}, {"corpora": ["C"]}, {"snapshot": 1}, {"top_k": 50},
    {"filters": {"cutoff": "1700-01-01"}}, {"mode": "keyword"}, {"generator": "extractive"},
])
def test_a_visitor_cannot_lift_or_widen_anything(api: TestClient, visitor: dict[str, str],
                                                 extra: dict[str, Any]) -> None:
    resp = api.post("/v1/exhibits/pepys-1666/answer", headers=visitor,
                    json={"question": "Where did the fire begin?", **extra})
    assert resp.status_code == 422 and "extra" in resp.text.lower()


def _routes(api: TestClient) -> list[tuple[str, str]]:
    spec = api.get("/openapi.json").json()
    return [(method.upper(), path) for path, ops in spec["paths"].items() for method in ops]


def _fill(path: str, exhibit: str) -> str:
    values = {"collection": NAME, "exhibit": exhibit, "snapshot_id": "1", "key_id": "x"}
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m[1], "1"), path)


def test_a_visitor_key_is_refused_everywhere_outside_its_exhibit(
    api: TestClient, visitor: dict[str, str], keys: dict[str, dict[str, str]],
    col: pgcite.Collection, diary: Any,
) -> None:
    other = pgcite.Exhibit.create(col, "pepys-other", PEPYS, replace=True)
    routes = _routes(api)
    assert len(routes) > 15
    bodies = {"search": {"query": "fire"}, "answer": {"question": "fire"},
              "inspect": {"query": "fire"}}
    checked = 0
    for method, path in routes:
        if path in ("/healthz", "/readyz", "/metrics"):
            continue  # unkeyed for everyone: no collection data
        mine = path.startswith("/v1/exhibits/{exhibit}")
        url = _fill(path, other.name if mine else "pepys-1666")
        body = next((b for k, b in bodies.items() if path.endswith(k)), {})
        for url_ in {url, url.replace(NAME, diary.name)}:
            resp = api.request(method, url_, headers=visitor, params={"id": "d-1666-09-02"},
                               json=body if method in ("POST", "PUT") else None)
            assert resp.status_code in (401, 403, 404), (method, url_, resp.status_code)
            checked += 1
    assert checked > 20
    # the inspector's endpoint, and its own exhibit still answers
    assert api.post(f"/ui/api/collections/{NAME}/inspect", headers=visitor,
                    json={"query": "fire"}).status_code == 403
    assert api.get("/v1/exhibits/pepys-1666", headers=visitor).status_code == 200
    # readers and admins of the collection may preview the exhibit
    assert api.get("/v1/exhibits/pepys-1666", headers=keys["reader"]).status_code == 200
    other.delete()


def test_the_visitor_role_is_the_one_access_rules(
    client: pgcite.Client, col: pgcite.Collection, exhibit: pgcite.Exhibit, diary: Any,
) -> None:
    """Rule 5 of service/_access.py, as Python sees it (HTTP and MCP call the same Grant)."""
    from pgcite.service import open_collection
    from pgcite.service._access import authenticate_grant

    with client.db.transaction() as conn:
        token = create_key(conn, col.name, "visitor", exhibit=exhibit.name).token
    with pytest.raises(pgcite.AccessDenied, match="a visitor key may only ask its exhibit"):
        open_collection(client, NAME, key=token)  # its own collection: no role on it
    with pytest.raises(pgcite.CollectionNotFound, match=f"no collection named {diary.name!r}"):
        open_collection(client, diary.name, key=token)  # another: as an unknown name
    grant = authenticate_grant(client, token)
    with pytest.raises(pgcite.ExhibitNotFound):
        grant.visiting(NAME, "pepys-other")  # another exhibit: as an unknown one
    with pytest.raises(pgcite.ExhibitNotFound):
        grant.visiting(diary.name, exhibit.name)
    opened = grant.visiting(NAME, exhibit.name).open(client, col.info)
    assert opened.snapshot().snapshot_id == col.active_snapshot().snapshot_id
    with pytest.raises(pgcite.AccessDenied):  # the active snapshot only, as a reader's
        opened.snapshot(2**31 - 1)
    with pytest.raises(pgcite.SnapshotNotFound):  # an admin (no key) is told it is unknown
        authenticate_grant(client, None).visiting(NAME, exhibit.name).open(
            client, col.info).snapshot(2**31 - 1)


def test_deleting_an_exhibit_deletes_its_visitor_keys(
    api: TestClient, keys: dict[str, dict[str, str]], col: pgcite.Collection,
) -> None:
    temp = pgcite.Exhibit.create(col, "pepys-temp", PEPYS, replace=True)
    made = api.post(f"/v1/collections/{NAME}/exhibits/{temp.name}/keys", headers=keys["admin"],
                    json={})
    key = _bearer(made.json()["token"])
    assert api.get(f"/v1/exhibits/{temp.name}", headers=key).status_code == 200
    temp.delete()
    assert api.get(f"/v1/exhibits/{temp.name}", headers=key).status_code == 401
    pgcite.Exhibit.create(col, "pepys-temp", PEPYS)  # the name again: the old key stays dead
    assert api.get(f"/v1/exhibits/{temp.name}", headers=key).status_code == 401
    pgcite.Exhibit.open(col, "pepys-temp").delete()


# --- citations open their source -------------------------------------------------------------


def test_a_citation_opens_in_its_document_without_later_neighbours(
    api: TestClient, visitor: dict[str, str], keys: dict[str, dict[str, str]],
    col: pgcite.Collection,
) -> None:
    hit = col.search("victualling accounts letter to my Lord", top_k=10,
                     filters={"cutoff": CUTOFF}).hits
    second = next(h for h in hit if h.document_id == "letter-book" and "Letter 2" in h.body)
    resp = api.get("/v1/exhibits/pepys-1666/source", headers=visitor,
                   params={"id": second.id})
    assert resp.status_code == 200, resp.text
    source = resp.json()
    assert source["passage"]["body"] == second.body and source["status"] == "current"
    assert [p["body"][:8] for p in source["before"]] == ["Letter 1"]
    assert source["after"] == []  # letter 3 is dated after the cutoff
    document = source["document"]
    assert document["title"] == "Letter-book" and document["author"] == "Samuel Pepys"
    assert document["date_end"] <= CUTOFF and document["passages"] == 2
    assert document["source"] == "letter-book.txt" and document["ingested_at"]
    # a reader without a cutoff sees the third letter; the visitor cannot even open it
    whole = api.get(f"/v1/collections/{NAME}/source", headers=keys["reader"],
                    params={"id": second.id}).json()
    assert [p["body"][:8] for p in whole["after"]] == ["Letter 3"]
    later = whole["after"][0]["id"]
    assert api.get("/v1/exhibits/pepys-1666/source", headers=visitor,
                   params={"id": later}).status_code == 404
    # nor a passage of a corpus outside the exhibit
    assert api.get("/v1/exhibits/pepys-1666/source", headers=visitor,
                   params={"id": "n-undated"}).status_code == 404
    assert api.get("/v1/exhibits/pepys-1666/source", headers=visitor,
                   params={"id": second.id, "cutoff": "1700-01-01"}).status_code == 422


def test_a_citation_link_stays_true_across_later_ingests(
    client: pgcite.Client, api: TestClient, visitor: dict[str, str], col: pgcite.Collection,
    exhibit: pgcite.Exhibit, tmp_path: Path,
) -> None:
    answer = exhibit.answer("Where did Pepys bury his Parmazan cheese and wine?")
    cited = answer.snapshot_id
    cheese = next(s.id for s in answer.sources if s.id.startswith("d-1666-09-04"))
    plague = next(h.id for h in col.search("red cross plague houses", top_k=3).hits
                  if h.id.startswith("d-1665-06-07"))
    # a later ingest changes the cheese entry and leaves the plague entry as it was
    rows = [json.loads(line) for line in DIARY.read_text().splitlines()]
    changed = [r | {"text": r["text"] + " (A later, corrected reading.)"}
               for r in rows if r["_id"] == "d-1666-09-04"]
    path = tmp_path / "changed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in changed))
    assert col.ingest([path]).activated
    assert col.active_snapshot().snapshot_id != cited

    def opened(citation: str, snapshot: int | None) -> dict[str, Any]:
        resp = api.get("/v1/exhibits/pepys-1666/source", headers=visitor,
                       params={"id": citation, **({"snapshot": snapshot} if snapshot else {})})
        assert resp.status_code == 200, resp.text
        return resp.json()  # type: ignore[no-any-return]

    same = opened(plague, cited)
    assert same["status"] == "same" and same["cited_snapshot"] == cited
    replaced = opened(cheese, cited)
    assert replaced["status"] == "replaced" and "corrected" in replaced["passage"]["body"]
    assert "replaced" in replaced["note"]
    removed_snapshot = col.delete_documents(["d-1665-06-07"]).snapshot_id
    assert removed_snapshot is not None
    gone = opened(plague, cited)
    assert gone["status"] == "removed" and gone["passage"] is None
    # a snapshot that no longer exists (or never went live) cannot vouch for anything
    assert opened(cheese, 99999)["status"] == "unverified"
    col.rollback()  # the plague entry back, for the other tests


def test_the_command_line_defines_lists_shows_keys_and_deletes(
    settings: Any, col: pgcite.Collection, tmp_path: Path,
) -> None:
    from typer.testing import CliRunner

    from pgcite.cli import app

    runner = CliRunner()
    env = {"PGCITE_DATA_DIR": str(settings.data_dir)}
    spec = tmp_path / "ibn.yaml"
    spec.write_text("persona: Samuel Pepys\nlanguage: ar\nquestions:\n  - أين بدأ الحريق؟\n",
                    encoding="utf-8")

    def run(*args: str) -> Any:
        return runner.invoke(app, list(args), env=env)
    made = run("exhibit", "create", "cli-pepys", "-c", NAME, "--file", str(spec),
               "--cutoff", "1666-12-31", "--corpus", "A", "--greeting", "Welcome", "--json")
    assert made.exit_code == 0, made.output
    info = json.loads(made.stdout)
    assert info["settings"]["cutoff"] == "1666-12-31" and info["settings"]["language"] == "ar"
    again = run("exhibit", "create", "cli-pepys", "-c", NAME, "--persona", "X")
    assert again.exit_code != 0 and "exists already" in again.output and "Traceback" not in \
        again.output
    bad = run("exhibit", "create", "cli-bad", "-c", NAME, "--direction", "sideways")
    assert bad.exit_code == 2 and "direction" in bad.output
    listed = run("exhibit", "list", "--json")
    assert "cli-pepys" in [e["name"] for e in json.loads(listed.stdout)]
    shown = run("exhibit", "show", "cli-pepys")
    assert shown.exit_code == 0 and "version 1" in shown.output
    key = run("exhibit", "key", "cli-pepys", "--json")
    assert json.loads(key.stdout)["key"]["role"] == "visitor"
    gone = run("exhibit", "delete", "cli-pepys")
    assert gone.exit_code == 0 and "deleted" in gone.output
    assert run("exhibit", "show", "cli-pepys").exit_code != 0
