"""What an answer is made of: the passages given to a generator, the generator protocol, and the
:class:`Answer` returned to callers (serialised with camelCase JSON names for the HTTP API)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from pgcite.llm._types import LLMError
from pgcite.retrieve._hits import StageEvent


class _Camel(BaseModel):
    """Python names in snake_case, JSON names in camelCase, both directions."""

    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True,
        serialize_by_alias=True,
    )


class ContextPassage(BaseModel):
    """One retrieved passage as a generator sees it."""

    model_config = ConfigDict(frozen=True)

    id: str
    author: str | None
    date: str | None  # the first day (ISO)
    text: str
    rank: int
    truncated: bool = False
    # the last day the passage covers (None: the same day): "1855" is 1855-01-01..1855-12-31
    date_end: str | None = None


class GenerationRequest(BaseModel):
    """Everything a generator may use: nothing outside ``passages`` is evidence."""

    model_config = ConfigDict(frozen=True)

    question: str
    passages: list[ContextPassage]
    persona: str | None = None
    abstention_text: str


# A generator failure is a model failure: one exception type for every model-backed stage.
GeneratorError = LLMError


@runtime_checkable
class Generator(Protocol):
    """Turns a question and passages into text that cites passage ids as ``[id]``."""

    name: str

    def generate(self, request: GenerationRequest) -> str: ...


class Source(_Camel):
    """A passage the generator was given: what an answer may cite."""

    id: str
    citation: str
    source: str | None
    locator: str | None
    distance: float | None = Field(description="cosine distance (None in keyword mode)")
    score: float
    excerpt: str
    author: str | None
    corpus: str | None
    date: str | None = Field(description="the passage's first day (ISO), if dated")


class TraceEvent(_Camel):
    """One thing the pipeline did that a reader of the answer should know about."""

    step: str
    detail: str


class Attempt(_Camel):
    """One retrieval of the self-correcting loop: the query sent and what grading kept."""

    query: str
    retrieved: int
    kept: int | None = Field(default=None, description="None: not graded")
    grades: dict[str, bool | None] = Field(default_factory=dict)
    note: str = ""


class EntityFact(_Camel):
    """A fact of the entity graph an answer states (who/where/how often): ``name`` is named
    together with ``anchor``, the entity the question names, in ``passages`` passages the
    request may see (for how often of one entity: ``name`` is the anchor, named alone).
    ``citations``: those the answer cites for it, each a passage naming both."""

    ask: str = Field(description="who, where or how often")
    anchor: str
    name: str
    key: str = Field(description="the canonical key (aliases resolved)")
    label: str
    passages: int
    citations: list[str]


class Answer(_Camel):
    """A checked answer: every id in ``citations`` is the id of one of ``sources``."""

    question: str
    answer: str
    abstained: bool
    snapshot_id: int
    embedding_model: str
    sources: list[Source]
    citations: list[str]
    generator: str
    confidence: float | None = Field(
        default=None, description="retrieval's best cosine similarity"
    )
    threshold: float | None = Field(
        default=None, description="the best-cosine abstention threshold applied (None: none, "
        "or the collection's fitted answerability model decided instead)")
    trace: list[TraceEvent] = Field(default_factory=list)
    attempts: list[Attempt] = Field(
        default_factory=list, description="the self-correcting loop's retrievals, if it ran")
    stages: list[StageEvent] = Field(
        default_factory=list, description="what the retrieval stages did (route, hyde, …)")
    timings_ms: dict[str, float] = Field(default_factory=dict)
    undated_excluded: int | None = Field(
        default=None, description="with a cutoff: undated passages it left out")
    entities: list[EntityFact] = Field(
        default_factory=list, description="the entity graph's facts the answer states, for "
        "who/where/how-often questions (docs/answers.md, 'Entity questions')")
