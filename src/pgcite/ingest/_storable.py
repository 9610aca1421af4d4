"""Can a loaded document be stored at all? Checked per file (or per JSONL record) at load time.

Text that decodes fine can still be refused much later, inside the one transaction that stores the
whole run: PostgreSQL's ``text`` and ``jsonb`` reject U+0000, UTF-8 cannot encode a lone surrogate
(``"\\ud800"`` is valid JSON), and JSON nested thousands deep exhausts Python's and PostgreSQL's
stacks, and ``jsonb`` has no NaN or Infinity (``NaN`` and ``1e999999`` in a JSONL record parse
as Python floats). Each would sink every good file of the run with it, so they are caught here,
where the error can still name the file and line.
"""

from __future__ import annotations

import math
from typing import Any

from pgcite._inputs import text_problem
from pgcite._types import Document

MAX_METADATA_DEPTH = 64  # far beyond any real record; deep enough to catch a nesting bomb


def value_problem(value: Any, depth: int = 0) -> str | None:
    """Why a JSON-like value (strings, numbers, lists, dicts) cannot be stored, or ``None``."""
    if depth > MAX_METADATA_DEPTH:
        return f"nested deeper than {MAX_METADATA_DEPTH} levels"
    if isinstance(value, str):
        return text_problem(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"holds {value!r}, a number JSON cannot store (NaN or Infinity)"
    if isinstance(value, dict):
        for key, item in value.items():
            if problem := value_problem(str(key), depth) or value_problem(item, depth + 1):
                return problem
    elif isinstance(value, list | tuple):
        for item in value:
            if problem := value_problem(item, depth + 1):
                return problem
    return None


def document_problem(doc: Document) -> str | None:
    """Why ``doc`` cannot be stored (naming the field), or ``None``."""
    fields = {"id": doc.document_id, "source": doc.source, "title": doc.title,
              "author": doc.author, "corpus": doc.corpus}
    for name, value in fields.items():
        if value is not None and (problem := text_problem(value)):
            return f"{name} {problem}"
    if problem := value_problem(doc.metadata):
        return f"metadata {problem}"
    for unit in doc.units:
        for name, value in (("text", unit.text), ("title", unit.title),
                            ("locator", unit.locator)):
            if value is not None and (problem := text_problem(value)):
                return f"{name} {problem}"
        if problem := value_problem(unit.metadata):  # an HTML figure's caption, alt, src
            return f"metadata {problem}"
    return None
