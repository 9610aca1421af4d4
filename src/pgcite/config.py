"""Settings, read from ``PGCITE_*`` environment variables (and overridable by CLI flags)."""

from __future__ import annotations

from pathlib import Path

import platformdirs
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_data_dir() -> Path:
    return platformdirs.user_data_path("pgcite")


class Settings(BaseSettings):
    """Where the database lives and how pgcite talks to it.

    With no ``database_url`` pgcite runs an embedded PostgreSQL 18 + pgvector server whose data
    directory is ``data_dir/pg18``; with one, it uses that server (which must have pgvector ≥ 0.8).
    """

    model_config = SettingsConfigDict(env_prefix="PGCITE_", extra="ignore")

    database_url: str | None = Field(
        default=None, description="PostgreSQL URL; unset = embedded server"
    )
    data_dir: Path = Field(
        default_factory=_default_data_dir, description="Embedded server and caches live here"
    )
    embed_batch_size: int = Field(default=32, ge=1, le=4096)
    embed_url: str | None = Field(
        default=None, description="Base URL of an embedding server for http embedders"
    )
    embed_api_key: str | None = None
