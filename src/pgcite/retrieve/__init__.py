"""Retrieve: BM25 + HNSW legs, their fusion (convex by default) and hard filters, in one SQL
statement; the optional quality stages around it."""

from pgcite.retrieve._filters import Filters, MetadataPredicate
from pgcite.retrieve._hits import Hit, SearchResult

__all__ = ["Filters", "Hit", "MetadataPredicate", "SearchResult"]
