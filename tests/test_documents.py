"""Listing and deleting documents (a new snapshot without them, through the gate like an ingest),
from the CLI and the Python API, against the real server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import pgcite
from pgcite.config import Settings

from .conftest import DIARY
from .test_snapshots import cli, gate_on
from .test_snapshots_active import wait_for


@pytest.fixture
def docs_col(client: pgcite.Client,
             request: pytest.FixtureRequest) -> Iterator[pgcite.Collection]:
    name = "doc_" + request.node.name.removeprefix("test_")[:40].lower()
    col = client.create_collection(name)
    assert col.ingest([DIARY]).activated
    yield col
    client.drop_collection(name)


def test_list_shows_dates_corpus_and_chunks(docs_col: pgcite.Collection,
                                             settings: Settings) -> None:
    out = cli(settings, "documents", "list", docs_col.name, "--json")
    assert out.exit_code == 0, out.output
    docs = {d["id"]: d for d in json.loads(out.output)}
    assert len(docs) == 12
    fire = docs["d-1666-09-02"]
    assert (fire["date"], fire["corpus"], fire["author"], fire["chunks"]) == (
        "1666-09-02", "A", "Samuel Pepys", 1)
    assert docs["n-undated"]["date"] is None
    assert list(docs)[-1] == "n-undated"  # oldest first, undated last
    human = cli(settings, "documents", "list", docs_col.name)
    assert human.exit_code == 0 and "d-1660-01-01" in human.output and "1660-01-01" in human.output


def test_delete_builds_a_new_active_snapshot_without_them(docs_col: pgcite.Collection,
                                                          settings: Settings) -> None:
    before = docs_col.active_snapshot().snapshot_id
    out = cli(settings, "documents", "delete", docs_col.name, "e-1668-01-01", "n-undated",
              "--json")
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)
    assert report["activated"] and report["fromSnapshot"] == before
    assert report["snapshotId"] != before
    # the CLI is another client: this one hears of the activation by notification, which a
    # loaded machine can deliver a moment after the CLI returns (seen in CI: still snapshot 1)
    assert wait_for(lambda: docs_col.active_snapshot().snapshot_id == report["snapshotId"])
    ids = {d.id for d in docs_col.documents()}
    assert len(ids) == 10 and not ids & {"e-1668-01-01", "n-undated"}
    assert all(h.document_id != "e-1668-01-01"
               for h in docs_col.search("the theatre to see Macbeth", top_k=20).hits)
    # the old snapshot still holds them (nothing erased): listable and a rollback away
    assert len(docs_col.documents(snapshot_id=before)) == 12
    docs_col.rollback()
    assert len(docs_col.documents()) == 12


def test_unknown_id_is_one_line_and_changes_nothing(docs_col: pgcite.Collection,
                                                    settings: Settings) -> None:
    before = docs_col.snapshots()
    out = cli(settings, "documents", "delete", docs_col.name, "e-1668-01-01", "no-such-doc")
    assert out.exit_code == 1
    assert "no document 'no-such-doc'" in out.output and "nothing was deleted" in out.output
    assert "Traceback" not in out.output
    assert docs_col.snapshots() == before
    with pytest.raises(pgcite.PgciteError, match="every document"):
        docs_col.delete_documents([d.id for d in docs_col.documents()])
    assert docs_col.snapshots() == before


def test_delete_goes_through_the_gate(docs_col: pgcite.Collection, settings: Settings,
                                      tmp_path: Path) -> None:
    gate_on(settings, docs_col, tmp_path)
    active = docs_col.active_snapshot().snapshot_id
    # the fire entries are what the golden set's fire and cutoff queries need: refused
    out = cli(settings, "documents", "delete", docs_col.name, "d-1666-09-02", "d-1666-09-04",
              "e-1666-09-05", "d-1665-06-07")
    assert out.exit_code == 1 and "refused" in out.output and "recall@10" in out.output
    assert docs_col.active_snapshot().snapshot_id == active
    # a document no judged query needs: the gate passes and the snapshot goes live
    report = docs_col.delete_documents(["e-1668-01-01"])
    assert report.activated and (report.gate or "").startswith("passed")
    assert docs_col.active_snapshot().snapshot_id == report.snapshot_id


def test_delete_without_activation_leaves_the_live_snapshot(docs_col: pgcite.Collection) -> None:
    active = docs_col.active_snapshot().snapshot_id
    report = docs_col.delete_documents(["e-1668-01-01"], activate=False)
    assert not report.activated and report.snapshot_id is not None
    assert docs_col.active_snapshot().snapshot_id == active
    assert len(docs_col.documents(snapshot_id=report.snapshot_id)) == 11


def test_search_and_ask_a_named_snapshot(docs_col: pgcite.Collection,
                                         settings: Settings) -> None:
    active = docs_col.active_snapshot().snapshot_id
    built = docs_col.delete_documents(["e-1668-01-01"], activate=False).snapshot_id
    assert built is not None
    query = ("search", docs_col.name, "the theatre to see Macbeth", "--mode", "keyword")
    out = cli(settings, *query, "--snapshot", str(built), "--json")
    assert out.exit_code == 0, out.output
    payload = json.loads(out.output)
    assert payload["snapshotId"] == built
    assert all(h["documentId"] != "e-1668-01-01" for h in payload["hits"])
    live = json.loads(cli(settings, *query, "--json").output)
    assert live["snapshotId"] == active and live["hits"][0]["documentId"] == "e-1668-01-01"
    out = cli(settings, "ask", docs_col.name, "Macbeth", "--snapshot", str(built), "--json")
    assert out.exit_code == 0 and json.loads(out.output)["snapshotId"] == built
    out = cli(settings, *query, "--snapshot", "999")
    assert out.exit_code == 1 and "has no snapshot 999" in out.output
    assert "Traceback" not in out.output
