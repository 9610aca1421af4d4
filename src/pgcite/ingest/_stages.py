"""Where an ingest's time goes: wall and CPU seconds per stage, in the report (``stages``).

Stages run side by side (chunks are embedded while the next ones are chunked and the ones
before are stored), so their wall times overlap and add up to more than the run's ``seconds``;
the CPU seconds say what each stage costs the machine wherever it waited. ``cpu_s`` is this
process's CPU on the stage; ``db_cpu_s`` is the PostgreSQL backend's, for the stages that run
in the database (the embedded server only: a server by URL may be another machine).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import psycopg
from pydantic import BaseModel

from pgcite.store._database import Database

# In the order the data flows (the report lists them so).
STAGES = ("load", "chunk", "embed", "entities", "store", "snapshot", "commit", "statistics")


class StageTime(BaseModel):
    """One stage's share of an ingest."""

    wall_s: float = 0.0  # time spent in the stage (overlapping other stages)
    cpu_s: float = 0.0  # this process's CPU seconds on it
    db_cpu_s: float | None = None  # the embedded server's CPU seconds on it; None: not measured


class StageClock:
    """Accumulates :class:`StageTime` per stage, from any thread."""

    def __init__(self, db: Database | None = None) -> None:
        self._db = db
        self._lock = threading.Lock()
        self.times: dict[str, StageTime] = {}

    @contextmanager
    def __call__(self, stage: str, conn: psycopg.Connection | None = None) -> Iterator[None]:
        """Time the block as ``stage``: wall, this thread's CPU, and the CPU of ``conn``'s
        server backend when there is one to read."""
        wall, cpu = time.perf_counter(), time.thread_time()
        db_cpu = self._backend_cpu(conn)
        try:
            yield
        finally:
            after = self._backend_cpu(conn)
            self.add(stage, wall=time.perf_counter() - wall, cpu=time.thread_time() - cpu,
                     db_cpu=None if db_cpu is None or after is None else after - db_cpu)

    def add(self, stage: str, *, wall: float, cpu: float, db_cpu: float | None = None) -> None:
        with self._lock:
            now = self.times.setdefault(stage, StageTime())
            now.wall_s += wall
            now.cpu_s += cpu
            if db_cpu is not None:
                now.db_cpu_s = (now.db_cpu_s or 0.0) + db_cpu

    def timing(self, stage: str, transaction: Callable[[], AbstractContextManager[
            psycopg.Connection]]) -> Callable[[], AbstractContextManager[psycopg.Connection]]:
        """``transaction`` (a factory of transactions) with each one's server CPU counted to
        ``stage``: for work that opens its own (store._statistics.after_build). Its wall and
        this process's CPU are the caller's to time around it."""
        @contextmanager
        def timed() -> Iterator[psycopg.Connection]:
            with transaction() as conn:
                before = self._backend_cpu(conn)
                yield conn
                after = self._backend_cpu(conn)
                if before is not None and after is not None:
                    self.add(stage, wall=0.0, cpu=0.0, db_cpu=after - before)
        return timed

    def cpu_s(self, *stages: str) -> float:
        """This process's CPU seconds on these stages so far."""
        with self._lock:
            return sum(self.times[s].cpu_s for s in stages if s in self.times)

    def _backend_cpu(self, conn: psycopg.Connection | None) -> float | None:
        return None if conn is None or self._db is None else self._db.backend_cpu_s(conn)

    def report(self) -> dict[str, StageTime]:
        """The stages that ran, in flow order, rounded to milliseconds."""
        order = {name: i for i, name in enumerate(STAGES)}
        with self._lock:
            items = sorted(self.times.items(), key=lambda kv: order.get(kv[0], len(order)))
        return {name: StageTime(
            wall_s=round(t.wall_s, 3), cpu_s=round(t.cpu_s, 3),
            db_cpu_s=None if t.db_cpu_s is None else round(t.db_cpu_s, 3))
            for name, t in items}
