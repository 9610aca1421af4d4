"""Embedders: text → unit vectors, with a recorded model id and weights version."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pgcite._lazy import lazy_exports
from pgcite.embed._ids import DEFAULT_EMBEDDER, KNOWN

if TYPE_CHECKING:
    from pgcite.embed._base import Embedder, EmbedderSpec
    from pgcite.embed._registry import embedder_for_key, load_embedder

# Imported on first use: the package's constants (the CLI's help) come without numpy or httpx.
__getattr__ = lazy_exports(__name__, {
    "Embedder": "._base", "EmbedderSpec": "._base",
    "embedder_for_key": "._registry", "load_embedder": "._registry",
})

__all__ = ["DEFAULT_EMBEDDER", "KNOWN", "Embedder", "EmbedderSpec", "embedder_for_key",
           "load_embedder"]
