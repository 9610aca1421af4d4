"""Database, migrations, collections and ingest against the real embedded server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from psycopg import sql

import pgcite
from pgcite.config import Settings
from pgcite.ingest import _pipeline
from pgcite.store import Database
from pgcite.store._migrations import applied_versions, load_migrations

from .conftest import DIARY, FIXTURES


def test_open_is_idempotent_and_records_migrations(settings: Settings) -> None:
    first = Database.open(settings)
    second = Database.open(settings)  # migrations already applied: nothing to do, no error
    with second.connect() as conn:
        versions = applied_versions(conn, "registry")
        vector = conn.execute("SELECT extversion FROM pg_extension WHERE extname='vector'").fetchone()
        server = conn.execute("SHOW server_version_num").fetchone()
    assert versions == {m.version for m in load_migrations("registry")}
    assert vector is not None and tuple(int(p) for p in vector[0].split(".")[:2]) >= (0, 8)
    assert server is not None and int(server[0]) >= 180000
    assert first.url == second.url


def test_unreachable_server_is_a_clear_error(tmp_path: Path) -> None:
    bad = Settings(data_dir=tmp_path, database_url="postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(pgcite.DatabaseError, match="cannot connect"):
        Database.open(bad)


@pytest.mark.parametrize("name", ["Bad", "has space", 'q"uote', "a;drop", "1abc", "", "x" * 49])
def test_collection_names_are_validated(client: pgcite.Client, name: str) -> None:
    with pytest.raises(pgcite.ConfigError, match="invalid collection name"):
        client.create_collection(name)


def test_collection_lifecycle(client: pgcite.Client) -> None:
    col = client.create_collection("lifecycle", language="simple")
    assert col.info.schema_name == "pgc_lifecycle"
    assert col.info.embedder.id == "all-MiniLM-L6-v2" and col.info.embedder.dim == 384
    assert len(col.info.embedder.version) == 64  # sha256 of the weights
    assert "lifecycle" in [c.name for c in client.collections()]
    with pytest.raises(pgcite.CollectionExists):
        client.create_collection("lifecycle")
    client.drop_collection("lifecycle")
    with pytest.raises(pgcite.CollectionNotFound):
        client.collection("lifecycle")
    with client.connection() as conn:
        gone = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname='pgc_lifecycle'").fetchone()
    assert gone is None


def test_unknown_language_lists_choices(client: pgcite.Client) -> None:
    with pytest.raises(pgcite.ConfigError, match="unknown text-search language") as info:
        client.create_collection("badlang", language="klingon")
    assert info.value.hint and "arabic" in info.value.hint


def _chunks(col: pgcite.Collection) -> list[tuple[str, str, object, int]]:
    with col.client.connection() as conn:
        rows = conn.execute(sql.SQL(
            "SELECT c.id, c.document_id, c.date_end, c.ordinal FROM {s}.chunks c"
            " JOIN {s}.snapshot_members m USING (version_pk)"
            " JOIN {s}.active a ON a.snapshot_id = m.snapshot_id ORDER BY c.id"
        ).format(s=col.info.schema_id)).fetchall()
    return [tuple(r) for r in rows]  # type: ignore[misc]


def test_ingest_keeps_entries_whole_and_is_idempotent(client: pgcite.Client) -> None:
    col = client.create_collection("idem")
    first = col.ingest([DIARY])
    entries = [json.loads(line) for line in DIARY.read_text().splitlines()]
    chunks = _chunks(col)
    # the session fixture may have embedded the same texts already: the cache serves them
    assert first.documents == len(entries) and first.embedded + first.cached == len(chunks)
    by_doc = {e["_id"]: e for e in entries}
    assert {c[1] for c in chunks} == set(by_doc)  # every entry has >= 1 chunk
    for cid, doc_id, date_end, _ in chunks:
        assert cid.startswith(doc_id + "-")  # no chunk crosses two entries
        expected = by_doc[doc_id]["date"]
        assert (date_end.isoformat() if date_end else None) == expected
    assert len({c[0] for c in chunks}) == len(chunks)
    assert max(c[3] for c in chunks if c[1] == "d-1664-02-20") >= 1  # the long entry split

    second = col.ingest([DIARY])
    assert (second.embedded, second.chunks_added, second.new_versions) == (0, 0, 0)
    assert second.snapshot_id is None  # nothing changed: no snapshot
    assert _chunks(col) == chunks  # same ids, stable
    client.drop_collection("idem")


def test_changed_document_makes_a_new_version_and_snapshot(
    client: pgcite.Client, tmp_path: Path
) -> None:
    col = client.create_collection("versions")
    source = tmp_path / "d.jsonl"
    source.write_text(json.dumps({"_id": "a", "date": "1660-01-01", "text": "First text."}) + "\n"
                      + json.dumps({"_id": "b", "date": "1660-01-02", "text": "Other."}) + "\n")
    one = col.ingest([source])
    source.write_text(json.dumps({"_id": "a", "date": "1660-01-01", "text": "Changed text."}) + "\n")
    two = col.ingest([source])
    assert two.new_versions == 1 and two.embedded == 1 and two.snapshot_id != one.snapshot_id
    bodies = {c[1] for c in _chunks(col)}
    assert bodies == {"a", "b"}  # b stays live: ingest adds/updates, it does not replace
    three = col.ingest([source], replace=True)
    assert {c[1] for c in _chunks(col)} == {"a"} and three.embedded == 0
    client.drop_collection("versions")


def test_bad_file_is_reported_and_changes_nothing(client: pgcite.Client) -> None:
    col = client.create_collection("badfile")
    col.ingest([DIARY])
    before = (_chunks(col), col.active_snapshot().snapshot_id)
    report = col.ingest([FIXTURES / "diary" / "bad.jsonl", FIXTURES / "nope.jsonl"])
    assert len(report.failed) == 2
    assert any("line 2" in f.reason for f in report.failed)
    assert report.snapshot_id is None
    assert (_chunks(col), col.active_snapshot().snapshot_id) == before
    client.drop_collection("badfile")


def test_crash_before_commit_leaves_nothing_and_resumes_from_cache(
    client: pgcite.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    col = client.create_collection("crash")

    def boom(*args: object, **kwargs: object) -> int:
        raise RuntimeError("killed mid-ingest")

    monkeypatch.setattr(_pipeline, "build_snapshot", boom)
    with pytest.raises(RuntimeError):
        col.ingest([DIARY])
    assert col.stats()["stored"] == {"documents": 0, "versions": 0, "chunks": 0}
    assert col.stats()["active_snapshot"] is None
    monkeypatch.undo()
    report = col.ingest([DIARY])
    assert report.embedded == 0 and report.cached > 0  # embeddings survived in the cache
    assert report.activated
    client.drop_collection("crash")


def test_embedder_version_mismatch_is_refused(client: pgcite.Client) -> None:
    col = client.create_collection("mismatch")
    with client.db.transaction() as conn:
        conn.execute(
            "UPDATE pgcite.collections SET embedder = jsonb_set(embedder, '{version}', '\"0000\"')"
            " WHERE name = 'mismatch'")
    with pytest.raises(pgcite.EmbedderError, match="embedded with"):
        client.collection("mismatch").ingest([DIARY])
    client.drop_collection("mismatch")
    assert col.name == "mismatch"


def test_activate_and_rollback_from_python(client: pgcite.Client, tmp_path: Path) -> None:
    col = client.create_collection("py_lifecycle")
    first = col.ingest([DIARY])
    extra = tmp_path / "extra.jsonl"
    extra.write_text(json.dumps({"_id": "x-1", "date": "1670-01-01", "text": "A new entry."}) + "\n")
    built = col.ingest([extra], activate=False)
    assert built.snapshot_id is not None and not built.activated
    assert col.active_snapshot().snapshot_id == first.snapshot_id  # built, not live
    result = col.activate(built.snapshot_id)
    assert result.snapshot_id == built.snapshot_id and not result.gated
    assert col.active_snapshot().snapshot_id == built.snapshot_id
    back = col.rollback()
    assert back.snapshot_id == first.snapshot_id
    assert col.active_snapshot().snapshot_id == first.snapshot_id
    client.drop_collection("py_lifecycle")
