"""The one JSON casing of pgcite's results: snake_case in Python, camelCase in JSON.

Search results, answers, documents and every HTTP body use it, so ``pgcite search --json``,
``pgcite ask --json`` and the HTTP API spell a field the same way (``snapshotId``). Models
accept either spelling on input.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

CAMEL = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True,
                   serialize_by_alias=True)


class CamelModel(BaseModel):
    """A model whose JSON (``model_dump``, ``model_dump_json``) is camelCase."""

    model_config = CAMEL
