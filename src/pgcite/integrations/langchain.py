"""A LangChain retriever over a pgcite collection (``pip install 'pgcite[langchain]'``).

>>> from pgcite.integrations.langchain import PgciteRetriever
>>> retriever = PgciteRetriever(collection=client.collection("diary"), cutoff="1666-12-31")
>>> docs = retriever.invoke("the Great Fire")
>>> docs[0].id, docs[0].metadata["citation_id"], docs[0].metadata["date"]
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "pgcite.integrations.langchain needs langchain-core: pip install 'pgcite[langchain]'"
    ) from exc

from pydantic import Field

from pgcite import Collection, Filters, MetadataPredicate, Mode
from pgcite.integrations._search import SearchParams, hit_metadata, run


class PgciteRetriever(BaseRetriever):
    """``Collection.search`` as a LangChain retriever: one ``Document`` per passage, in the
    search's order, ``Document.id`` and ``metadata["citation_id"]`` the passage's citation id.

    The filters are hard (applied in SQL): with ``cutoff`` no later passage can come back.
    """

    collection: Collection
    top_k: int = Field(default=5, ge=1, le=1000)
    mode: Mode = "hybrid"
    cutoff: dt.date | None = None
    corpora: list[str] | None = None
    metadata_filters: list[MetadataPredicate] = Field(default_factory=list)
    filters: Filters | None = None
    snapshot_id: int | None = None
    stages: dict[str, Any] | None = None

    def _params(self) -> SearchParams:
        return SearchParams(
            top_k=self.top_k, mode=self.mode, cutoff=self.cutoff, corpora=self.corpora,
            metadata=self.metadata_filters, filters=self.filters, snapshot_id=self.snapshot_id,
            stages=self.stages,
        )

    def _search(self, query: str) -> list[Document]:
        result = run(self.collection, query, self._params())
        return [Document(id=hit.id, page_content=hit.body, metadata=hit_metadata(hit, result))
                for hit in result.hits]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self._search(query)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        # The search is synchronous (psycopg's sync pool, the embedder): a worker thread keeps
        # the event loop free until an async search exists.
        return await asyncio.to_thread(self._search, query)
