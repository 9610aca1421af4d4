"""pgcite: grounded retrieval with citations on PostgreSQL + pgvector.

>>> import pgcite
>>> client = pgcite.connect()                       # embedded PostgreSQL 18 + pgvector
>>> diary = client.create_collection("pepys")
>>> diary.ingest(["entries.jsonl"])
>>> diary.search("the Great Fire", filters={"cutoff": "1666-12-31"}).hits[0].id

Everything a public signature names is exported here (docs/api.md); modules whose names start
with ``_`` are private.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers; at run time each name is imported on first use
    from pgcite._async import AsyncClient, AsyncCollection, connect_async
    from pgcite._client import Client, Collection, DeprecatedAnswerKeywords, connect
    from pgcite._errors import (
        AccessDenied,
        CollectionExists,
        CollectionNotFound,
        CollectionOutdated,
        ConfigError,
        DatabaseError,
        EmbedderError,
        ExhibitExists,
        ExhibitNotFound,
        FilterError,
        InvalidFilter,
        InvalidInput,
        LoadError,
        MissingDependency,
        PgciteError,
        ScanLimitExceeded,
        SnapshotNotFound,
        TimeBudgetExceeded,
    )
    from pgcite._exhibits import Exhibit, citation_page, citation_source
    from pgcite._gate_settings import GateSettings
    from pgcite._streaming import Delta, Final, StreamEvent, astream_answer, stream_answer
    from pgcite._types import Fusion, Mode
    from pgcite.answer import (
        Answer,
        AnswerOptions,
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
    from pgcite.index import MergeReport, OptimizeReport
    from pgcite.ingest import Document, FieldChange, FieldMapping, IngestReport, Overrides, Unit
    from pgcite.lifecycle import ActivationResult, EvalSummary, GateRefused, Verdict
    from pgcite.llm import ChatModel, LLMConfig
    from pgcite.retrieve import Filters, Hit, MetadataPredicate, SearchResult
    from pgcite.retrieve._entities import EntitiesResult, EntityEdge, EntityEvidence, RelatedEntity
    from pgcite.retrieve._hits import StageEvent
    from pgcite.retrieve._pipeline import Retrieval, StageModels, Stages, StageTimeouts
    from pgcite.retrieve._rerank import Reranker
    from pgcite.retrieve._search import Ordering, SearchOptions
    from pgcite.retrieve._sources import CitedSource, PageRegion, PassageNotFound, SourceDocument
    from pgcite.retrieve._view import SearchView
    from pgcite.store._collections import CollectionInfo, CollectionSettings
    from pgcite.store._documents import DocumentInfo, DocumentsRemoved
    from pgcite.store._exhibits import ExhibitInfo, ExhibitSettings
    from pgcite.store._migrations import UpgradeStep
    from pgcite.store._page_images import StoredPage
    from pgcite.store._replicas import Replica
    from pgcite.store._snapshots import SnapshotInfo
    from pgcite.store._staged import StagedBuild, StagedSummary

    # Where each public name lives. Imported on first use (PEP 562): ``import pgcite`` -- and so
# every CLI command, ``pgcite --help`` first -- does not pay for numpy, psycopg, httpx or the
# models until something uses them.
_EXPORTS: dict[str, str] = {
    "AccessDenied": "pgcite._errors",
    "ActivationResult": "pgcite.lifecycle",
    "Answer": "pgcite.answer",
    "AnswerOptions": "pgcite.answer",
    "AsyncClient": "pgcite._async",
    "AsyncCollection": "pgcite._async",
    "astream_answer": "pgcite._streaming",
    "ChatModel": "pgcite.llm",
    "citation_page": "pgcite._exhibits",
    "citation_source": "pgcite._exhibits",
    "CitedSource": "pgcite.retrieve._sources",
    "Client": "pgcite._client",
    "Collection": "pgcite._client",
    "CollectionExists": "pgcite._errors",
    "CollectionInfo": "pgcite.store._collections",
    "CollectionNotFound": "pgcite._errors",
    "CollectionOutdated": "pgcite._errors",
    "CollectionSettings": "pgcite.store._collections",
    "ConfigError": "pgcite._errors",
    "connect": "pgcite._client",
    "connect_async": "pgcite._async",
    "DatabaseError": "pgcite._errors",
    "Delta": "pgcite._streaming",
    "DeprecatedAnswerKeywords": "pgcite._client",
    "Document": "pgcite.ingest",
    "DocumentInfo": "pgcite.store._documents",
    "DocumentsRemoved": "pgcite.store._documents",
    "Embedder": "pgcite.embed",
    "EmbedderError": "pgcite._errors",
    "EmbedderSpec": "pgcite.embed",
    "EntitiesResult": "pgcite.retrieve._entities",
    "EntityEdge": "pgcite.retrieve._entities",
    "EntityEvidence": "pgcite.retrieve._entities",
    "EntityFact": "pgcite.answer",
    "EvalSummary": "pgcite.lifecycle",
    "Exhibit": "pgcite._exhibits",
    "ExhibitExists": "pgcite._errors",
    "ExhibitInfo": "pgcite.store._exhibits",
    "ExhibitNotFound": "pgcite._errors",
    "ExhibitSettings": "pgcite.store._exhibits",
    "ExternalSearch": "pgcite.answer._selfcheck",
    "FieldChange": "pgcite.ingest",
    "FieldMapping": "pgcite.ingest",
    "FilterError": "pgcite._errors",
    "Final": "pgcite._streaming",
    "Filters": "pgcite.retrieve",
    "Fusion": "pgcite._types",
    "GateRefused": "pgcite.lifecycle",
    "GateSettings": "pgcite._gate_settings",
    "Generator": "pgcite.answer",
    "GeneratorConfig": "pgcite.answer",
    "Hit": "pgcite.retrieve",
    "IngestReport": "pgcite.ingest",
    "InvalidFilter": "pgcite._errors",
    "InvalidInput": "pgcite._errors",
    "LLMConfig": "pgcite.llm",
    "LoadError": "pgcite._errors",
    "MetadataPredicate": "pgcite.retrieve",
    "MergeReport": "pgcite.index",
    "MissingDependency": "pgcite._errors",
    "Mode": "pgcite._types",
    "OptimizeReport": "pgcite.index",
    "PageRegion": "pgcite.retrieve._sources",
    "PassageNotFound": "pgcite.retrieve._sources",
    "Ordering": "pgcite.retrieve._search",
    "Overrides": "pgcite.ingest",
    "PgciteError": "pgcite._errors",
    "RelatedEntity": "pgcite.retrieve._entities",
    "Replica": "pgcite.store._replicas",
    "Reranker": "pgcite.retrieve._rerank",
    "Retrieval": "pgcite.retrieve._pipeline",
    "ScanLimitExceeded": "pgcite._errors",
    "SearchFn": "pgcite.answer",
    "SearchOptions": "pgcite.retrieve._search",
    "SearchResult": "pgcite.retrieve",
    "SearchView": "pgcite.retrieve._view",
    "SelfCheckOptions": "pgcite.answer._selfcheck",
    "Settings": "pgcite.config",
    "SnapshotInfo": "pgcite.store._snapshots",
    "SnapshotNotFound": "pgcite._errors",
    "SourceDocument": "pgcite.retrieve._sources",
    "StoredPage": "pgcite.store._page_images",
    "stream_answer": "pgcite._streaming",
    "StreamEvent": "pgcite._streaming",
    "TimeBudgetExceeded": "pgcite._errors",
    "Source": "pgcite.answer",
    "StagedBuild": "pgcite.store._staged",
    "StagedSummary": "pgcite.store._staged",
    "StageEvent": "pgcite.retrieve._hits",
    "StageModels": "pgcite.retrieve._pipeline",
    "Stages": "pgcite.retrieve._pipeline",
    "StageTimeouts": "pgcite.retrieve._pipeline",
    "TraceEvent": "pgcite.answer",
    "Unit": "pgcite.ingest",
    "UpgradeStep": "pgcite.store._migrations",
    "Verdict": "pgcite.lifecycle",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        value: Any = version("pgcite")  # pyproject.toml is the one place it is written
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'pgcite' has no attribute {name!r}")
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__, "__version__"])


__all__ = [
    "AccessDenied",
    "ActivationResult",
    "Answer",
    "AnswerOptions",
    "AsyncClient",
    "AsyncCollection",
    "ChatModel",
    "CitedSource",
    "Client",
    "Collection",
    "CollectionExists",
    "CollectionInfo",
    "CollectionNotFound",
    "CollectionOutdated",
    "CollectionSettings",
    "ConfigError",
    "DatabaseError",
    "Delta",
    "DeprecatedAnswerKeywords",
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
    "Exhibit",
    "ExhibitExists",
    "ExhibitInfo",
    "ExhibitNotFound",
    "ExhibitSettings",
    "ExternalSearch",
    "FieldChange",
    "FieldMapping",
    "FilterError",
    "Filters",
    "Final",
    "Fusion",
    "GateRefused",
    "GateSettings",
    "Generator",
    "GeneratorConfig",
    "Hit",
    "IngestReport",
    "InvalidFilter",
    "InvalidInput",
    "LLMConfig",
    "LoadError",
    "MetadataPredicate",
    "MergeReport",
    "MissingDependency",
    "Mode",
    "OptimizeReport",
    "PageRegion",
    "PassageNotFound",
    "Ordering",
    "Overrides",
    "PgciteError",
    "RelatedEntity",
    "Replica",
    "Reranker",
    "SearchOptions",
    "SearchResult",
    "Retrieval",
    "ScanLimitExceeded",
    "SearchFn",
    "SearchView",
    "SelfCheckOptions",
    "Settings",
    "SnapshotInfo",
    "SnapshotNotFound",
    "Source",
    "SourceDocument",
    "StageEvent",
    "StageModels",
    "StageTimeouts",
    "StagedBuild",
    "StagedSummary",
    "StoredPage",
    "StreamEvent",
    "Stages",
    "TimeBudgetExceeded",
    "TraceEvent",
    "Unit",
    "UpgradeStep",
    "Verdict",
    "citation_page",
    "citation_source",
    "connect",
    "astream_answer",
    "connect_async",
    "stream_answer",
]
