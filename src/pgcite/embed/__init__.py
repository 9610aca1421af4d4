"""Embedders: text → unit vectors, with a recorded model id and weights version."""

from pgcite.embed._base import Embedder, EmbedderSpec
from pgcite.embed._registry import DEFAULT_EMBEDDER, KNOWN, load_embedder

__all__ = ["DEFAULT_EMBEDDER", "KNOWN", "Embedder", "EmbedderSpec", "load_embedder"]
