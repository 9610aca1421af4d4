"""The async API against the real database: the same hits as the sync API for the same query
and snapshot, concurrently too; answer and ingest give what the sync API gives."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

import pgcite

QUERIES = ["the great fire in the City", "the King at sea", "plague red cross", "microscope"]


def _run(client: pgcite.Client, body: Any) -> Any:
    async def main() -> Any:
        async with await pgcite.connect_async(client.db.url) as aclient:
            return await body(aclient)
    return asyncio.run(main())


def _same(a: pgcite.SearchResult, b: pgcite.SearchResult) -> None:
    assert [h.id for h in a.hits] == [h.id for h in b.hits] and a.hits
    assert [h.score for h in a.hits] == pytest.approx([h.score for h in b.hits])
    assert [(h.keyword_rank, h.vector_rank) for h in a.hits] == [
        (h.keyword_rank, h.vector_rank) for h in b.hits]
    assert a.snapshot_id == b.snapshot_id and a.confidence == pytest.approx(b.confidence)


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "vector"])
def test_async_search_returns_the_sync_hits(client: pgcite.Client, diary: pgcite.Collection,
                                            mode: str) -> None:
    plain = {"route": False}  # the awaited statement path (no optional stages)

    async def body(aclient: pgcite.AsyncClient) -> list[pgcite.SearchResult]:
        col = await aclient.collection(diary.name)
        return [await col.search(q, top_k=5, mode=mode, stages=plain, explain=True)
                for q in QUERIES if mode != "keyword" or q != "microscope"]
    for got in _run(client, body):
        expected = diary.search(got.query, top_k=5, mode=mode, stages=plain, explain=True)
        _same(got, expected)
        assert [h.id for h in got.dropped] == [h.id for h in expected.dropped]


def test_async_filters_snapshot_and_stages(client: pgcite.Client,
                                           diary: pgcite.Collection) -> None:
    snapshot = diary.active_snapshot().snapshot_id
    cutoff = dt.date(1665, 12, 31)

    async def body(aclient: pgcite.AsyncClient) -> tuple[Any, Any]:
        col = await aclient.collection(diary.name)
        filtered = await col.search("the great fire", top_k=20, cutoff=cutoff, corpora=["A"],
                                    snapshot_id=snapshot, stages={"route": False})
        routed = await col.search("the great fire")  # the default stages: via the sync API
        return filtered, routed
    filtered, routed = _run(client, body)
    _same(filtered, diary.search("the great fire", top_k=20, cutoff=cutoff, corpora=["A"],
                                 snapshot_id=snapshot, stages={"route": False}))
    assert all(h.date_end is not None and h.date_end <= cutoff for h in filtered.hits)
    _same(routed, diary.search("the great fire"))


def test_32_concurrent_async_searches_match_the_sync_ones(
    client: pgcite.Client, diary: pgcite.Collection,
) -> None:
    queries = [QUERIES[i % len(QUERIES)] for i in range(32)]

    async def body(aclient: pgcite.AsyncClient) -> list[pgcite.SearchResult]:
        col = await aclient.collection(diary.name)
        return list(await asyncio.gather(*(col.search(q, stages={"route": False})
                                           for q in queries)))
    results = _run(client, body)
    expected = {q: diary.search(q, stages={"route": False}) for q in QUERIES}
    for got in results:
        _same(got, expected[got.query])


def test_async_answer_and_errors(client: pgcite.Client, diary: pgcite.Collection) -> None:
    async def body(aclient: pgcite.AsyncClient) -> Any:
        col = await aclient.collection(diary.name)
        answer = await col.answer("Where did the fire begin?")
        with pytest.raises(pgcite.FilterError):
            await col.search("fire", filters={"metadata": [{"key": "nope", "value": 1}]},
                             stages={"route": False})
        with pytest.raises(pgcite.PgciteError):
            await col.search("   ", stages={"route": False})
        return answer
    answer = _run(client, body)
    sync = diary.answer("Where did the fire begin?")
    assert answer.answer == sync.answer and answer.citations == sync.citations
