"""The LangChain and LlamaIndex retrievers against the real packages and the real database: the
same passages, in the same order, as ``Collection.search``; async entry points off the loop."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from typing import Any

import pytest

import pgcite
from pgcite.retrieve._filters import MetadataPredicate

QUERIES = ["the great fire in the City", "the King at sea", "plague red cross", "microscope"]


class _ThreadProbe(pgcite.Collection):
    """The real collection, recording which thread each search ran on."""

    threads: list[int]

    def search(self, query: str, **kwargs: Any) -> pgcite.SearchResult:
        self.threads.append(threading.get_ident())
        return super().search(query, **kwargs)


def _probe(diary: pgcite.Collection) -> _ThreadProbe:
    probe = _ThreadProbe(diary.client, diary.info)
    probe.threads = []
    return probe


def _loop_thread_and_result(coro_factory: Any) -> tuple[int, Any]:
    async def main() -> tuple[int, Any]:
        return threading.get_ident(), await coro_factory()
    return asyncio.run(main())


# LangChain ------------------------------------------------------------------------------------

def test_langchain_matches_collection_search(diary: pgcite.Collection) -> None:
    pytest.importorskip("langchain_core", reason="the langchain extra is not installed")
    from langchain_core.documents import Document

    from pgcite.integrations.langchain import PgciteRetriever

    retriever = PgciteRetriever(collection=diary, top_k=4)
    for query in QUERIES:
        expected = diary.search(query, top_k=4).hits
        docs = retriever.invoke(query)
        assert all(isinstance(d, Document) for d in docs)
        assert [d.id for d in docs] == [h.id for h in expected]
        assert [d.metadata["citation_id"] for d in docs] == [h.id for h in expected]
        assert [d.page_content for d in docs] == [h.body for h in expected]
        assert [d.metadata["score"] for d in docs] == pytest.approx([h.score for h in expected])
    top = retriever.invoke("the great fire in the City")[0].metadata
    assert top["date"] == top["date_start"] == "1666-09-02" and top["author"] == "Samuel Pepys"
    assert top["keyword_rank"] is not None and top["vector_rank"] is not None
    assert top["fields"]["place"] == "London"


def test_langchain_filters_are_hard(diary: pgcite.Collection) -> None:
    pytest.importorskip("langchain_core", reason="the langchain extra is not installed")
    from pgcite.integrations.langchain import PgciteRetriever

    cutoff = dt.date(1663, 12, 31)
    retriever = PgciteRetriever(collection=diary, top_k=20, cutoff="1663-12-31", corpora=["A"],
                                metadata_filters=[MetadataPredicate(key="place", value="London")])
    docs = retriever.invoke("the great fire in the City")
    expected = diary.search("the great fire in the City", top_k=20, filters={
        "cutoff": cutoff, "corpora": ["A"],
        "metadata": [MetadataPredicate(key="place", value="London")]}).hits
    assert [d.id for d in docs] == [h.id for h in expected] and docs
    assert all(dt.date.fromisoformat(d.metadata["date_end"]) <= cutoff for d in docs)
    assert all(d.metadata["corpus"] == "A" for d in docs)


def test_langchain_ainvoke_runs_the_search_off_the_event_loop(diary: pgcite.Collection) -> None:
    pytest.importorskip("langchain_core", reason="the langchain extra is not installed")
    from pgcite.integrations.langchain import PgciteRetriever

    probe = _probe(diary)
    retriever = PgciteRetriever(collection=probe, top_k=3)
    loop_thread, docs = _loop_thread_and_result(lambda: retriever.ainvoke("the King at sea"))
    assert [d.id for d in docs] == [h.id for h in diary.search("the King at sea", top_k=3).hits]
    assert probe.threads and loop_thread not in probe.threads


# LlamaIndex -----------------------------------------------------------------------------------

def test_llamaindex_matches_collection_search(diary: pgcite.Collection) -> None:
    pytest.importorskip("llama_index.core", reason="the llamaindex extra is not installed")
    from llama_index.core.schema import NodeWithScore

    from pgcite.integrations.llamaindex import PgciteRetriever

    retriever = PgciteRetriever(diary, top_k=4)
    for query in QUERIES:
        expected = diary.search(query, top_k=4).hits
        nodes = retriever.retrieve(query)
        assert all(isinstance(n, NodeWithScore) for n in nodes)
        assert [n.node.node_id for n in nodes] == [h.id for h in expected]
        assert [n.score for n in nodes] == pytest.approx([h.score for h in expected])
        assert [n.node.get_content() for n in nodes] == [h.body for h in expected]
    top = retriever.retrieve("the great fire in the City")[0].node
    assert top.metadata["citation_id"] == top.node_id
    assert top.metadata["date"] == "1666-09-02"
    # what a model sees of the node: the citation id and date, not the retrieval bookkeeping
    from llama_index.core.schema import MetadataMode
    shown = top.get_content(metadata_mode=MetadataMode.LLM)
    assert top.node_id in shown and "vector_distance" not in shown


def test_llamaindex_cutoff_is_hard(diary: pgcite.Collection) -> None:
    pytest.importorskip("llama_index.core", reason="the llamaindex extra is not installed")
    from pgcite.integrations.llamaindex import PgciteRetriever

    cutoff = dt.date(1663, 12, 31)
    nodes = PgciteRetriever(diary, top_k=20, cutoff="1663-12-31").retrieve("the great fire")
    expected = diary.search("the great fire", top_k=20, filters={"cutoff": cutoff}).hits
    assert [n.node.node_id for n in nodes] == [h.id for h in expected] and nodes
    assert all(dt.date.fromisoformat(n.node.metadata["date_end"]) <= cutoff for n in nodes)


def test_llamaindex_bad_filter_is_a_pgcite_error(diary: pgcite.Collection) -> None:
    pytest.importorskip("llama_index.core", reason="the llamaindex extra is not installed")
    from pgcite.integrations.llamaindex import PgciteRetriever

    with pytest.raises(pgcite.FilterError):
        PgciteRetriever(diary, metadata_filters=[MetadataPredicate(key="nope", value=1)]
                        ).retrieve("fire")


def test_llamaindex_aretrieve_runs_the_search_off_the_event_loop(
    diary: pgcite.Collection,
) -> None:
    pytest.importorskip("llama_index.core", reason="the llamaindex extra is not installed")
    from pgcite.integrations.llamaindex import PgciteRetriever

    probe = _probe(diary)
    retriever = PgciteRetriever(probe, top_k=3)
    loop_thread, nodes = _loop_thread_and_result(lambda: retriever.aretrieve("the King at sea"))
    expected = [h.id for h in diary.search("the King at sea", top_k=3).hits]
    assert [n.node.node_id for n in nodes] == expected
    assert probe.threads and loop_thread not in probe.threads
