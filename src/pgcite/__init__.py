"""pgcite: grounded retrieval with citations on PostgreSQL + pgvector.

>>> import pgcite
>>> client = pgcite.connect()                       # embedded PostgreSQL 18 + pgvector
>>> diary = client.create_collection("pepys")
>>> diary.ingest(["entries.jsonl"])
>>> diary.search("the Great Fire", cutoff="1666-12-31").hits[0].id
"""

from importlib.metadata import version

from pgcite._client import Client, Collection, connect
from pgcite._errors import (
    CollectionExists,
    CollectionNotFound,
    ConfigError,
    DatabaseError,
    EmbedderError,
    FilterError,
    LoadError,
    PgciteError,
)
from pgcite.answer import Answer, Source
from pgcite.config import Settings
from pgcite.embed import Embedder, EmbedderSpec
from pgcite.ingest import Document, FieldMapping, IngestReport, Overrides, Unit
from pgcite.retrieve import Filters, Hit, MetadataPredicate, SearchResult

__version__ = version("pgcite")  # pyproject.toml is the one place the version is written

__all__ = [
    "Answer",
    "Client",
    "Collection",
    "CollectionExists",
    "CollectionNotFound",
    "ConfigError",
    "DatabaseError",
    "Document",
    "Embedder",
    "EmbedderError",
    "EmbedderSpec",
    "FieldMapping",
    "FilterError",
    "Filters",
    "Hit",
    "IngestReport",
    "LoadError",
    "MetadataPredicate",
    "Overrides",
    "PgciteError",
    "SearchResult",
    "Settings",
    "Source",
    "Unit",
    "connect",
]
