"""Re-exports imported on first use (PEP 562), for a package ``__init__`` whose front door names
more than importing the package should load.

A package's ``__init__`` is its front door (docs/architecture.md): the names other packages may
import. Naming a name there must not make ``import pgcite.<pkg>`` -- and so ``pgcite --help``,
which imports the command modules -- load the module behind it (pydantic, psycopg, numpy, a
model). So the ``__init__`` lists where each such name lives, imports them under
``TYPE_CHECKING`` for the type checkers, and sets ``__getattr__ = lazy_exports(__name__, ...)``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``name`` is imported from the module
    ``where[name]`` (absolute, or relative to ``package``: ``"._passages"``) when first asked
    for, then kept in the package, so later lookups do not come here."""

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name], package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
