"""Settings, read from ``PGCITE_*`` environment variables (and overridable by CLI flags)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import platformdirs
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def _default_data_dir() -> Path:
    return platformdirs.user_data_path("pgcite")


def _default_models_dir() -> Path:
    return platformdirs.user_cache_path("pgcite") / "models"


class Settings(BaseSettings):
    """Where the database lives and how pgcite talks to it.

    With no ``database_url`` pgcite runs an embedded PostgreSQL 18 + pgvector server whose data
    directory is ``data_dir/pg18``; with one, it uses that server (which must have pgvector ≥ 0.8).
    """

    model_config = SettingsConfigDict(env_prefix="PGCITE_", extra="ignore")

    database_url: str | None = Field(
        default=None, description="PostgreSQL URL; unset = embedded server"
    )
    # Read replicas (streaming standbys of database_url, or of the embedded server: `pgcite
    # server standby`): searches and answers go to a healthy one, everything else to the
    # primary (docs/scale-out.md). Comma- or space-separated in PGCITE_READ_URLS.
    read_urls: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="read-replica URLs; reads go there, writes never")
    replica_retry_s: float = Field(
        default=5.0, gt=0, le=3600, description="a failed replica is tried again after this")
    replica_wait_s: float = Field(
        default=1.0, ge=0, le=60,
        description="how long a read naming a snapshot a replica has not replayed waits for "
        "it there before it goes to the primary")
    data_dir: Path = Field(
        default_factory=_default_data_dir, description="Embedded server and caches live here"
    )
    # The embedded server's shared buffers, its page cache (PostgreSQL's units: 512MB, 2GB):
    # unset = a quarter of this machine's memory (a container's limit where less), within
    # 128MB and 8GB (pgcite/store/_server.py). Applied when pgcite starts the server; one that
    # runs already keeps its own until it restarts. A server by URL keeps its own settings.
    embedded_shared_buffers: str | None = Field(
        default=None, pattern=r"^[1-9][0-9]*(kB|MB|GB|TB)$",
        description="shared_buffers of the embedded server; unset = a quarter of the memory")
    # How long the embedded server outlives the last process using it, so that the next command
    # finds it running (starting it costs most of a second); a keeper process stops it then, and
    # also when its users died by SIGKILL (pgcite/store/_keeper.py). 0: the last process stops it.
    server_idle_s: float = Field(
        default=60.0, ge=0, le=86400,
        description="seconds the embedded server stays up after its last process; 0 = none")
    # Models derived on this machine (ONNX exports), keyed by their weights' hash: a cache that
    # every data dir on the machine shares (a file is written whole, then renamed, so
    # concurrent exports of the same model are safe), not one export per data dir.
    models_dir: Path = Field(default_factory=_default_models_dir,
                             description="derived models (ONNX exports), keyed by weights hash")
    # The keyword index's merges after each build (pgcite.index._merge: tiered, each in its own
    # transaction, never blocking a search): at most this many seconds of them, merges larger
    # than that allows left for `pgcite collection optimize`. 0: none.
    merge_budget_s: float = Field(
        default=5.0, ge=0, le=3600,
        description="seconds of keyword-index merges after each build (0: none)")
    embed_batch_size: int = Field(default=32, ge=1, le=4096)
    # How the packaged MiniLM and ``st:`` folders run: onnx (a graph exported here from the same
    # weights, same vectors to cosine 0.9999, faster than torch: bench/results/embedding),
    # onnx-int8 (that graph quantised: faster again, vectors ≈ 0.995 cosine to fp32, hence its
    # own model key) or torch. auto (the default): int8 for the packaged MiniLM, where it was
    # measured (embed/_registry.py, INT8_BY_DEFAULT), onnx fp32 for other folders. It picks the
    # model of NEW collections and builds; a query always runs the backend its snapshot's model
    # key records, and an existing collection keeps its model.
    embed_backend: Literal["auto", "onnx", "onnx-int8", "torch"] = Field(
        default="auto", description="runtime of local sentence-transformers models (auto: "
        "int8 for the packaged MiniLM, onnx fp32 for other folders; onnx: fp32)")
    embed_threads: int | None = Field(
        default=None, ge=1, le=256,
        description="threads embedding documents at once on the onnx backends, one text"
                    " each; unset = all cores")
    embed_url: str | None = Field(
        default=None, description="Base URL of an embedding server for http embedders"
    )
    embed_api_key: str | None = None
    # The chat model for HyDE, decomposition, routing, grading and the LLM reranker. Unset:
    # those stages are skipped (and say so), never faked.
    llm: Literal["openai", "anthropic", "llama-cpp"] | None = Field(
        default=None, description="chat model kind; llama-cpp without a path = packaged SmolLM2")
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: SecretStr | None = None
    llm_model_path: Path | None = None
    llm_timeout_s: float = Field(default=30.0, gt=0, le=600)
    # Situating calls of a contextual = "llm" ingest in flight at once: an OpenAI-compatible
    # server (vLLM, Ollama, llama.cpp server) batches them; one at a time it idles.
    llm_concurrency: int = Field(default=4, ge=1, le=64)
    # The reranker: a local CrossEncoder folder, a TEI or Cohere-compatible /rerank, or the LLM.
    reranker: Literal["cross-encoder", "tei", "cohere", "llm"] | None = None
    reranker_path: Path | None = None
    reranker_url: str | None = None
    reranker_model: str | None = None
    reranker_api_key: SecretStr | None = None
    reranker_timeout_s: float = Field(default=5.0, gt=0, le=120)

    # OCR of scans, per file (docs/ingest.md, "OCR"): a file over a limit is refused whole,
    # before the work, so an upload cannot buy hours of CPU or gigabytes of memory. Pages: a
    # PDF's pages without a text layer, an image's frames (a thick register; at ~3 s a page,
    # about the time budget). Pixels per page, checked from the header before decoding: 40 MP
    # holds A3 at 400 dpi or A4 at 600 dpi (a PDF page is rendered at 300 dpi, or less to fit),
    # and bounds a page's memory (bench/results/ocr: peak memory by page size). Seconds: wall
    # time for one file's OCR, Tesseract included (killed when it runs out).
    ocr_max_pages: int = Field(default=300, ge=1, le=100_000,
                               description="pages (or image frames) read by OCR per file")
    ocr_max_page_pixels: int = Field(default=40_000_000, ge=1_000_000, le=1_000_000_000,
                                     description="pixels of one page image read by OCR")
    ocr_max_seconds: float = Field(default=900.0, gt=0, le=86_400,
                                   description="seconds of OCR per file")

    @field_validator("read_urls", mode="before")
    @classmethod
    def _split_urls(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part for part in value.replace(",", " ").split() if part]
        return value
