"""The active-pointer cache (LISTEN/NOTIFY) and switching snapshots under concurrent queries."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

import pgcite
from pgcite import lifecycle
from pgcite.config import Settings
from pgcite.ingest._pipeline import ingest
from pgcite.store._active import ActivePointerCache

from .test_snapshots import diary_lines, visible_chunks, write_lines


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def two(client: pgcite.Client, settings: Settings, tmp_path: Path,
        request: pytest.FixtureRequest) -> Iterator[tuple[pgcite.Collection, int, int]]:
    """A collection with snapshot 1 active and a valid snapshot 2 built (inactive): 2 adds an
    entry and edits another, so every hit shows which snapshot it came from."""
    name = "a_" + request.node.name.removeprefix("test_")[:40].lower()
    col = client.create_collection(name)
    lines = diary_lines()
    s1 = col.ingest([write_lines(tmp_path / "one.jsonl", lines[:-1])]).snapshot_id
    edited = lines[0].replace("leg of mutton", "leg of mutton and a venison pasty")
    s2 = ingest(client.db, name, [write_lines(tmp_path / "two.jsonl", [edited, *lines[1:]])],
                replace=True, activate=False, progress=False, settings=settings).snapshot_id
    assert s1 is not None and s2 is not None
    yield col, s1, s2
    client.drop_collection(name)


def test_steady_state_queries_do_not_read_the_pointer(diary: pgcite.Collection) -> None:
    cache = diary.client.active_pointers()
    assert cache.wait_listening()
    # read the pointer now: an entry an earlier test loaded may reach its max age (30 s, the
    # last-resort expiry) during the loop below, one legitimate lookup (seen once in CI)
    cache.invalidate(diary.name)
    diary.search("fire", mode="keyword")
    before = cache.stats.lookups
    for _ in range(20):
        diary.search("fire", mode="keyword")
    assert cache.stats.lookups == before


def test_activation_elsewhere_is_noticed_by_notification(
    two: tuple[pgcite.Collection, int, int], settings: Settings
) -> None:
    col, s1, s2 = two
    assert col.client.active_pointers().wait_listening()
    assert col.active_snapshot().snapshot_id == s1
    with pgcite.Client(settings) as other:  # another "process": its own connections
        lifecycle.activate(other.collection(col.name), s2)
    assert wait_for(lambda: col.active_snapshot().snapshot_id == s2, timeout=5)
    assert col.client.active_pointers().stats.notifications >= 1


def test_lost_listener_falls_back_to_reading_the_table(
    two: tuple[pgcite.Collection, int, int], settings: Settings
) -> None:
    col, s1, s2 = two
    cache = col.client.active_pointers()
    assert cache.wait_listening() and col.active_snapshot().snapshot_id == s1
    disconnects = cache.stats.disconnects
    with pgcite.Client(settings) as other, other.connection() as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                     " WHERE application_name = 'pgcite-active-listener'")
        assert wait_for(lambda: cache.stats.disconnects > disconnects)
        # While the listener is down (or just back), an activation it never heard of …
        with other.db.transaction() as tx:
            from pgcite.store._snapshots import activate_snapshot

            activate_snapshot(tx, col.info, s2)
    # … is still seen: entries were dropped on disconnect and re-read.
    assert wait_for(lambda: col.active_snapshot().snapshot_id == s2, timeout=5)
    assert cache.wait_listening()


def test_unlistened_cache_reads_every_time() -> None:
    def refuse() -> psycopg.Connection:
        raise psycopg.OperationalError("no server")

    cache: ActivePointerCache[int] = ActivePointerCache(refuse)
    loads = iter(range(100))
    assert [cache.get("x", lambda: next(loads)) for _ in range(3)] == [0, 1, 2]
    cache.close()


def test_a_read_racing_a_notification_is_not_cached(diary: pgcite.Collection) -> None:
    cache: ActivePointerCache[int] = ActivePointerCache(
        lambda: psycopg.connect(diary.client.db.url, autocommit=True))
    assert cache.wait_listening()

    def load_racing() -> int:
        cache.invalidate("x")  # an activation lands while we read the table
        return 1

    assert cache.get("x", load_racing) == 1
    assert cache.get("x", lambda: 2) == 2  # the racing read was not kept
    assert cache.get("x", lambda: 3) == 2  # this one was
    cache.close()


def test_switch_under_concurrent_queries(two: tuple[pgcite.Collection, int, int],
                                         settings: Settings) -> None:
    col, s1, s2 = two
    allowed = {s1: visible_chunks(col, s1), s2: visible_chunks(col, s2)}
    assert allowed[s1] != allowed[s2]
    stop = threading.Event()
    errors: list[str] = []
    seen: Counter[int] = Counter()
    last: dict[int, int] = {}
    lock = threading.Lock()

    def worker(i: int) -> None:
        with pgcite.Client(settings) as c:
            mine = c.collection(col.name)
            queries = ["leg of mutton venison", "the fire in the City", "Parmazan cheese"]
            n = 0
            while not stop.is_set():
                try:
                    result = mine.search(queries[n % 3], top_k=10)
                    hits = {(h.id, h.body) for h in result.hits}
                    if not hits <= allowed[result.snapshot_id]:
                        errors.append(f"mixed response from snapshot {result.snapshot_id}")
                    with lock:
                        seen[result.snapshot_id] += 1
                        last[i] = result.snapshot_id
                except Exception as exc:  # every error counts
                    errors.append(repr(exc))
                n += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    lifecycle.activate(col, s2)
    switched = time.monotonic()
    time.sleep(1.5)
    stop.set()
    for t in threads:
        t.join(30)
    assert errors == []
    assert seen[s1] > 0 and seen[s2] > 0
    assert set(last.values()) == {s2}  # every client noticed the switch (by notification)
    assert time.monotonic() - switched < 10
