"""A per-process cache of each collection's active snapshot, invalidated by LISTEN/NOTIFY.

Activation commits ``pg_notify('pgcite_active', 'name:id')`` in its own transaction; a background
thread LISTENs on a connection of its own and drops the cached entry when a notification arrives.
In the steady state a question therefore costs no lookup of the pointer table.

Why this is safe:

* An entry is cached only while the listener is **connected and listening** (LISTEN committed
  before the pointer was read), so any activation committed after the read is notified to us.
* Every entry carries the **generation** it was read under; a notification (or a listener
  reconnect) bumps it, so a read that raced an activation is used once but never cached.
* If the listener's connection drops, everything cached is dropped at once and lookups read the
  table until it is back (it reconnects with backoff). The listener also pings its connection
  every ``probe_seconds`` so a silently dead connection is noticed.
* As a last resort an entry expires after ``max_age_seconds`` (30 s by default) even if all is
  quiet: one lookup per collection per 30 s, not one per question.

A stale entry is never *wrong*, only late: snapshots are immutable and the one a query was
planned against still exists (gc never removes the active one or the rollback target).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import psycopg
from psycopg import sql

CHANNEL = "pgcite_active"
DEFAULT_MAX_AGE = 30.0
DEFAULT_PROBE = 5.0
_RETRY_MAX = 5.0
_WAIT = 0.25

_log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class CacheStats:
    """Counters for tests and benchmarks: lookups should stay flat while questions grow."""

    hits: int = 0
    lookups: int = 0
    notifications: int = 0
    connects: int = 0
    disconnects: int = 0


@dataclass
class _Entry(Generic[T]):
    value: T
    generation: tuple[int, int]
    loaded_at: float


@dataclass
class _State(Generic[T]):
    entries: dict[str, _Entry[T]] = field(default_factory=dict)
    generations: dict[str, int] = field(default_factory=dict)
    epoch: int = 0  # bumped whenever the listener connects or disconnects


class ActivePointerCache(Generic[T]):
    """``get(name, load)`` returns the cached value or ``load()``s it; see the module doc."""

    def __init__(
        self,
        connect: Callable[[], psycopg.Connection],
        *,
        max_age_seconds: float = DEFAULT_MAX_AGE,
        probe_seconds: float = DEFAULT_PROBE,
    ) -> None:
        self._connect = connect
        self.max_age = max_age_seconds
        self.probe = probe_seconds
        self.stats = CacheStats()
        self._state: _State[T] = _State()
        self._lock = threading.Lock()
        self._listening = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the cache --------------------------------------------------------------------------

    def get(self, name: str, load: Callable[[], T]) -> T:
        self._start()
        with self._lock:
            entry = self._state.entries.get(name)
            generation = self._generation(name)
            if entry is not None and self._fresh(entry, generation):
                self.stats.hits += 1
                return entry.value
        value = load()  # outside the lock: a slow read must not stall other collections
        with self._lock:
            self.stats.lookups += 1
            if self._listening.is_set() and self._generation(name) == generation:
                self._state.entries[name] = _Entry(value, generation, time.monotonic())
        return value

    def invalidate(self, name: str | None = None) -> None:
        """Drop one collection's entry (an activation in this process), or all of them."""
        with self._lock:
            if name is None:
                self._state.epoch += 1
                self._state.entries.clear()
            else:
                self._state.generations[name] = self._state.generations.get(name, 0) + 1
                self._state.entries.pop(name, None)

    def wait_listening(self, timeout: float = 5.0) -> bool:
        self._start()
        return self._listening.wait(timeout)

    def close(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=2 * _WAIT + 1.0)

    def _generation(self, name: str) -> tuple[int, int]:
        return self._state.epoch, self._state.generations.get(name, 0)

    def _fresh(self, entry: _Entry[T], generation: tuple[int, int]) -> bool:
        return (self._listening.is_set() and entry.generation == generation
                and time.monotonic() - entry.loaded_at < self.max_age)

    # --- the listener -----------------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is not None or self._stop.is_set():
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="pgcite-active-listener", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        delay = 0.1
        while not self._stop.is_set():
            try:
                self._listen()
                delay = 0.1
            except (psycopg.Error, OSError) as exc:
                _log.debug("active-pointer listener lost its connection: %s", exc)
            self._went_deaf()
            self._stop.wait(delay)
            delay = min(delay * 2, _RETRY_MAX)

    def _listen(self) -> None:
        with self._connect() as conn:
            conn.autocommit = True
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL)))
            self._heard(None)  # drop anything read before we were listening
            self.stats.connects += 1
            self._listening.set()
            last_probe = time.monotonic()
            while not self._stop.is_set():
                # short waits: close() joins this thread, and should not wait long for it
                for note in conn.notifies(timeout=min(_WAIT, self.probe)):
                    self._heard(note.payload)
                if time.monotonic() - last_probe >= self.probe:
                    conn.execute("SELECT 1")  # raises if the connection died quietly
                    last_probe = time.monotonic()

    def _heard(self, payload: str | None) -> None:
        if payload is None:
            self.invalidate()
            return
        self.stats.notifications += 1
        self.invalidate(payload.rsplit(":", 1)[0])

    def _went_deaf(self) -> None:
        if self._listening.is_set():
            self.stats.disconnects += 1
        self._listening.clear()
        self.invalidate()
