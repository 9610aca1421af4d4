"""Language models for the stages that need one (HyDE, decomposition, grading, generation …):
one protocol, :class:`ChatModel`, over OpenAI-compatible servers, Anthropic and llama.cpp.

>>> chat = make_chat_model(LLMConfig(kind="openai", base_url="http://127.0.0.1:8080/v1",
...                                  model="local", timeout_s=3))
>>> chat.chat("You are terse.", "Say hi.", max_tokens=8)
"""

from pgcite.llm._bounded import call_bounded
from pgcite.llm._config import (
    LLM_KINDS,
    LLMConfig,
    LLMKind,
    llm_config,
    make_chat_model,
    with_llm,
)
from pgcite.llm._http import AnthropicChat, OpenAIChat
from pgcite.llm._local import LlamaCppChat, packaged_gguf
from pgcite.llm._types import ChatModel, LLMError

__all__ = [
    "LLM_KINDS",
    "AnthropicChat",
    "ChatModel",
    "LLMConfig",
    "LLMError",
    "LLMKind",
    "LlamaCppChat",
    "OpenAIChat",
    "call_bounded",
    "llm_config",
    "make_chat_model",
    "with_llm",
    "packaged_gguf",
]
