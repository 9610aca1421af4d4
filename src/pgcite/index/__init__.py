"""The keyword (BM25) index as one component, as Lucene's codec or tantivy's index is: its
tables and their upgrades (``schema.sql``, ``upgrades/``), its constants (``_bm25``: k1, b and the
weight, written once; ``_layout``: block sizes), the segment writer and a snapshot's statistics
(``_writer``), the merges (``_merge``) and the keyword leg of the search statement, as named
parts (``_query``). docs/snapshots.md ("Segments") and docs/retrieval.md ("Large collections")
describe it; tests/test_segments.py checks its scores against an exhaustive BM25 and bm25s.

It works on one collection's schema, named by the caller (``schema``: the schema's name), and
knows nothing of collections, embeddings or snapshots beyond their BM25 statistics: store builds
on it, retrieve composes its leg into the hybrid statement.
"""

from pgcite.index._bm25 import K1, B, idf_value, weight_value
from pgcite.index._bm25 import idf as bm25_idf
from pgcite.index._layout import DENSE_BLOCK
from pgcite.index._merge import (
    MERGE_FACTOR,
    MergeReport,
    OptimizeReport,
    SegmentInfo,
    merge_after_build,
    optimize,
    plan_merges,
    snapshot_segments,
)
from pgcite.index._query import SNAPSHOT, Cte, KeywordLeg, absent, min_max, with_ctes
from pgcite.index._query import count as row_count
from pgcite.index._writer import (
    MemberDelta,
    densify,
    finish_snapshot,
    index_snapshot,
    is_member,
    member_delta,
    new_segment,
)

__all__ = [
    "B",
    "DENSE_BLOCK",
    "K1",
    "MERGE_FACTOR",
    "SNAPSHOT",
    "Cte",
    "KeywordLeg",
    "MemberDelta",
    "MergeReport",
    "OptimizeReport",
    "SegmentInfo",
    "absent",
    "bm25_idf",
    "densify",
    "finish_snapshot",
    "idf_value",
    "index_snapshot",
    "is_member",
    "member_delta",
    "merge_after_build",
    "min_max",
    "new_segment",
    "optimize",
    "plan_merges",
    "row_count",
    "snapshot_segments",
    "weight_value",
    "with_ctes",
]
