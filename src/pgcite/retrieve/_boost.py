"""Metadata boosting, applied to FUSED scores and never to a leg's scores.

Boosting a leg before fusion would change its ranks only through its scores, which RRF ignores,
and would distort convex fusion's min-max scale; after fusion a multiplier means the same thing
in every mode. Rules multiply, the list is re-sorted (stable: ties keep the fused order), and
ranks are renumbered.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from pgcite.retrieve._hits import Hit

Scalar = str | int | float | bool
# Columns a rule may name directly; anything else is a metadata key.
_COLUMNS = ("author", "corpus", "source", "document_id")


class FieldBoost(BaseModel):
    """Multiply the score of hits whose field equals (one of) the given value(s)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["field"] = "field"
    field: str = Field(min_length=1, max_length=100,
                       description="author, corpus, source, document_id or a metadata key")
    equals: Scalar | list[Scalar]
    multiplier: float = Field(gt=0, le=100)

    def factor(self, hit: Hit, reference: dt.date | None) -> float:
        value = getattr(hit, self.field) if self.field in _COLUMNS else hit.metadata.get(
            self.field)
        wanted = self.equals if isinstance(self.equals, list) else [self.equals]
        return float(self.multiplier) if value is not None and value in wanted else 1.0


class RecencyBoost(BaseModel):
    """Exponential decay with age: ``floor + (1 - floor) · 0.5^(age / half_life_days)``.

    Age is counted back from ``reference`` — by default the query's cutoff, else the newest
    date among the candidates (so a historical corpus is not "old" relative to today).
    Undated hits get the floor: they cannot claim to be recent.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["recency"] = "recency"
    half_life_days: float = Field(gt=0)
    floor: float = Field(default=0.5, ge=0, le=1)
    reference: dt.date | None = None

    def factor(self, hit: Hit, reference: dt.date | None) -> float:
        day = hit.date_end or hit.date_start
        ref = self.reference or reference
        if day is None or ref is None:
            return self.floor
        age = max((ref - day).days, 0)
        return float(self.floor + (1 - self.floor) * 0.5 ** (age / self.half_life_days))


BoostRule = Annotated[FieldBoost | RecencyBoost, Field(discriminator="kind")]


def apply_boosts(hits: Sequence[Hit], rules: Sequence[FieldBoost | RecencyBoost], *,
                 cutoff: dt.date | None = None) -> list[Hit]:
    """Hits re-scored by every rule's factor, re-sorted and re-ranked (input unchanged)."""
    if not rules:
        return list(hits)
    reference = cutoff or _newest(hits)
    scored: list[tuple[float, Hit]] = []
    for hit in hits:
        factor = 1.0
        for rule in rules:
            factor *= rule.factor(hit, reference)
        scored.append((hit.score * factor, hit))
    scored.sort(key=lambda pair: -pair[0])  # sort is stable: ties keep the fused order
    return [hit.model_copy(update={"score": score, "rank": i + 1})
            for i, (score, hit) in enumerate(scored)]


def _newest(hits: Sequence[Hit]) -> dt.date | None:
    days = [d for h in hits for d in (h.date_end or h.date_start,) if d is not None]
    return max(days) if days else None


def parse_boost(spec: str) -> FieldBoost:
    """``field=value:multiplier`` (CLI shorthand), e.g. ``corpus=A:1.5``."""
    from pgcite._errors import ConfigError

    try:
        left, multiplier = spec.rsplit(":", 1)
        field, value = left.split("=", 1)
        return FieldBoost(field=field.strip(), equals=value, multiplier=float(multiplier))
    except ValueError as exc:
        raise ConfigError(f"bad boost {spec!r}: {exc}",
                          hint="write FIELD=VALUE:MULTIPLIER, e.g. corpus=A:1.5") from None
