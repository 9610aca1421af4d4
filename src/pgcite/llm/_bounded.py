"""Run a call that cannot be interrupted (an in-process model) under a deadline.

The call runs on a daemon thread of its own; if it overruns, the caller gets :class:`LLMError`
at the deadline and the thread finishes in the background (its result is discarded). HTTP
clients do not need this: their sockets have timeouts.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
from collections.abc import Callable
from typing import TypeVar

from pgcite.llm._types import LLMError

T = TypeVar("T")


def call_bounded(fn: Callable[[], T], timeout_s: float | None, what: str) -> T:
    """``fn()``, or LLMError naming ``what`` if it takes longer than ``timeout_s``."""
    if timeout_s is None:
        return fn()
    # A thread per call, not a shared pool: calls made concurrently (the ingest's situating
    # workers) or nested (LlamaCppChat bounds itself too) never queue behind each other, and a
    # stuck call holds only its own thread, which cannot keep the interpreter from exiting.
    future: cf.Future[T] = cf.Future()
    threading.Thread(target=_run, args=(fn, future), name="pgcite-bounded", daemon=True).start()
    try:
        return future.result(timeout=timeout_s)
    except cf.TimeoutError:
        raise LLMError(f"{what}: no answer within {timeout_s:g} s") from None


def _run(fn: Callable[[], T], future: cf.Future[T]) -> None:
    try:
        future.set_result(fn())
    except BaseException as exc:  # handed to the caller, re-raised there, as a pool would
        future.set_exception(exc)
