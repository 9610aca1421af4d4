"""The pydantic base every evaluation model shares."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable, and JSON-safe for infinities.

    A threshold of ``-inf`` ("never abstain") is a real value here; pydantic's default would write it
    as ``null`` and lose it, so infinities travel as the strings ``"Infinity"``/``"-Infinity"``,
    which pydantic reads back as floats.
    """

    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")
