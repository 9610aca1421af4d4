"""What each MCP tool does, as plain functions over an :class:`Access`: every one calls the
Python API (``Collection.search`` / ``answer``, the passage lookup), so MCP callers get the same
filters, snapshots and checked citations as everyone else."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from pgcite import (
    Answer,
    Collection,
    EntitiesResult,
    EntityFact,
    Filters,
    Generator,
    Hit,
    Mode,
    PgciteError,
)
from pgcite.mcp._access import Access
from pgcite.retrieve import (
    Kind,
    Passage,
    PassageWindow,
    SnapshotProfile,
    merge_filters,
    passage_window,
    snapshot_profile,
)

COLLECTION_URI = "pgcite://collections/{name}"


class CollectionSummary(BaseModel):
    name: str
    uri: str = Field(description="the collection's MCP resource")
    language: str = Field(description="the text search configuration (stemming language)")
    embedding_model: str
    active_snapshot: SnapshotProfile | None = Field(
        description="what searches see now: dates, corpora, metadata fields (None: empty)")


class PassageOut(BaseModel):
    citation_id: str = Field(description="cite the passage as [citation_id]")
    text: str
    citation: str
    date: dt.date | None = Field(description="the passage's first day (ISO)")
    date_end: dt.date | None
    author: str | None
    corpus: str | None
    source: str | None
    locator: str | None
    title: str | None
    metadata: dict[str, Any]
    rank: int | None = None
    score: float | None = None
    keyword_rank: int | None = None
    vector_rank: int | None = None


class SearchOut(BaseModel):
    collection: str
    snapshot_id: int
    passages: list[PassageOut]


class AnswerOut(BaseModel):
    answer: str = Field(description="cites passages as [citation_id]")
    abstained: bool = Field(description="true: the passages did not support an answer")
    citations: list[str] = Field(description="every id here is one of sources")
    sources: list[PassageOut]
    snapshot_id: int
    notes: list[str] = Field(description="what the answer pipeline did (guard, abstention)")
    entities: list[EntityFact] = Field(
        default_factory=list, description="who/where/how often: the entity graph's facts the "
        "answer states, each with the citation ids (of passages naming both entities) it cites")


class PassageWindowOut(BaseModel):
    collection: str
    snapshot_id: int
    passage: PassageOut
    before: list[PassageOut]
    after: list[PassageOut]


def _from_hit(hit: Hit) -> PassageOut:
    return PassageOut(
        citation_id=hit.id, text=hit.body, citation=hit.citation, date=hit.date_start,
        date_end=hit.date_end, author=hit.author, corpus=hit.corpus, source=hit.source,
        locator=hit.locator, title=hit.title, metadata=hit.metadata, rank=hit.rank,
        score=hit.score, keyword_rank=hit.keyword_rank, vector_rank=hit.vector_rank)


def _from_passage(p: Passage) -> PassageOut:
    return PassageOut(
        citation_id=p.id, text=p.body, citation=p.citation, date=p.date_start,
        date_end=p.date_end, author=p.author, corpus=p.corpus, source=p.source,
        locator=p.locator, title=p.title, metadata=p.metadata)


def filters_of(cutoff: dt.date | None, corpora: list[str] | None,
               metadata: Sequence[BaseModel] | None,
               entity: list[str] | None = None) -> Filters:
    # merge_filters: a bad value (a NUL, a key over 200 characters) is an InvalidFilter in
    # pgcite's words, the same as every surface's (pgcite/_inputs.py), not pydantic's
    return merge_filters(dict(cutoff=cutoff, corpora=corpora,
                              metadata=[m.model_dump() for m in metadata or []],
                              entity=entity), None, None, None)


def list_collections(access: Access) -> list[CollectionSummary]:
    out = []
    for info in access.visible():
        col = access.open(info)
        snapshots = [s for s in col.snapshots() if s.snapshot_id == _active_id(col)]
        profile = None
        if snapshots:
            with col.client.connection() as conn:
                profile = snapshot_profile(conn, info, snapshots[0])
        out.append(CollectionSummary(
            name=info.name, uri=COLLECTION_URI.format(name=info.name), language=info.ts_config,
            embedding_model=info.embedder.model_key, active_snapshot=profile))
    return out


def _active_id(col: Collection) -> int | None:
    try:
        return col.active_snapshot().snapshot_id
    except PgciteError:  # no active snapshot yet: the collection is listed, empty
        return None


def search(access: Access, collection: str, query: str, *, top_k: int, mode: Mode,
           filters: Filters, snapshot_id: int | None) -> SearchOut:
    col = access.collection(collection)
    result = col.search(query, top_k=top_k, mode=mode, filters=filters, snapshot_id=snapshot_id,
                        snippets=False)  # the tool returns passages, not snippets
    return SearchOut(collection=col.name, snapshot_id=result.snapshot_id,
                     passages=[_from_hit(h) for h in result.hits])


def answer(access: Access, collection: str, question: str, *, top_k: int, filters: Filters,
           generator: Generator | None, threshold: float | None = None,
           entity_facts: bool = True, neighbours: int | None = None) -> AnswerOut:
    col = access.collection(collection)
    how = dict(threshold=threshold, entity_facts=entity_facts, neighbours=neighbours)
    result: Answer = col.answer(question, top_k=top_k, filters=filters, generator=generator,
                                options={k: v for k, v in how.items() if v is not None})
    return answer_out(result)


def answer_out(result: Answer) -> AnswerOut:
    """An answer as the MCP tools return it."""
    return AnswerOut(
        entities=result.entities,
        answer=result.answer, abstained=result.abstained, citations=result.citations,
        snapshot_id=result.snapshot_id, notes=[f"{t.step}: {t.detail}" for t in result.trace],
        sources=[PassageOut(
            citation_id=s.id, text=s.excerpt, citation=s.citation,
            date=dt.date.fromisoformat(s.date) if s.date else None, date_end=None,
            author=s.author, corpus=s.corpus, source=s.source, locator=s.locator, title=None,
            metadata={}, score=s.score) for s in result.sources],
    )


def get_passage(access: Access, collection: str, citation_id: str, *, neighbours: int,
                filters: Filters, snapshot_id: int | None) -> PassageWindowOut:
    col = access.collection(collection)
    snapshot = col.snapshot(snapshot_id)  # the active one unless named (and allowed), as search
    with col.client.connection() as conn:
        window: PassageWindow = passage_window(conn, col.info, snapshot, citation_id,
                                               neighbours=neighbours, filters=filters)
    return PassageWindowOut(
        collection=col.name, snapshot_id=window.snapshot_id,
        passage=_from_passage(window.passage),
        before=[_from_passage(p) for p in window.before],
        after=[_from_passage(p) for p in window.after])


def describe(access: Access, name: str) -> CollectionSummary:
    access.collection(name)  # visibility check: unknown and forbidden look the same
    return next(s for s in list_collections(access) if s.name == name)


def entities(access: Access, collection: str, *, near: str | None, kind: Kind, limit: int,
             filters: Filters, snapshot_id: int | None) -> EntitiesResult:
    col = access.collection(collection)
    return col.entities(near=near, filters=filters, kind=kind, limit=limit,
                        snapshot_id=snapshot_id)
