"""Grounded answers with checked citations: retrieve → context → generate → check.

>>> answer = collection.answer("Where did Pepys bury his cheese?")
>>> answer.answer, answer.citations            # every citation is one of answer.sources
"""

from pgcite.answer._context import DEFAULT_TOKEN_BUDGET, approx_tokens, fit_context
from pgcite.answer._extractive import ExtractiveGenerator
from pgcite.answer._guard import check_attribution, check_citations
from pgcite.answer._llm import (
    GENERATOR_KINDS,
    AnthropicGenerator,
    ChatGenerator,
    GeneratorConfig,
    LlamaCppGenerator,
    OpenAIChatGenerator,
    make_generator,
)
from pgcite.answer._pipeline import (
    DEFAULT_THRESHOLDS,
    PERSONA_ABSTENTION,
    PLAIN_ABSTENTION,
    AnswerOptions,
    answer_question,
    default_threshold,
)
from pgcite.answer._search import AnswerSettings, EntityEvidenceFn, SearchFn
from pgcite.answer._sentences import split_sentences
from pgcite.answer._types import (
    Answer,
    ContextPassage,
    EntityFact,
    GenerationRequest,
    Generator,
    GeneratorError,
    Source,
    TraceEvent,
)

__all__ = [
    "DEFAULT_THRESHOLDS",
    "DEFAULT_TOKEN_BUDGET",
    "GENERATOR_KINDS",
    "PERSONA_ABSTENTION",
    "PLAIN_ABSTENTION",
    "AnswerOptions",
    "AnswerSettings",
    "EntityEvidenceFn",
    "Answer",
    "AnthropicGenerator",
    "ChatGenerator",
    "ContextPassage",
    "EntityFact",
    "ExtractiveGenerator",
    "GenerationRequest",
    "Generator",
    "GeneratorConfig",
    "GeneratorError",
    "LlamaCppGenerator",
    "OpenAIChatGenerator",
    "SearchFn",
    "Source",
    "TraceEvent",
    "answer_question",
    "approx_tokens",
    "check_attribution",
    "check_citations",
    "default_threshold",
    "fit_context",
    "make_generator",
    "split_sentences",
]
