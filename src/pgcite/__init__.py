"""pgcite: grounded retrieval with citations on PostgreSQL + pgvector.

>>> import pgcite
>>> client = pgcite.connect()                       # embedded PostgreSQL 18 + pgvector
>>> diary = client.create_collection("pepys")
>>> diary.ingest(["entries.jsonl"])
>>> diary.search("the Great Fire", filters={"cutoff": "1666-12-31"}).hits[0].id

Everything a public signature names is exported here (docs/api.md); modules whose names start
with ``_`` are private.
"""

from importlib.metadata import version

from pgcite._async import AsyncClient, AsyncCollection, connect_async
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
from pgcite._gate_settings import GateSettings
from pgcite._types import Fusion, Mode
from pgcite.answer import (
    Answer,
    EntityFact,
    Generator,
    GeneratorConfig,
    SearchFn,
    Source,
    TraceEvent,
)
from pgcite.answer._selfcheck import ExternalSearch, SelfCheckOptions
from pgcite.config import Settings
from pgcite.embed import Embedder, EmbedderSpec
from pgcite.ingest import Document, FieldMapping, IngestReport, Overrides, Unit
from pgcite.lifecycle import ActivationResult, EvalSummary, GateRefused, Verdict
from pgcite.llm import ChatModel, LLMConfig
from pgcite.retrieve import Filters, Hit, MetadataPredicate, SearchResult
from pgcite.retrieve._entities import EntitiesResult, EntityEdge, EntityEvidence, RelatedEntity
from pgcite.retrieve._hits import StageEvent
from pgcite.retrieve._pipeline import Retrieval, StageModels, Stages, StageTimeouts
from pgcite.retrieve._rerank import Reranker
from pgcite.retrieve._search import Ordering, SearchOptions
from pgcite.retrieve._view import SearchView
from pgcite.store._collections import CollectionInfo, CollectionSettings
from pgcite.store._documents import DocumentInfo, DocumentsRemoved
from pgcite.store._replicas import Replica
from pgcite.store._segments import OptimizeReport
from pgcite.store._snapshots import SnapshotInfo
from pgcite.store._staged import StagedBuild, StagedSummary

__version__ = version("pgcite")  # pyproject.toml is the one place the version is written

__all__ = [
    "ActivationResult",
    "Answer",
    "AsyncClient",
    "AsyncCollection",
    "ChatModel",
    "Client",
    "Collection",
    "CollectionExists",
    "CollectionInfo",
    "CollectionNotFound",
    "CollectionSettings",
    "ConfigError",
    "DatabaseError",
    "Document",
    "DocumentInfo",
    "DocumentsRemoved",
    "Embedder",
    "EmbedderError",
    "EmbedderSpec",
    "EntitiesResult",
    "EntityEdge",
    "EntityEvidence",
    "EntityFact",
    "EvalSummary",
    "ExternalSearch",
    "FieldMapping",
    "FilterError",
    "Filters",
    "Fusion",
    "GateRefused",
    "GateSettings",
    "Generator",
    "GeneratorConfig",
    "Hit",
    "IngestReport",
    "LLMConfig",
    "LoadError",
    "MetadataPredicate",
    "Mode",
    "OptimizeReport",
    "Ordering",
    "Overrides",
    "PgciteError",
    "RelatedEntity",
    "Replica",
    "Reranker",
    "SearchOptions",
    "SearchResult",
    "Retrieval",
    "SearchFn",
    "SearchView",
    "SelfCheckOptions",
    "Settings",
    "SnapshotInfo",
    "Source",
    "StageEvent",
    "StageModels",
    "StageTimeouts",
    "StagedBuild",
    "StagedSummary",
    "Stages",
    "TraceEvent",
    "Unit",
    "Verdict",
    "connect",
    "connect_async",
]
