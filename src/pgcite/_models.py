"""The optional stages' models, built from settings (``PGCITE_LLM*``, ``PGCITE_RERANKER*``)."""

from __future__ import annotations

from pgcite.config import Settings
from pgcite.llm import ChatModel, LLMConfig, make_chat_model
from pgcite.retrieve._rerank import Reranker, RerankerConfig, make_reranker


def chat_model_from(settings: Settings) -> ChatModel | None:
    """The configured chat model, or None when ``PGCITE_LLM`` is unset."""
    if settings.llm is None:
        return None
    return make_chat_model(LLMConfig(
        kind=settings.llm, base_url=settings.llm_base_url, model=settings.llm_model,
        api_key=settings.llm_api_key, timeout_s=settings.llm_timeout_s,
        model_path=settings.llm_model_path))


def reranker_from(settings: Settings, llm: ChatModel | None) -> Reranker | None:
    """The configured reranker, or None when ``PGCITE_RERANKER`` is unset."""
    if settings.reranker is None:
        return None
    return make_reranker(RerankerConfig(
        kind=settings.reranker, path=settings.reranker_path, base_url=settings.reranker_url,
        model=settings.reranker_model, api_key=settings.reranker_api_key,
        timeout_s=settings.reranker_timeout_s), chat=llm)
