"""How to build a chat model from options (CLI flags, ``PGCITE_LLM_*`` settings, the service)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from pgcite.config import Settings
from pgcite.llm._http import AnthropicChat, OpenAIChat
from pgcite.llm._local import LlamaCppChat, packaged_gguf
from pgcite.llm._types import ChatModel, LLMError

LLMKind = Literal["openai", "anthropic", "llama-cpp"]
LLM_KINDS: tuple[str, ...] = ("openai", "anthropic", "llama-cpp")


class LLMConfig(BaseModel):
    """One chat model. ``llama-cpp`` without ``model_path`` uses the packaged SmolLM2."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: LLMKind = "openai"
    base_url: str | None = None
    model: str | None = None
    api_key: SecretStr | None = None
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    model_path: Path | None = None


# Settings.llm* and LLMConfig are one configuration: these two functions are the only mapping.
def llm_config(settings: Settings) -> LLMConfig | None:
    """The LLM ``PGCITE_LLM*`` configures, or None when ``PGCITE_LLM`` is unset."""
    if settings.llm is None:
        return None
    return LLMConfig(kind=settings.llm, base_url=settings.llm_base_url, model=settings.llm_model,
                     api_key=settings.llm_api_key, timeout_s=settings.llm_timeout_s,
                     model_path=settings.llm_model_path)


def with_llm(settings: Settings, config: LLMConfig | None) -> Settings:
    """``settings`` with ``config`` as its one LLM (unchanged when ``config`` is None)."""
    if config is None:
        return settings
    return settings.model_copy(update={
        "llm": config.kind, "llm_base_url": config.base_url, "llm_model": config.model,
        "llm_api_key": config.api_key, "llm_timeout_s": config.timeout_s,
        "llm_model_path": config.model_path})


def make_chat_model(config: LLMConfig) -> ChatModel:
    """The configured chat model; errors say which option is missing."""
    key = config.api_key.get_secret_value() if config.api_key else None
    if config.kind == "llama-cpp":
        path = config.model_path or packaged_gguf()
        return LlamaCppChat(model_path=path, timeout_s=config.timeout_s)
    if not config.model:
        raise LLMError(f"the {config.kind} model needs a model name (--llm-model)")
    if config.kind == "openai":
        return OpenAIChat(base_url=config.base_url or "https://api.openai.com/v1",
                          model=config.model, api_key=key, timeout_s=config.timeout_s)
    return AnthropicChat(base_url=config.base_url or "https://api.anthropic.com",
                         model=config.model, api_key=key, timeout_s=config.timeout_s)
