"""Connections that cannot be held open for free: uvicorn's HTTP/1.1 protocol with the two bounds
it lacks (`pgcite serve` uses it; bench/reliability.py probes it).

uvicorn closes a keep-alive connection that stays silent after a response (``timeout_keep_alive``)
but bounds nothing while a request is still arriving: a client that sends ``POST … HTTP/1.1\\r\\n``
and then one header byte every few seconds (slowloris), or a body that stops half-way, holds a
connection, a file descriptor and a request's memory forever. Here:

* **header timeout** (``header_timeout_s``, 10 s): from the moment a connection may send a
  request (it opened, or the previous response ended) its whole request head must arrive within
  the bound -- in total, so trickling bytes does not extend it; else 408 and closed;
* **idle timeout** (``idle_timeout_s``, 30 s): while a request body is arriving, a gap this long
  with no byte closes the connection (408 if no response has started); the route reading the
  body sees a disconnect. Time the service itself spends (a long answer) is not the client's
  idleness and is never cut, nor a gap while the service has paused reading (flow control).

The bounds are class attributes set once per process (:func:`configure`), because uvicorn builds
one protocol object per connection from a class, and ``serve --workers`` hands that class to
worker processes by name.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from pgcite.service._state import ServiceConfig


def _timeout_response(detail: str) -> bytes:
    body = json.dumps({"detail": detail}).encode()
    return (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n"
            + body)


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request-head timeout and a body idle timeout."""

    header_timeout_s: ClassVar[float] = 10.0
    idle_timeout_s: ClassVar[float] = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head()
        self._cancel_body()
        super().connection_lost(exc)

    def handle_events(self) -> None:  # every byte received goes through here
        super().handle_events()
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()  # the next request's head is bounded again

    def _follow(self) -> None:
        """Arm or clear the timers by where the client's side of the exchange stands."""
        if self.transport is None or self.transport.is_closing():
            return
        their = self.conn.their_state
        if their is h11.IDLE:  # waiting for (the rest of) a request head: one bound in total
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_late)
        else:
            self._cancel_head()
        if their is h11.SEND_BODY:  # a body arriving: the gap since its last byte
            self._cancel_body()
            self._body_timer = self.loop.call_later(self.idle_timeout_s, self._body_idle)
        else:
            self._cancel_body()

    def _head_late(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._close(f"no complete request head within {self.header_timeout_s:g} s")

    def _body_idle(self) -> None:
        self._body_timer = None
        if self.conn.their_state is not h11.SEND_BODY or self.transport.is_closing():
            return
        if self.flow.read_paused:  # the service is not reading: not the client's idleness
            self._body_timer = self.loop.call_later(self.idle_timeout_s, self._body_idle)
            return
        self._close(f"the request body sent nothing for {self.idle_timeout_s:g} s")

    def _close(self, why: str) -> None:
        started = self.cycle is not None and self.cycle.response_started
        if not started:
            self.transport.write(_timeout_response(why))
        if self.cycle is not None:
            self.cycle.disconnected = True  # the route's receive() now says so
            self.cycle.message_event.set()
        self.transport.close()

    def _cancel_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _cancel_body(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None


def configure(config: ServiceConfig) -> type[BoundedH11Protocol]:
    """Give this process's connections ``config``'s bounds; the class to hand uvicorn."""
    BoundedH11Protocol.header_timeout_s = config.header_timeout_s
    BoundedH11Protocol.idle_timeout_s = config.idle_timeout_s
    return BoundedH11Protocol
