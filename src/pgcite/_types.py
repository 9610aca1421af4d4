"""The types every layer shares: what loaders produce and the chunker consumes (documents,
units, chunk drafts), the retrieval modes and fusions, the gate's settings.

This module imports nothing of pgcite's but ``_errors``: store, retrieve and the lifecycle meet
here instead of importing each other.

A :class:`Document` is one source document (a diary entry, a file, a JSONL record) made of one or
more natural :class:`Unit` s (the entry itself, a Markdown section, a PDF page). Units never share a
chunk: a chunk belongs to exactly one unit, so it carries exactly one date and one locator.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pgcite._errors import ConfigError

# What the embedder reads before a chunk's body: its title (``off``), or a one-line header of its
# document context -- title, locator, dates, author (``header``). The stored body never changes.
Contextual = Literal["off", "header", "llm"]

# The retrieval modes and fusions: the one place they are spelled out (MODES for messages).
Mode = Literal["keyword", "vector", "hybrid"]
MODES: tuple[Mode, ...] = get_args(Mode)
Fusion = Literal["convex", "rrf"]
FUSIONS: tuple[Fusion, ...] = get_args(Fusion)
DEFAULT_FUSION: Fusion = "convex"


def parse_mode(value: str) -> Mode:
    """``value`` as a Mode (CLI and HTTP text), or a ConfigError naming the modes."""
    for mode in MODES:
        if value == mode:
            return mode
    raise ConfigError(f"unknown mode {value!r}", hint="use " + ", ".join(MODES))


def parse_fusion(value: str) -> Fusion:
    """``value`` as a Fusion, or a ConfigError naming the fusions."""
    for fusion in FUSIONS:
        if value == fusion:
            return fusion
    raise ConfigError(f"unknown fusion {value!r}", hint="use " + " or ".join(FUSIONS))


class Unit(BaseModel):
    """A natural unit of a document: the smallest thing that has its own date and locator."""

    model_config = ConfigDict(frozen=True)

    text: str
    title: str | None = None
    locator: str | None = None  # page number, section path, record ordinal …
    date_start: dt.date | None = None
    date_end: dt.date | None = None  # = date_start unless the unit covers a range


class Document(BaseModel):
    """One source document with the fields every chunk of it inherits."""

    model_config = ConfigDict(frozen=True)

    document_id: str = Field(min_length=1)
    source: str  # file name or edition
    units: list[Unit]
    title: str | None = None
    author: str | None = None
    corpus: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class ChunkDraft(BaseModel):
    """A chunk before it is embedded and stored: the unit of citation."""

    model_config = ConfigDict(frozen=True)

    id: str  # stable citation id, e.g. pepys-entry-1666-9-12-a
    document_id: str
    ordinal: int  # position within the document, from 0
    body: str
    title: str | None
    locator: str | None
    date_start: dt.date | None
    date_end: dt.date | None
    author: str | None
    corpus: str | None
    source: str
    citation: str  # caption-ready string
    metadata: dict[str, Any]
    context: str | None = None  # the LLM's situating sentence (contextual = "llm")


# --- the activation gate's settings (stored in a collection's settings; the rules that apply
# them are pgcite.lifecycle's) ---

DEFAULT_FLOORS: dict[str, float] = {
    "pass_rate": 0.90,
    "precision@10": 0.70,
    "recall@10": 0.85,
    "mrr@10": 0.65,
}
DEFAULT_TOLERANCE = 0.02
REGRESSION_METRICS = ("pass_rate", "ndcg@10", "precision@10", "recall@10", "mrr@10")
HARD_METRIC = "cutoff_violations"

# The figures an EvalResult configuration reports (see pgcite.evaluate): floors may name these.
_METRIC = re.compile(r"^(pass_rate(_answerable|_absent)?|(ndcg|precision|recall|mrr)@[1-9]\d{0,2})$")


def check_metric_name(name: str) -> str:
    if not _METRIC.fullmatch(name):
        raise ConfigError(
            f"unknown metric {name!r} for a floor",
            hint="use pass_rate, pass_rate_answerable, pass_rate_absent, ndcg@K, precision@K, "
            "recall@K or mrr@K",
        )
    return name


class GateSettings(BaseModel):
    """How a collection's snapshots are judged (stored in its settings)."""

    model_config = ConfigDict(extra="forbid")

    floors: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_FLOORS))
    tolerance: float = Field(default=DEFAULT_TOLERANCE, ge=0.0, le=1.0)
    regression_metrics: list[str] = Field(default_factory=lambda: list(REGRESSION_METRICS))
    mode: Mode = "hybrid"
    threshold: float | None = Field(
        default=None, description="abstention threshold; None = calibrated on the golden set")
    k: int = Field(default=10, ge=1, le=100)
    depth: int = Field(default=100, ge=1, le=1000)

    @field_validator("floors")
    @classmethod
    def _floors(cls, floors: dict[str, float]) -> dict[str, float]:
        for name, value in floors.items():
            check_metric_name(name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"floor {name}={value} is not between 0 and 1")
        return floors

    @field_validator("regression_metrics")
    @classmethod
    def _regression(cls, names: list[str]) -> list[str]:
        return [check_metric_name(n) for n in names]
