"""Dense term frequencies (migration 0010, segment_dense): which of a segment's lists get them
when their postings are written, and that their bytes are the postings' term frequencies. The
keyword leg that reads them is checked against the BM25 reference in test_keyword_skipping."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

import pgcite
from pgcite.retrieve._sql import DENSE_BLOCK


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
    """Postings for these lists (chunk_pk -> tf), one row each."""
    rows = [(segment_id, term, list(p), list(p.values()), [7] * len(p))
            for term, p in lists.items()]
    with conn.cursor() as cur:
        cur.executemany(sql.SQL(
            "INSERT INTO {s}.segment_postings (segment_id, term, chunk_pks, tfs, lengths)"
            " VALUES (%s, %s, %s, %s, %s)").format(s=s), rows)


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
    conn, s, segment_id = segment
    common = {pk: 1 + pk % 5 for pk in range(3990, 9990, 2)}  # 3,000 postings, 1/2 of 2 blocks
    sparse = {pk: 1 for pk in range(0, 1200 * 500, 500)}      # 1,200 postings, 1/500
    short = {pk: 2 for pk in range(100, 1100)}                # 1,000: under the minimum
    heavy = {**common, 5000: 256}                             # a tf no byte holds
    _write(conn, s, segment_id, {"common": common, "sparse": sparse, "short": short,
                                 "heavy": heavy})
    assert _dense(conn, s, segment_id) == {"common": common}


def test_densify_makes_any_list_dense_when_asked_and_keeps_what_it_made(
        segment: tuple[psycopg.Connection, sql.Identifier, int]) -> None:
    conn, s, segment_id = segment
    lists = {"a": {1: 3, 4001: 1, 9000: 255}, "b": {2: 1}}
    _write(conn, s, segment_id, lists)
    assert _dense(conn, s, segment_id) == {}
    for _ in range(2):  # a second call adds nothing
        conn.execute(sql.SQL("SELECT {s}.densify(%s, 1, %s)").format(s=s),
                     (segment_id, DENSE_BLOCK))
        assert _dense(conn, s, segment_id) == lists
    rows = conn.execute(sql.SQL("SELECT count(*) FROM {s}.segment_dense").format(s=s)).fetchone()
    assert rows == (4,)  # blocks 0, 1 and 2 of "a", block 0 of "b"
