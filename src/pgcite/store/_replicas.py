"""Read replicas: which node serves a read, whether a replica is up, how far behind it is.

This module decides; it holds no connections. The sync client (``_client.py``) and an async one
keep a pool per replica URL and ask a :class:`ReplicaSet` where each read goes:

* ``choose()`` hands out healthy replicas round-robin (None: read on the primary).
* A replica whose connection fails is taken out (``failed``) and handed out again after
  ``retry_after_s`` -- to one request at a time, until one succeeds (``succeeded``).
* :func:`classify` says what an error on a replica means: ``"down"`` (connection refused,
  reset), ``"busy"`` (no pooled connection within the wait: the read runs elsewhere, the replica
  stays in -- a dead one is taken out by the refused connections), ``"behind"`` (the replica has not replayed what the request needs yet:
  a schema, a role, a snapshot -- the request goes to the primary) or None (the request's own
  error, which any node would give).

Reads are idempotent, so a read that failed on a replica is simply run again elsewhere.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Literal

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import PoolTimeout

from pgcite.store._database import redact

Failure = Literal["down", "busy", "behind"]

# The replica's replay position and the time of the last transaction it replayed, and the
# primary's write position: lag in bytes is their difference; lag in seconds is how old the
# last replayed transaction is, counted only while the replica is behind (an idle primary
# writes nothing, and an idle replica is not late).
REPLAY_SQL = "SELECT pg_last_wal_replay_lsn()::text, pg_last_xact_replay_timestamp(), now()"
PRIMARY_SQL = "SELECT pg_current_wal_lsn()::text"


class ReplicaBehind(Exception):  # noqa: N818 - a signal between modules, never shown to users
    """The replica has not replayed what this request needs (yet): run it on the primary."""


@dataclass
class Replica:
    """One replica URL and what is known of it."""

    url: str
    label: str  # the URL without its password, for metrics and logs
    down_since: float | None = None
    retry_at: float = 0.0
    failures: int = 0
    lag_bytes: int | None = None
    lag_seconds: float | None = None

    @property
    def healthy(self) -> bool:
        return self.down_since is None


class ReplicaSet:
    """The replicas of one primary; thread-safe."""

    def __init__(self, urls: Sequence[str], *, retry_after_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.replicas = [Replica(url, label(url)) for url in dict.fromkeys(urls)]
        self.retry_after_s = retry_after_s
        self._clock = clock
        self._next = 0
        self._lock = threading.Lock()
        # reads served, by replica label, "primary" and "retried" (a read run again elsewhere)
        self.served: dict[str, int] = {}

    def __bool__(self) -> bool:
        return bool(self.replicas)

    def __len__(self) -> int:
        return len(self.replicas)

    def choose(self, exclude: frozenset[str] = frozenset()) -> Replica | None:
        """The next replica to read on (round-robin), or None: read on the primary. A replica
        that is down comes back on probation once ``retry_after_s`` has passed: one request
        tries it, the next retry is scheduled meanwhile."""
        now = self._clock()
        with self._lock:
            count = len(self.replicas)
            for step in range(count):
                replica = self.replicas[(self._next + step) % count]
                if replica.url in exclude:
                    continue
                if replica.down_since is not None:
                    if now < replica.retry_at:
                        continue
                    replica.retry_at = now + self.retry_after_s  # one prober at a time
                self._next = (self._next + step + 1) % count
                return replica
        return None

    def count(self, where: str) -> None:
        with self._lock:
            self.served[where] = self.served.get(where, 0) + 1

    def failed(self, replica: Replica) -> None:
        """Take ``replica`` out until ``retry_after_s`` from now."""
        now = self._clock()
        with self._lock:
            if replica.down_since is None:
                replica.down_since = now
            replica.retry_at = now + self.retry_after_s
            replica.failures += 1
            replica.lag_bytes = replica.lag_seconds = None

    def succeeded(self, replica: Replica) -> None:
        """A read worked on ``replica``: it is healthy (again)."""
        if replica.down_since is not None:
            with self._lock:
                replica.down_since = None

    def record_lag(self, replica: Replica, primary_lsn: str | None,
                   replay: tuple[str | None, object, object] | None) -> None:
        """Store ``replica``'s lag from the primary's LSN and the replica's :data:`REPLAY_SQL`
        row (None for either: unknown)."""
        if primary_lsn is None or replay is None or replay[0] is None:
            replica.lag_bytes = replica.lag_seconds = None
            return
        behind = max(0, lsn_int(primary_lsn) - lsn_int(replay[0]))
        replica.lag_bytes = behind
        replayed_at, now = replay[1], replay[2]
        if behind == 0 or replayed_at is None:
            replica.lag_seconds = 0.0
        else:
            replica.lag_seconds = max(0.0, (now - replayed_at).total_seconds())  # type: ignore[operator]


def label(url: str) -> str:
    """A short name for a replica in metrics: ``host:port`` (a socket directory's last part)."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return redact(url)
    host = str(parts.get("host") or "localhost")
    if host.startswith("/"):
        host = PurePath(host).name
    return f"{host}:{parts.get('port') or 5432}"


def lsn_int(lsn: str) -> int:
    """A ``pg_lsn`` text ("16/B374D848") as a byte position."""
    high, low = lsn.split("/")
    return (int(high, 16) << 32) + int(low, 16)


def classify(exc: BaseException) -> Failure | None:
    """What an error raised by a read on a replica means (see the module doc)."""
    if isinstance(exc, ReplicaBehind):
        return "behind"
    if isinstance(exc, pg_errors.TransactionRollback):
        # a recovery conflict cancelled the query (replay needed the rows): the replica is up
        return "behind"
    if isinstance(exc, (pg_errors.UndefinedTable, pg_errors.InvalidSchemaName,
                        pg_errors.UndefinedObject, pg_errors.InvalidParameterValue)):
        return "behind"  # a new collection's schema or read role not replayed yet
    if isinstance(exc, PoolTimeout):
        return "busy"
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError, OSError)):
        return "down"
    cause = exc.__cause__
    return classify(cause) if cause is not None else None
