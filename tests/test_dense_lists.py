"""Dense term frequencies (segment_dense, pgcite/index/_layout.py): which of a segment's lists get
them, and that their bytes are the postings' term frequencies, whether the segment writer makes
them or densify() does later. The keyword leg that reads them is checked against the BM25
reference in test_keyword_skipping."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

import pgcite
from pgcite.index import DENSE_BLOCK, _writer, densify


@pytest.fixture
def segment(client: pgcite.Client) -> Iterator[tuple[psycopg.Connection, sql.Identifier, int]]:
    """An empty segment of a new collection, on a connection whose work is rolled back."""
    col = client.create_collection("dense_lists")
    try:
        with client.connection() as conn:
            s = col.info.schema_id
            row = conn.execute(sql.SQL("INSERT INTO {s}.segments DEFAULT VALUES"
                                       " RETURNING segment_id").format(s=s)).fetchone()
            assert row is not None
            yield conn, s, int(row[0])
            conn.rollback()
    finally:
        client.drop_collection("dense_lists")


def _write(conn: psycopg.Connection, s: sql.Identifier, segment_id: int,
           lists: dict[str, dict[int, int]]) -> None:
    """Postings for these lists (chunk_pk -> tf), one row each, and their lengths in
    segment_blocks (where densify reads them)."""
    rows = [(segment_id, term, list(p), list(p.values()), [7] * len(p))
            for term, p in lists.items()]
    with conn.cursor() as cur:
        cur.executemany(sql.SQL(
            "INSERT INTO {s}.segment_postings (segment_id, term, chunk_pks, tfs, lengths)"
            " VALUES (%s, %s, %s, %s, %s)").format(s=s), rows)
        cur.executemany(sql.SQL(
            "INSERT INTO {s}.segment_blocks (segment_id, term, postings, block_size, max_tfs,"
            " min_lengths) VALUES (%s, %s, %s, 64, '{{}}', '{{}}')").format(s=s),
            [(segment_id, term, len(p)) for term, p in lists.items()])


def _dense(conn: psycopg.Connection, s: sql.Identifier,
           segment_id: int) -> dict[str, dict[int, int]]:
    """term -> {chunk_pk: tf} read back from the dense rows."""
    out: dict[str, dict[int, int]] = {}
    for term, block, tfs in conn.execute(sql.SQL(
            "SELECT term, block, tfs FROM {s}.segment_dense WHERE segment_id = %s").format(s=s),
            (segment_id,)):
        assert len(tfs) == DENSE_BLOCK
        out.setdefault(term, {}).update(
            {block * DENSE_BLOCK + i: tf for i, tf in enumerate(tfs) if tf})
    return out


def test_lists_dense_enough_get_their_tfs_byte_for_byte(
        segment: tuple[psycopg.Connection, sql.Identifier, int]) -> None:
    """The writer's thresholds (densify's defaults, the same statement)."""
    conn, s, segment_id = segment
    common = {pk: 1 + pk % 5 for pk in range(3990, 9990, 2)}  # 3,000 postings, 1/2 of 2 blocks
    sparse = {pk: 1 for pk in range(0, 1200 * 500, 500)}      # 1,200 postings, 1/500
    short = {pk: 2 for pk in range(100, 1100)}                # 1,000: under the minimum
    heavy = {**common, 5000: 256}                             # a tf no byte holds
    _write(conn, s, segment_id, {"common": common, "sparse": sparse, "short": short,
                                 "heavy": heavy})
    assert _dense(conn, s, segment_id) == {}
    densify(conn, "pgc_dense_lists", segment_id)
    assert _dense(conn, s, segment_id) == {"common": common}


def test_densify_makes_any_list_dense_when_asked_and_keeps_what_it_made(
        segment: tuple[psycopg.Connection, sql.Identifier, int]) -> None:
    conn, s, segment_id = segment
    lists = {"a": {1: 3, 4001: 1, 9000: 255}, "b": {2: 1}}
    _write(conn, s, segment_id, lists)
    assert _dense(conn, s, segment_id) == {}
    for _ in range(2):  # a second call adds nothing
        densify(conn, "pgc_dense_lists", segment_id, min_postings=1, ratio=DENSE_BLOCK)
        assert _dense(conn, s, segment_id) == lists
    rows = conn.execute(sql.SQL("SELECT count(*) FROM {s}.segment_dense").format(s=s)).fetchone()
    assert rows == (4,)  # blocks 0, 1 and 2 of "a", block 0 of "b"


def test_the_writer_makes_the_dense_rows_of_the_segments_it_writes(
        client: pgcite.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With every list dense enough (thresholds lowered), an ingest's segment gets the dense
    rows of all its lists, byte for byte its postings' term frequencies."""
    monkeypatch.setattr(_writer, "DENSE_MIN_POSTINGS", 1)
    monkeypatch.setattr(_writer, "DENSE_RATIO", DENSE_BLOCK)
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"_id": f"d{i}", "text": " ".join(
        ["harbour"] * (1 + i % 3) + ["lantern", "copper"][: i % 3])}) + "\n" for i in range(9)))
    col = client.create_collection("dense_writer")
    try:
        col.ingest([path])
        s = col.info.schema_id
        with client.connection() as conn:
            (segment_id,) = conn.execute(sql.SQL("SELECT segment_id FROM {s}.segments").format(
                s=s)).fetchone() or (None,)
            postings = {term: dict(zip(pks, tfs, strict=True)) for term, pks, tfs in
                        conn.execute(sql.SQL("SELECT term, chunk_pks, tfs FROM"
                                             " {s}.segment_postings").format(s=s))}
            assert postings and _dense(conn, s, int(segment_id)) == postings
    finally:
        client.drop_collection("dense_writer")
