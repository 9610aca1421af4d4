"""The optional stages' models, built from settings (``PGCITE_LLM*``, ``PGCITE_RERANKER*``)."""

from __future__ import annotations

from pgcite.config import Settings
from pgcite.llm import ChatModel, llm_config, make_chat_model
from pgcite.retrieve._rerank import Reranker, RerankerConfig, make_reranker


def chat_model_from(settings: Settings) -> ChatModel | None:
    """The configured chat model, or None when ``PGCITE_LLM`` is unset."""
    config = llm_config(settings)
    return make_chat_model(config) if config is not None else None


def reranker_from(settings: Settings, llm: ChatModel | None) -> Reranker | None:
    """The configured reranker, or None when ``PGCITE_RERANKER`` is unset."""
    if settings.reranker is None:
        return None
    return make_reranker(RerankerConfig(
        kind=settings.reranker, path=settings.reranker_path, base_url=settings.reranker_url,
        model=settings.reranker_model, api_key=settings.reranker_api_key,
        timeout_s=settings.reranker_timeout_s), chat=llm)
