"""A tiny, real, misbehaving chat server for tests: a socket on 127.0.0.1, any reply you script.

>>> def reply(request):                    # the parsed request JSON (None if not JSON)
...     return 200, chat_completion("1: yes"), 0.0    # (status, body bytes, delay in seconds)
>>> with serve(reply) as server:
...     OpenAIChat(base_url=server.base_url, model="m").chat("sys", "user")
...     server.requests                     # every parsed request body, in order

A body that is an iterable of byte strings instead of bytes is streamed: each piece written and
flushed as the iterable yields it (``chat_stream_events`` makes OpenAI's ``"stream": true``
server-sent events), so a test can hold the stream open between pieces.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, bytes | Iterable[bytes], float]
ReplyFn = Callable[[Any], Reply]


def chat_stream_events(pieces: Iterable[str]) -> Iterator[bytes]:
    """OpenAI streaming chunks (``data: {...}``) carrying ``pieces``, then ``data: [DONE]``."""
    for piece in pieces:
        event = {"object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
        yield f"data: {json.dumps(event)}\n\n".encode()
    yield b"data: [DONE]\n\n"


def chat_completion(content: str) -> bytes:
    """An OpenAI ``/chat/completions`` response body whose message is ``content``."""
    return json.dumps({"object": "chat.completion", "choices": [
        {"index": 0, "finish_reason": "stop",
         "message": {"role": "assistant", "content": content}}]}).encode()


@dataclass
class Served:
    base_url: str  # ends in /v1, as OpenAIChat expects
    requests: list[Any] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: object) -> None:  # keep pytest output clean
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        try:
            request = json.loads(raw)
        except ValueError:
            request = None
        self.server.served.requests.append(request)
        try:
            status, body, delay_s = self.server.reply(request)
        except Exception as exc:  # a broken script should fail loudly, not hang the client
            status, body, delay_s = 500, f"reply function failed: {exc!r}".encode(), 0.0
        time.sleep(delay_s)
        if not isinstance(body, bytes):
            self._stream(status, body)
            return
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up first, which is what a hang test wants

    def _stream(self, status: int, pieces: Iterable[bytes]) -> None:
        try:
            self.send_response(status)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")  # the end of the body ends the stream
            self.end_headers()
            for piece in pieces:
                self.wfile.write(piece)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a handler still sleeping must not block shutdown

    def __init__(self, reply: ReplyFn) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.reply = reply
        host, port = self.server_address[:2]
        self.served = Served(base_url=f"http://{host!s}:{port}/v1")


@contextmanager
def serve(reply: ReplyFn) -> Iterator[Served]:
    """Serve POSTs on a free local port, each answered by ``reply(request_json)``."""
    server = _Server(reply)
    # A short poll interval: shutdown() waits up to one interval, per test.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.served
    finally:
        server.shutdown()
        server.server_close()
