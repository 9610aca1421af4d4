"""Retrieve: BM25 + HNSW legs, their fusion (convex by default) and hard filters, in one SQL
statement; the optional quality stages around it."""

from typing import TYPE_CHECKING

from pgcite._lazy import lazy_exports
from pgcite.retrieve._filters import Filters, MetadataPredicate, filters_from_args, merge_filters
from pgcite.retrieve._hits import Hit, SearchResult, StageEvent

if TYPE_CHECKING:
    from pgcite.retrieve._boost import parse_boost
    from pgcite.retrieve._entities import KINDS, Kind
    from pgcite.retrieve._passages import (
        Passage,
        PassageWindow,
        SnapshotProfile,
        passage_window,
        snapshot_profile,
    )
    from pgcite.retrieve._snippets import DEFAULT_SNIPPETS
    from pgcite.retrieve._view import ConnectionFactory

# What the front doors need beyond these, imported on first use: importing the package (the
# CLI's help does) loads only the filters and hits
__getattr__ = lazy_exports(__name__, {
    "parse_boost": "._boost", "KINDS": "._entities", "Kind": "._entities",
    "Passage": "._passages", "PassageWindow": "._passages", "SnapshotProfile": "._passages",
    "passage_window": "._passages", "snapshot_profile": "._passages",
    "ConnectionFactory": "._view", "DEFAULT_SNIPPETS": "._snippets",
})

__all__ = [
    "KINDS",
    "ConnectionFactory",
    "DEFAULT_SNIPPETS",
    "Filters",
    "Hit",
    "Kind",
    "MetadataPredicate",
    "Passage",
    "PassageWindow",
    "SearchResult",
    "SnapshotProfile",
    "StageEvent",
    "filters_from_args",
    "merge_filters",
    "parse_boost",
    "passage_window",
    "snapshot_profile",
]
