"""The async API against the real database: the same hits as the sync API for the same query
and snapshot -- every mode, filters, the default stages and the optional ones, explain,
snippets, the undated count -- concurrently too; answers and streamed answers as the sync API
gives them; model work in the bounded executor, never on the event loop."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

import pgcite
from pgcite._streaming import Final, astream_answer

QUERIES = ["the great fire in the City", "the King at sea", "plague red cross", "microscope"]

# (search keywords) cases: the awaited path must reproduce each exactly
CASES: list[dict[str, Any]] = [
    {"mode": "hybrid"},  # the default stages: the heuristic router
    {"mode": "hybrid", "stages": {"route": False}},
    {"mode": "keyword", "stages": {"route": False}},
    {"mode": "vector"},
    {"mode": "hybrid", "explain": True, "top_k": 3},
    {"filters": {"cutoff": "1665-12-31", "corpora": ["A"]}, "top_k": 20},
    {"filters": {"metadata": [{"key": "place", "value": "London"}]}},
    {"stages": {"route": False, "decompose": True}},
    {"stages": {"boosts": [{"kind": "recency", "half_life_days": 365,
                            "reference": "1667-01-01"}]}},
    {"options": {"fusion": "rrf", "weights": [1.0, 2.0]}, "snippets": False},
]


def _run(client: pgcite.Client, body: Any) -> Any:
    async def main() -> Any:
        async with await pgcite.connect_async(client.db.url) as aclient:
            return await body(aclient)
    return asyncio.run(main())


def _same(a: pgcite.SearchResult, b: pgcite.SearchResult) -> None:
    assert [h.id for h in a.hits] == [h.id for h in b.hits]
    assert [h.score for h in a.hits] == pytest.approx([h.score for h in b.hits])
    assert [(h.keyword_rank, h.vector_rank, h.rank) for h in a.hits] == [
        (h.keyword_rank, h.vector_rank, h.rank) for h in b.hits]
    assert [(h.snippet, h.highlights) for h in a.hits] == [
        (h.snippet, h.highlights) for h in b.hits]
    assert [h.id for h in a.dropped] == [h.id for h in b.dropped]
    assert [(e.stage, e.outcome, e.detail) for e in a.stages] == [
        (e.stage, e.outcome, e.detail) for e in b.stages]
    assert a.snapshot_id == b.snapshot_id and a.confidence == pytest.approx(b.confidence)
    assert a.undated_excluded == b.undated_excluded and a.mode == b.mode


@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(map(str, c.items()))[:60])
def test_async_search_returns_the_sync_hits(client: pgcite.Client, diary: pgcite.Collection,
                                            case: dict[str, Any]) -> None:
    queries = QUERIES + ["the fire and the plague"]  # two concepts: decomposition splits it

    async def body(aclient: pgcite.AsyncClient) -> list[pgcite.SearchResult]:
        col = await aclient.collection(diary.name)
        found = [await col.search(q, **case) for q in queries]
        assert aclient.offload.stats.calls > 0 or case.get("mode") == "keyword"
        return found
    results = _run(client, body)
    assert any(r.hits for r in results)
    for got in results:
        _same(got, diary.search(got.query, **case))


def test_async_search_of_a_named_snapshot_with_a_vector(client: pgcite.Client,
                                                        diary: pgcite.Collection) -> None:
    snapshot = diary.active_snapshot().snapshot_id
    vector = diary.view().models.embedder.embed_query("fire")  # type: ignore[union-attr]

    async def body(aclient: pgcite.AsyncClient) -> pgcite.SearchResult:
        col = await aclient.collection(diary.name)
        before = aclient.offload.stats.calls
        found = await col.search("the great fire", query_vector=vector, snapshot_id=snapshot,
                                 stages={"route": False})
        # the named snapshot is looked up in the executor; the given vector is not re-embedded
        assert aclient.offload.stats.calls == before + 1
        return found
    got = _run(client, body)
    _same(got, diary.search("the great fire", query_vector=vector, snapshot_id=snapshot,
                            stages={"route": False}))
    assert got.snapshot_id == snapshot and got.hits


def test_32_concurrent_async_searches_match_the_sync_ones(
    client: pgcite.Client, diary: pgcite.Collection,
) -> None:
    queries = [QUERIES[i % len(QUERIES)] for i in range(32)]

    async def body(aclient: pgcite.AsyncClient) -> list[pgcite.SearchResult]:
        col = await aclient.collection(diary.name)
        return list(await asyncio.gather(*(col.search(q) for q in queries)))
    results = _run(client, body)
    expected = {q: diary.search(q) for q in QUERIES}
    for got in results:
        _same(got, expected[got.query])


@pytest.mark.parametrize("kwargs", [
    {}, {"cutoff": dt.date(1665, 12, 31)}, {"mode": "keyword", "top_k": 3},
    {"filters": {"corpora": ["A"]}, "stages": {"route": False}},
    {"filters": {"cutoff": "1665-12-31"}, "options": {"token_budget": 800, "neighbours": 0}},
])
def test_async_answer_is_the_sync_answer(client: pgcite.Client, diary: pgcite.Collection,
                                         kwargs: dict[str, Any]) -> None:
    question = "Where did the great fire begin?"

    async def body(aclient: pgcite.AsyncClient) -> pgcite.Answer:
        col = await aclient.collection(diary.name)
        return await col.answer(question, **kwargs)
    got, sync = _run(client, body), diary.answer(question, **kwargs)
    assert got.answer == sync.answer and got.citations == sync.citations
    assert [s.id for s in got.sources] == [s.id for s in sync.sources]
    assert got.abstained == sync.abstained and got.undated_excluded == sync.undated_excluded


def test_async_stream_ends_with_the_checked_answer(client: pgcite.Client,
                                                   diary: pgcite.Collection) -> None:
    async def body(aclient: pgcite.AsyncClient) -> list[Any]:
        col = await aclient.collection(diary.name)
        return [event async for event in astream_answer(col, "Where did the great fire begin?")]
    events = _run(client, body)
    final = events[-1]
    assert isinstance(final, Final) and all(not isinstance(e, Final) for e in events[:-1])
    streamed = "".join(e.text for e in events[:-1])
    assert streamed == final.streamed_text and not final.replaced
    assert final.answer.answer == diary.answer("Where did the great fire begin?").answer


def test_async_errors_are_the_sync_errors(client: pgcite.Client,
                                          diary: pgcite.Collection) -> None:
    async def body(aclient: pgcite.AsyncClient) -> None:
        col = await aclient.collection(diary.name)
        with pytest.raises(pgcite.FilterError):
            await col.search("fire", filters={"metadata": [{"key": "nope", "value": 1}]})
        with pytest.raises(pgcite.PgciteError, match="empty"):
            await col.search("   ")
        with pytest.raises(pgcite.PgciteError, match="no snapshot 999"):
            await col.search("fire", snapshot_id=999)
        with pytest.raises(pgcite.ConfigError, match="top_k"):
            await col.search("fire", top_k=0)
        with pytest.raises(pgcite.FilterError):
            async for _ in astream_answer(col, "fire",
                                          filters={"metadata": [{"key": "nope", "value": 1}]}):
                pass
    _run(client, body)


def test_the_async_ingest_takes_the_sync_ingests_keywords() -> None:
    """One list of ingest keywords (IngestKeywords) types the async ingest: it must be the sync
    signature's, so that a keyword added to one is typed on the other."""
    import inspect

    from pgcite._client import IngestKeywords

    params = inspect.signature(pgcite.Collection.ingest).parameters.values()
    keywords = {p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert set(IngestKeywords.__annotations__) == keywords
