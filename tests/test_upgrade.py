"""Collection schema versions: a new collection gets the squashed baseline, an existing one is
upgraded step by step by `pgcite collection upgrade` only, each step in its own transaction.

The old collection is tests/fixtures/old_layout: a collection as main left it at 64d81b6
(schema version 10: three ingests, a deletion, dense lists, entities, a staged ingest), dumped
with the hits and scores that commit's search returned. Upgraded, it must return the same hits
with the same scores, on every snapshot, in every mode, filtered or not, and through the long-
list skipping paths; and its schema must be exactly a new collection's."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

import pgcite
from pgcite._errors import CollectionOutdated
from pgcite.index import _query
from pgcite.store._migrations import BASELINE, latest_version, load_migrations

FIXTURE = Path(__file__).parent / "fixtures" / "old_layout"
EXPECTED: dict[str, Any] = json.loads(gzip.decompress((FIXTURE / "expected.json.gz").read_bytes()))
OLD = EXPECTED["collection"]["name"]


def restore_old_collection(client: pgcite.Client) -> None:
    """The fixture's collection, as a user upgrading from 64d81b6 has it: its registry row,
    its version rows and its schema from the dump."""
    client.drop_collection(OLD, missing_ok=True)
    meta = EXPECTED["collection"]
    dump = gzip.decompress((FIXTURE / "collection_v10.sql.gz").read_bytes()).decode()
    # pg_dump 18 brackets the script in psql's \restrict meta-commands: not SQL
    dump = "\n".join(line for line in dump.splitlines() if not line.startswith("\\"))
    with client.db.connect() as conn, conn.transaction():
        conn.execute("INSERT INTO pgcite.collections (name, schema_name, ts_config, embedder,"
                     " settings) VALUES (%s, %s, %s, %s, %s)",
                     (OLD, meta["schema_name"], meta["ts_config"], Jsonb(meta["embedder"]),
                      Jsonb(meta["settings"])))
        for version, name in EXPECTED["migrations"]:
            conn.execute("INSERT INTO pgcite.schema_migrations (component, version, name)"
                         " VALUES (%s, %s, %s)", (f"collection:{OLD}", version, name))
        # the dump sets search_path to '' for its session: its own connection
        conn.execute(dump)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def old(client: pgcite.Client) -> Iterator[str]:
    restore_old_collection(client)
    yield OLD
    client.drop_collection(OLD, missing_ok=True)


def test_an_old_collection_is_refused_until_upgraded_then_scores_as_before(
        client: pgcite.Client, old: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CollectionOutdated, match="pgcite collection upgrade old_layout_v10"):
        client.collection(old)
    assert [c.schema_version for c in client.collections() if c.name == old] == [10]
    told: list[int] = []
    steps = client.upgrade_collections([old], on_step=lambda _, version, __: told.append(version))
    assert [s.version for s in steps] == told == list(range(11, latest_version() + 1))
    assert client.upgrade_collections([old]) == []  # once per version
    col = client.collection(old)
    mismatches = []
    for snapshot_id, recorded in EXPECTED["snapshots"].items():
        for regime, long_list in (("default", _query.LONG_LIST), ("long_list_4", 4)):
            monkeypatch.setattr(_query, "LONG_LIST", long_list)
            for case in recorded[regime]:
                result = col.search(case["query"], top_k=8, mode=case["mode"],
                                    filters=case["filters"], snapshot_id=int(snapshot_id),
                                    snippets=False)
                got = [[h.id, h.score, h.keyword_score, h.vector_distance] for h in result.hits]
                if not _same(got, case["hits"]):
                    mismatches.append((snapshot_id, regime, case["query"], case["mode"]))
    assert not mismatches, mismatches[:5]


def _same(got: list[list[Any]], want: list[list[Any]]) -> bool:
    if [g[0] for g in got] != [w[0] for w in want]:
        return False
    return all(g == w or (g is not None and w is not None and g == pytest.approx(w, rel=1e-12))
               for gh, wh in zip(got, want, strict=True) for g, w in zip(gh[1:], wh[1:],
                                                                         strict=True))


def test_an_upgraded_collection_keeps_working(client: pgcite.Client, old: str,
                                              tmp_path: Path) -> None:
    """Writes on the upgraded layout: the staged versions build, a deletion, a merge of every
    segment; the scores stay those of the exhaustive reference (test_segments)."""
    from tests.test_segments import _lexemes, _live_chunks, _search_scores, exhaustive_bm25

    client.upgrade_collections([old])
    col = client.collection(old)
    built = col.build_staged()
    assert built.snapshot_id is not None and built.activated
    col.delete_documents([col.documents()[0].id])
    report = col.optimize(full=True)
    assert report.segments_after == 1
    sid = col.active_snapshot().snapshot_id
    with client.connection() as conn:
        chunks = _live_chunks(conn, col, sid)
        for query in ("the fire in the city", "my wife and I dined", "Duke of York"):
            want = exhaustive_bm25(chunks, _lexemes(conn, col, query))
            got = _search_scores(col, query, sid)
            assert got and all(got[c] == pytest.approx(want[c], rel=1e-6) for c in got)


def _schema(conn: psycopg.Connection, schema: str) -> dict[str, list[str]]:
    """A schema's definition, as the catalog has it, with its name taken out: columns (in
    order, with type, nullability, default, generation and storage), constraints, indexes
    (not the per-model HNSW ones), views, functions, triggers, comments."""
    queries = {
        "columns": """SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),
                             a.attnotnull, pg_get_expr(d.adbin, d.adrelid), a.attgenerated,
                             a.attstorage
                      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
                      JOIN pg_namespace n ON n.oid = c.relnamespace
                      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                      WHERE n.nspname = %(s)s AND a.attnum > 0 AND NOT a.attisdropped
                        AND c.relkind IN ('r', 'v')""",
        "constraints": """SELECT conname, pg_get_constraintdef(o.oid) FROM pg_constraint o
                          JOIN pg_namespace n ON n.oid = o.connamespace WHERE n.nspname = %(s)s""",
        "indexes": """SELECT indexname, indexdef FROM pg_indexes
                      WHERE schemaname = %(s)s AND indexname NOT LIKE 'chunks\\_hnsw\\_%%'""",
        "views": "SELECT viewname, definition FROM pg_views WHERE schemaname = %(s)s",
        "functions": """SELECT p.proname FROM pg_proc p JOIN pg_namespace n
                        ON n.oid = p.pronamespace WHERE n.nspname = %(s)s""",
        "triggers": """SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                       JOIN pg_namespace n ON n.oid = c.relnamespace
                       WHERE n.nspname = %(s)s AND NOT t.tgisinternal""",
        "comments": """SELECT c.relname, d.objsubid, d.description FROM pg_description d
                       JOIN pg_class c ON c.oid = d.objoid JOIN pg_namespace n
                       ON n.oid = c.relnamespace WHERE n.nspname = %(s)s""",
        "sequences": "SELECT sequencename FROM pg_sequences WHERE schemaname = %(s)s",
    }
    name = re.compile(re.escape(schema) + r"\b")
    return {kind: sorted(name.sub("SCHEMA", " | ".join(map(str, row)))
                         for row in conn.execute(query, {"s": schema}))  # type: ignore[arg-type]
            for kind, query in queries.items()}


def test_the_upgraded_schema_is_the_baseline(client: pgcite.Client, old: str) -> None:
    client.upgrade_collections([old])
    fresh = client.create_collection("fresh_baseline")
    try:
        with client.connection() as conn:
            got = _schema(conn, EXPECTED["collection"]["schema_name"])
            want = _schema(conn, fresh.info.schema_name)
        for kind in want:
            assert got[kind] == want[kind], kind
    finally:
        client.drop_collection("fresh_baseline")


def test_a_new_collection_is_at_the_latest_version(client: pgcite.Client) -> None:
    col = client.create_collection("fresh_version")
    try:
        assert col.info.schema_version == latest_version() >= BASELINE
        assert client.upgrade_collections(["fresh_version"]) == []
    finally:
        client.drop_collection("fresh_version")


def test_step_versions_are_unique_and_the_baseline_covers_the_old_ones() -> None:
    steps = load_migrations("collection")
    assert len({s.version for s in steps}) == len(steps)
    assert {s.version for s in steps if s.version <= BASELINE} == set(range(2, BASELINE + 1))


def test_a_failing_step_rolls_back_alone_and_says_which(
        client: pgcite.Client, old: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each step is its own transaction: a step that fails leaves the ones before it applied
    and the collection at the version it reached."""
    restore_old_collection(client)
    import pgcite.store._migrations as migrations

    real = migrations.load_migrations

    def broken(kind: str) -> list[migrations.Migration]:
        found = real(kind)
        return [m if m.version != 13 else migrations.Migration(13, m.name, "SELECT 1/0")
                for m in found]

    monkeypatch.setattr(migrations, "load_migrations", broken)
    with pytest.raises(pgcite.PgciteError, match=r"step 13 \(snapshot_delta\) failed: division"
                       r" by zero; the collection stays at version 12"):
        client.upgrade_collections([old])
    assert [c.schema_version for c in client.collections() if c.name == old] == [12]
    monkeypatch.setattr(migrations, "load_migrations", real)
    assert [s.version for s in client.upgrade_collections([old])] == list(
        range(13, latest_version() + 1))  # the failed step, then any after it


def test_the_cli_refuses_an_old_collection_then_upgrades_it(
        client: pgcite.Client, settings: pgcite.Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-line message naming the command, the list saying which collections need it, the
    command's progress, and nothing left to do the second time."""
    from typer.testing import CliRunner

    from pgcite.cli import app

    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)
    restore_old_collection(client)

    def run(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, list(args))
        return result.exit_code, result.output

    code, out = run("search", OLD, "the fire")
    assert code == 1 and "schema version 10" in out and "Traceback" not in out
    assert f"pgcite collection upgrade {OLD}" in out
    assert f"pgcite collection upgrade {OLD}" in run("collection", "list")[1]
    code, out = run("collection", "upgrade", OLD)
    assert code == 0, out
    assert "step 11 (version_provenance)" in out and "step 13 (snapshot_delta) done in" in out
    assert run("collection", "upgrade", OLD, "--json") == (0, "[]\n")
    code, out = run("search", OLD, "the fire", "--json")
    assert code == 0 and json.loads(out)["hits"]
