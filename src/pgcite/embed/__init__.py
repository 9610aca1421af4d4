"""Embedders: text → unit vectors, with a recorded model id and weights version."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pgcite.embed._ids import DEFAULT_EMBEDDER, KNOWN

if TYPE_CHECKING:
    from pgcite.embed._base import Embedder, EmbedderSpec
    from pgcite.embed._registry import load_embedder

# Imported on first use: the package's constants (the CLI's help) come without numpy or httpx.
_LAZY = {"Embedder": "pgcite.embed._base", "EmbedderSpec": "pgcite.embed._base",
         "load_embedder": "pgcite.embed._registry"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'pgcite.embed' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)


__all__ = ["DEFAULT_EMBEDDER", "KNOWN", "Embedder", "EmbedderSpec", "load_embedder"]
