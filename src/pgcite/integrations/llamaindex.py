"""A LlamaIndex retriever over a pgcite collection (``pip install 'pgcite[llamaindex]'``).

>>> from pgcite.integrations.llamaindex import PgciteRetriever
>>> retriever = PgciteRetriever(client.collection("diary"), cutoff="1666-12-31")
>>> nodes = retriever.retrieve("the Great Fire")
>>> nodes[0].node.node_id, nodes[0].score, nodes[0].node.metadata["date"]
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence
from typing import Any

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "pgcite.integrations.llamaindex needs llama-index-core: pip install 'pgcite[llamaindex]'"
    ) from exc

from pgcite import Collection, Filters, MetadataPredicate
from pgcite.integrations._search import SearchParams, hit_metadata, run

# Keys LlamaIndex leaves out of the text it embeds and shows an LLM: scores and ranks are
# retrieval bookkeeping, not content. The citation id, date and author stay visible.
_HIDDEN = ["document_id", "collection", "snapshot_id", "score", "rank", "keyword_rank",
           "keyword_score", "vector_rank", "vector_distance", "fields"]


class PgciteRetriever(BaseRetriever):
    """``Collection.search`` as a LlamaIndex retriever: one ``NodeWithScore`` per passage, in the
    search's order; the node id is the citation id, the score the fused score.

    The filters are hard (applied in SQL): with ``cutoff`` no later passage can come back.
    """

    def __init__(
        self,
        collection: Collection,
        *,
        top_k: int = 5,
        mode: str = "hybrid",
        cutoff: dt.date | str | None = None,
        corpora: Sequence[str] | None = None,
        metadata_filters: Sequence[MetadataPredicate] = (),
        filters: Filters | None = None,
        snapshot_id: int | None = None,
        stages: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.collection = collection
        self.params = SearchParams.model_validate({
            "top_k": top_k, "mode": mode, "cutoff": cutoff,
            "corpora": list(corpora) if corpora is not None else None,
            "metadata": list(metadata_filters), "filters": filters,
            "snapshot_id": snapshot_id, "stages": stages,
        })

    def _nodes(self, query: str) -> list[NodeWithScore]:
        result = run(self.collection, query, self.params)
        return [
            NodeWithScore(
                node=TextNode(id_=hit.id, text=hit.body, metadata=hit_metadata(hit, result),
                              excluded_embed_metadata_keys=list(_HIDDEN),
                              excluded_llm_metadata_keys=list(_HIDDEN)),
                score=hit.score,
            )
            for hit in result.hits
        ]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(query_bundle.query_str)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # LlamaIndex's default runs _retrieve on the event loop; the search is synchronous, so a
        # worker thread keeps the loop free until an async search exists.
        return await asyncio.to_thread(self._nodes, query_bundle.query_str)
