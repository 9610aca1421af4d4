"""``POST …/answer`` with ``"stream": true``: the answer as server-sent events.

``event: delta`` (``{"text": …}``) as the generator writes, then one ``event: final`` with the
checked answer (``{"answer": Answer, "removedCitations": […], "replaced": bool, …}``; when
``replaced`` is true the client must show ``answer.answer`` instead of the streamed text). An
error before any text (bad filters, unknown snapshot) is an ordinary 4xx; one after the stream
has started ends it with ``event: error``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi.responses import StreamingResponse

from pgcite import Answer, AsyncCollection, Final, PgciteError, StreamEvent, astream_answer

_log = logging.getLogger("pgcite.service")


def _sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _frame(event: StreamEvent) -> bytes:
    data = event.model_dump(mode="json", exclude={"event"})
    return _sse(event.event, data)


async def sse_answer(collection: AsyncCollection, question: str, options: dict[str, Any], *,
                     on_final: Callable[[Answer], None] | None = None) -> StreamingResponse:
    """The streamed answer; ``on_final`` sees the checked answer (for the metrics)."""
    events = astream_answer(collection, question, **options)
    first = await anext(events)  # retrieval errors raise here: the error handlers answer 4xx

    async def frames() -> AsyncIterator[StreamEvent]:
        yield first
        async for event in events:
            yield event

    async def body() -> AsyncIterator[bytes]:
        try:
            async for event in frames():
                if isinstance(event, Final) and on_final is not None:
                    on_final(event.answer)
                yield _frame(event)
        except PgciteError as exc:
            yield _sse("error", {"detail": exc.message, "hint": exc.hint})
        except Exception:
            _log.exception("streamed answer failed")
            yield _sse("error", {"detail": "internal error"})

    return StreamingResponse(body(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
