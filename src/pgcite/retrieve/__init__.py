"""Retrieve: BM25 + HNSW legs, reciprocal rank fusion and hard filters, in one SQL statement."""

from pgcite.retrieve._filters import Filters, MetadataPredicate
from pgcite.retrieve._hits import Hit, SearchResult

__all__ = ["Filters", "Hit", "MetadataPredicate", "SearchResult"]
