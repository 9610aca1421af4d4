"""The HTTP service as bench/async_service.py runs it: ``create_app()`` under uvicorn, with every
hop to a thread timed from submission to start -- anyio's thread pool (where FastAPI runs sync
routes, sync dependencies and sync streaming bodies) and, where the code under test has one, the
async API's bounded executor -- and ``GET /bench/waits`` to read (``?reset=true``: and clear)
them. It must run against the code before the async API as well as after it, so it reaches into
the service only through what both have (``create_app``) and ``getattr``.

    python bench/_serve_probe.py PORT      # settings from the environment (PGCITE_DATABASE_URL,
                                           # BENCH_WORKERS: the executor's threads)
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import uvicorn

from pgcite.service import ServiceConfig, create_app

_lock = threading.Lock()
_waits: list[float] = []
_run_sync = anyio.to_thread.run_sync


async def _timed_run_sync(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    submitted = time.perf_counter()

    def timed(*inner: Any) -> Any:
        with _lock:
            _waits.append(time.perf_counter() - submitted)
        return func(*inner)

    return await _run_sync(timed, *args, **kwargs)


# starlette calls it by attribute: this one is used
anyio.to_thread.run_sync = _timed_run_sync  # type: ignore[assignment]


def _summary(waits: list[float]) -> dict[str, float]:
    ordered = sorted(waits)
    if not ordered:
        return {"calls": 0, "p50Ms": 0.0, "p95Ms": 0.0, "maxMs": 0.0, "queued": 0}
    return {"calls": len(ordered), "p50Ms": ordered[len(ordered) // 2] * 1000,
            "p95Ms": ordered[int(len(ordered) * 0.95)] * 1000, "maxMs": ordered[-1] * 1000,
            "queued": sum(w > 0.001 for w in ordered)}


# BENCH_WORKERS: the async API's executor size (only code that has one takes it)
_workers = os.environ.get("BENCH_WORKERS")
app = create_app(config=ServiceConfig(workers=int(_workers)) if _workers else None)


@app.get("/bench/waits", include_in_schema=False)
async def waits(reset: bool = False) -> dict[str, Any]:
    state = app.state.pgcite
    held = getattr(state, "_async", None)  # (loop, AsyncClient) after the async API
    offload = held[1].offload if held else None
    with _lock:
        out: dict[str, Any] = {"anyio": _summary(_waits)}
        if reset:
            _waits.clear()
    if offload is not None:
        stats = offload.stats.snapshot()
        out["executor"] = {"calls": stats["calls"], "p50Ms": stats["p50Ms"],
                           "p95Ms": stats["p95Ms"], "maxMs": stats["maxWaitS"] * 1000,
                           "queued": stats["queued"], "workers": offload.workers}
        if reset:
            offload.stats = type(offload.stats)()
    return out


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
