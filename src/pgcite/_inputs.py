"""What every surface accepts: HTTP, the inspector's API, MCP (over HTTP and stdio), the CLI and
Python. One set of rules, so that the same bad input gets the same answer everywhere -- a 422 over
HTTP, a tool error over MCP, one line from the CLI, an :class:`InvalidInput` in Python -- and never
reaches the database, where it was a 500 or a traceback.

Why these rules: PostgreSQL stores no NUL (U+0000) in ``text`` or ``jsonb``, UTF-8 cannot encode
a lone surrogate (``"\\ud800"`` is valid JSON, and what Python makes of undecodable command-line
bytes), JSON cannot carry NaN or Infinity back, and every length is bounded so that no request
costs more than its bound.

Two ways in, one rule: request models (service/_models.py, the inspector's body, the MCP tools'
arguments, :class:`pgcite.Filters`) use the annotated types below; the Python API checks its
text arguments with :func:`check_text`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError

from pgcite._errors import InvalidInput

MAX_QUERY_CHARS = 2000  # a query or a question
MAX_NAME_CHARS = 200  # a corpus, author, source, entity, metadata key
MAX_VALUE_CHARS = 1000  # a metadata value
MAX_ID_CHARS = 1000  # a document or citation id
MAX_LIST_ITEMS = 50  # corpora, authors, sources
MAX_PREDICATES = 32  # metadata predicates of one filter
MAX_IN_VALUES = 100  # values of one `in` predicate
MAX_ENTITIES = 16  # entities one search must mention
MAX_EXCERPT = 120  # characters of any caller's text an error message may carry

_SURROGATE = re.compile(r"[\ud800-\udfff]")
_PATH_PART = re.compile(r"\w+")


def text_problem(text: str) -> str | None:
    """Why PostgreSQL could not store ``text`` (or JSON not carry it), or ``None``."""
    if "\x00" in text:
        return "contains a NUL character (U+0000), which PostgreSQL cannot store"
    if match := _SURROGATE.search(text):
        return f"contains a lone surrogate (U+{ord(match.group()):04X}), which is not valid Unicode"
    return None


def clean_text(text: str) -> str:
    """``text``, or ValueError saying why no surface accepts it (a pydantic validator)."""
    if problem := text_problem(text):
        raise ValueError(f"text {problem}")
    return text


CleanStr = Annotated[str, AfterValidator(clean_text)]
# the length first (pydantic's "String should have at most N characters"), then the content
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS), AfterValidator(clean_text)]
QueryText = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS),
                      AfterValidator(clean_text)]
Finite = Annotated[float, Field(allow_inf_nan=False)]
Scalar = Annotated[str, Field(max_length=MAX_VALUE_CHARS), AfterValidator(clean_text)] | bool | int \
    | Finite
Names = Annotated[list[Name], Field(max_length=MAX_LIST_ITEMS)]


def check_text(text: object, field: str, *, max_chars: int, allow_empty: bool = False) -> str:
    """``text`` if every surface accepts it as ``field``, else :class:`InvalidInput` naming the
    field and the rule broken (never the value)."""
    if not isinstance(text, str):
        raise InvalidInput(f"{field}: expected text, got {type(text).__name__}")
    if problem := text_problem(text):
        raise InvalidInput(f"{field}: text {problem}")
    if len(text) > max_chars:
        raise InvalidInput(f"{field}: at most {max_chars} characters (got {len(text)})")
    if not allow_empty and not text.strip():
        raise InvalidInput(f"{field} is empty")
    return text


def excerpt(text: object, limit: int = MAX_EXCERPT) -> str:
    """``text`` cut to ``limit`` characters, lone surrogates escaped: a message can always carry
    it (as JSON too), and a 5 MB input never makes a 5 MB error."""
    raw = str(text)
    cut = raw[:limit] + ("…" if len(raw) > limit else "")
    return cut.encode("utf-8", "backslashreplace").decode("utf-8")


def first_problem(exc: ValidationError, default: str = "value") -> str:
    """pydantic's first error as ``where: rule`` (and how many more), without the input."""
    errors = exc.errors()
    first: dict[str, Any] = dict(errors[0]) if errors else {}
    # the field's path, without the names pydantic gives a union's members (`function-after[…]`)
    path = [str(part) for part in first.get("loc", ()) if _PATH_PART.fullmatch(str(part))]
    where = ".".join(excerpt(part, 40) for part in path) or default
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{where}: {excerpt(message)}{more}"
