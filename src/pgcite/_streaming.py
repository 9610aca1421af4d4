"""Streamed answers: the answer pipeline, unchanged, with its generator wrapped so that the text
reaches the caller as it is written, and a final event that carries the *checked* answer.

The guard runs on the whole text, after generation, exactly as for an unstreamed answer. So the
final event says what the guard did to the text already shown: ``removed_citations`` lists every
citation it dropped, and ``replaced`` is true when the checked text differs from what streamed
(a dropped citation, an abstention, the attribution fallback, a generator that failed mid-way
and was replaced by the extractive one). A client must then show the final ``answer.answer``
instead of the streamed text; nothing the guard removed may stay on screen.

Model-backed generators stream the model's pieces (:func:`pgcite.llm.chat_stream`); any other
generator (the extractive one) streams its finished text sentence by sentence.
"""

from __future__ import annotations

import asyncio
import queue
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from pgcite._client import Collection
from pgcite.answer._guard import check_citations
from pgcite.answer._llm import ChatGenerator, system_prompt, user_prompt
from pgcite.answer._pipeline import AnswerOptions
from pgcite.answer._types import Answer, GenerationRequest, Generator
from pgcite.llm import ChatModel
from pgcite.llm._stream import chat_stream
from pgcite.retrieve import Filters

# After a sentence end or a citation, before the next sentence (not before a citation).
_SENTENCE_END = re.compile(r"(?<=[.!?\]])\s+(?=[^\s\[])")


class _Event(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, serialize_by_alias=True,
                              validate_by_name=True, frozen=True)


class Delta(_Event):
    """More text, to append to what was shown."""

    event: Literal["delta"] = "delta"
    text: str


class Final(_Event):
    """The checked answer; the stream ends with it."""

    event: Literal["final"] = "final"
    answer: Answer
    streamed_text: str
    removed_citations: list[str]
    replaced: bool


StreamEvent = Delta | Final


def sentences(text: str) -> list[str]:
    """``text`` in sentence-sized pieces that concatenate back to it exactly."""
    pieces, last = [], 0
    for match in _SENTENCE_END.finditer(text):
        pieces.append(text[last:match.end()])
        last = match.end()
    pieces.append(text[last:])
    return [p for p in pieces if p]


class StreamingGenerator:
    """A generator that hands each piece of its text to ``emit`` as it is produced, and returns
    the whole text to the pipeline as any generator does."""

    def __init__(self, inner: Generator, emit: Callable[[str], None]) -> None:
        self.inner, self.emit = inner, emit
        self.name = inner.name
        self.text = ""

    def generate(self, request: GenerationRequest) -> str:
        self.text = ""  # a retry (the pipeline's fallback) starts a new text
        for piece in self._pieces(request):
            self.text += piece
            self.emit(piece)
        return self.text

    def _pieces(self, request: GenerationRequest) -> Iterator[str]:
        if isinstance(self.inner, ChatGenerator):
            yield from chat_stream(self.inner.chat, system_prompt(request),
                                   user_prompt(request), max_tokens=self.inner.max_tokens)
        else:
            yield from sentences(self.inner.generate(request))


_END = object()


def stream_answer(collection: Collection, question: str, *,
                  generator: Generator | None = None, **options: Any) -> Iterator[StreamEvent]:
    """``collection.answer(question, **options)`` as events: deltas, then one :class:`Final`.
    An error (bad filters, an unknown snapshot) is raised from the iterator, before any delta
    when it happens during retrieval."""
    events: queue.Queue[object] = queue.Queue()
    tees: list[StreamingGenerator] = []

    def tee(inner: Generator) -> Generator:
        # wraps whichever generator writes: the one given, or the pipeline's default answerer
        tees.append(StreamingGenerator(inner, lambda text: events.put(Delta(text=text))))
        return tees[-1]

    def work() -> None:
        try:
            answer = collection.answer(question, generator=generator, wrap_generator=tee,
                                       **options)
            events.put(_final(answer, tees[-1].text if tees else ""))
        except BaseException as exc:  # handed to the consumer, who raises it
            events.put(exc)
        finally:
            events.put(_END)

    threading.Thread(target=work, name="pgcite-stream-answer", daemon=True).start()
    while (item := events.get()) is not _END:
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, Delta | Final)
        yield item


class AsyncAnswerer(Protocol):
    """What :func:`astream_answer` needs: ``AsyncCollection.answer`` (pgcite._async, a sibling
    module this one may not import)."""

    async def answer(self, question: str, *, filters: Filters | Mapping[str, Any] | None = None,
                     options: AnswerOptions | Mapping[str, Any] | None = None,
                     stages: Mapping[str, Any] | None = None, snapshot_id: int | None = None,
                     generator: Generator | str | None = None, judge: ChatModel | None = None,
                     wrap_generator: Callable[[Generator], Generator] | None = None,
                     ) -> Answer: ...


async def astream_answer(collection: AsyncAnswerer, question: str, *,
                         generator: Generator | None = None,
                         **options: Any) -> AsyncIterator[StreamEvent]:
    """As :func:`stream_answer`, for the async API: the answer is awaited (its composition
    runs in the async client's executor), and each piece its generator writes there is handed
    to this event loop as it is written."""
    loop = asyncio.get_running_loop()
    deltas: asyncio.Queue[Delta] = asyncio.Queue()
    tees: list[StreamingGenerator] = []

    def emit(text: str) -> None:  # called in the executor's thread
        loop.call_soon_threadsafe(deltas.put_nowait, Delta(text=text))

    def tee(inner: Generator) -> Generator:
        tees.append(StreamingGenerator(inner, emit))
        return tees[-1]

    answering = asyncio.ensure_future(collection.answer(
        question, generator=generator, wrap_generator=tee, **options))
    try:
        while True:
            getter = asyncio.ensure_future(deltas.get())
            await asyncio.wait({getter, answering}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
                continue
            getter.cancel()
            # the deltas were queued on this loop before the answer's completion was
            while not deltas.empty():
                yield deltas.get_nowait()
            yield _final(answering.result(), tees[-1].text if tees else "")
            return
    finally:
        answering.cancel()  # a consumer that stopped early (a client that went away)


def _final(answer: Answer, streamed: str) -> Final:
    removed = (check_citations(streamed, {s.id for s in answer.sources}).removed
               if streamed else [])
    replaced = bool(streamed) and streamed.strip() != answer.answer.strip()
    return Final(answer=answer, streamed_text=streamed, removed_citations=removed,
                 replaced=replaced)
