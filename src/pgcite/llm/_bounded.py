"""Run a call that cannot be interrupted (an in-process model) under a deadline.

The call runs on a daemon thread; if it overruns, the caller gets :class:`LLMError` at the
deadline and the thread finishes in the background (its result is discarded). HTTP clients do
not need this: their sockets have timeouts.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable
from typing import TypeVar

from pgcite.llm._types import LLMError

T = TypeVar("T")
# A few workers: a stuck local call holds one, the next calls still get theirs.
_POOL = cf.ThreadPoolExecutor(max_workers=4, thread_name_prefix="pgcite-bounded")


def call_bounded(fn: Callable[[], T], timeout_s: float | None, what: str) -> T:
    """``fn()``, or LLMError naming ``what`` if it takes longer than ``timeout_s``."""
    if timeout_s is None:
        return fn()
    future = _POOL.submit(fn)
    try:
        return future.result(timeout=timeout_s)
    except cf.TimeoutError:
        future.cancel()
        raise LLMError(f"{what}: no answer within {timeout_s:g} s") from None
