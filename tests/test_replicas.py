"""Read replicas: real hot standbys started from the embedded server's own binaries
(``pg_basebackup -R``, streaming replication), never a mock. Marked ``replicas`` (CI runs them
with the rest; ``-m replicas`` selects them)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg_pool import PoolTimeout

import pgcite
from pgcite._client import Collection
from pgcite._errors import DatabaseError
from pgcite.config import Settings
from pgcite.ingest._pipeline import ingest
from pgcite.service import ServiceConfig, create_app
from pgcite.store._replicas import ReplicaBehind, ReplicaSet, classify, label, lsn_int
from pgcite.store._server import embedded_server, restart_server, server_alive
from pgcite.store._standby import Standby, start_standby, stop_standby

from .test_snapshots import diary_lines, write_lines
from .test_snapshots_active import wait_for

# --- the routing decisions, no server -----------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_replicas_are_chosen_round_robin_and_a_failed_one_is_retried_later() -> None:
    clock = Clock()
    urls = ["postgresql://a:1/x", "postgresql://b:2/x"]
    replicas = ReplicaSet(urls, retry_after_s=5.0, clock=clock)
    assert [r.url for r in (replicas.choose(), replicas.choose(), replicas.choose())] == [
        urls[0], urls[1], urls[0]]
    first = replicas.replicas[0]
    replicas.failed(first)
    assert {replicas.choose().url for _ in range(4)} == {urls[1]}  # type: ignore[union-attr]
    assert replicas.choose(frozenset({urls[1]})) is None  # the other one is down
    clock.now = 5.0  # due: one request tries it, the next retry is scheduled meanwhile
    picked = [r.url for r in (replicas.choose(), replicas.choose(), replicas.choose())
              if r is not None]
    assert picked.count(urls[0]) == 1
    replicas.succeeded(first)
    assert first.healthy


def test_settings_read_urls_split_on_commas_and_spaces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGCITE_READ_URLS", "postgresql://a/x?host=/s&port=5433, postgresql://b/x")
    assert Settings().read_urls == ["postgresql://a/x?host=/s&port=5433", "postgresql://b/x"]
    monkeypatch.delenv("PGCITE_READ_URLS")
    assert Settings().read_urls == []


def test_classify_and_lsn_and_label() -> None:
    assert classify(ReplicaBehind("x")) == "behind"
    assert classify(psycopg.errors.UndefinedTable("no table")) == "behind"
    assert classify(psycopg.OperationalError("connection refused")) == "down"
    assert classify(PoolTimeout("no connection in 5 s")) == "busy"
    assert classify(DatabaseError("wrapped")) is None
    wrapped = DatabaseError("cannot connect")
    wrapped.__cause__ = psycopg.OperationalError("refused")
    assert classify(wrapped) == "down"
    assert classify(ValueError("a bad filter")) is None
    assert lsn_int("1/10") == (1 << 32) + 16
    assert label("postgresql://u:secret@db.example:6432/x") == "db.example:6432"
    assert label("postgresql://postgres:@/postgres?host=/tmp/d/standby-5433&port=5433") == (
        "standby-5433:5433")


# --- real standbys ------------------------------------------------------------------------

pytestmark = pytest.mark.replicas


class Cluster:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.primary = embedded_server(data_dir)
        self.standbys: list[Standby] = []

    @property
    def primary_url(self) -> str:
        url: str = self.primary.get_uri()
        return url

    def client(self, **overrides: object) -> pgcite.Client:
        fields: dict[str, object] = {
            "data_dir": self.data_dir, "read_urls": [s.url for s in self.standbys],
            "replica_retry_s": 0.2, "replica_wait_s": 0.3, **overrides}
        return pgcite.Client(Settings(**fields))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    # Not pytest's tmp dir (see conftest.settings): the server may run as another OS user.
    # Short, so the standbys' socket paths fit.
    data_dir = Path(tempfile.mkdtemp(prefix="pgr-"))
    cluster = Cluster(data_dir)
    with pgcite.Client(Settings(data_dir=data_dir)) as admin:
        col = admin.create_collection("diary")
        lines = diary_lines()
        col.ingest([write_lines(data_dir / "one.jsonl", lines[:-1])])
    cluster.standbys = [start_standby(data_dir, 5433), start_standby(data_dir, 5434)]
    yield cluster
    for standby in cluster.standbys:
        stop_standby(standby)
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Iterator[pgcite.Client]:
    with cluster.client(read_urls=[]) as client:
        yield client


@pytest.fixture
def reader(cluster: Cluster) -> Iterator[pgcite.Client]:
    with cluster.client() as client:
        yield client


def _second_snapshot(admin: pgcite.Client, cluster: Cluster) -> int:
    lines = diary_lines()
    edited = lines[0].replace("leg of mutton", "leg of mutton and a venison pasty")
    report = ingest(admin.db, "diary", [write_lines(cluster.data_dir / "two.jsonl",
                                                    [edited, *lines[1:]])],
                    replace=True, activate=False, progress=False, settings=admin.settings)
    assert report.snapshot_id is not None
    return report.snapshot_id


def _replayed(standby: Standby, admin: pgcite.Client) -> Callable[[], bool]:
    def caught_up() -> bool:
        with admin.connection() as conn:
            primary = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        with psycopg.connect(standby.url) as conn:
            replay = conn.execute("SELECT pg_last_wal_replay_lsn()::text").fetchone()
        return bool(primary and replay and lsn_int(replay[0]) >= lsn_int(primary[0]))
    return caught_up


def test_standbys_are_streaming_read_only_copies(cluster: Cluster, admin: pgcite.Client) -> None:
    with admin.connection() as conn:
        rows = conn.execute("SELECT state FROM pg_stat_replication").fetchall()
    assert [r[0] for r in rows] == ["streaming", "streaming"]
    with psycopg.connect(cluster.standbys[0].url) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("CREATE TABLE nope (x int)")


def test_reads_go_to_replicas_and_give_the_primarys_answer(
        admin: pgcite.Client, reader: pgcite.Client) -> None:
    expected = admin.collection("diary").search("leg of mutton", top_k=3)
    col = reader.collection("diary")
    results = [col.search("leg of mutton", top_k=3) for _ in range(4)]
    answer = col.answer("What did Pepys dine on?")
    assert all([h.id for h in r.hits] == [h.id for h in expected.hits] for r in results)
    assert answer.snapshot_id == expected.snapshot_id
    served = reader.replicas.served
    assert "primary" not in served and sum(served.values()) == 5
    assert {r.label for r in reader.replicas.replicas} <= set(served)  # both took reads


def test_activation_reaches_replicas_and_a_lagging_one_answers_from_its_own_pointer(
        cluster: Cluster, admin: pgcite.Client, reader: pgcite.Client) -> None:
    col, old = admin.collection("diary"), admin.collection("diary").active_snapshot()
    paused = cluster.standbys[0]
    with psycopg.connect(paused.url, autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
        try:
            new = _second_snapshot(admin, cluster)  # built and activated while it is paused
            col.activate(new)
            assert wait_for(_replayed(cluster.standbys[1], admin))
            only_paused = cluster.client(read_urls=[paused.url])
            only_live = cluster.client(read_urls=[cluster.standbys[1].url])
            with only_paused, only_live:
                # the paused replica still has the old pointer, and answers from it, whole
                lagging = only_paused.collection("diary").answer("What did Pepys dine on?")
                assert lagging.snapshot_id == old.snapshot_id
                assert only_paused.replicas.served == {"standby-5433:5433": 1}
                assert only_live.collection("diary").search("mutton").snapshot_id == new
                # naming the new snapshot there: a bounded wait, then the primary
                named = only_paused.collection("diary").search("mutton", snapshot_id=new)
                assert named.snapshot_id == new
                assert only_paused.replicas.served["primary"] == 1
                assert only_paused.replicas.served["retried"] == 1
                # an answer sent to the primary keeps its searches there (not back on the
                # replica, which lacks the snapshot and would find nothing)
                sent = only_paused.collection("diary").answer("What did Pepys dine on?",
                                                               snapshot_id=new)
                assert sent.snapshot_id == new and sent.sources
                assert only_paused.replicas.served["primary"] == 2
        finally:
            conn.execute("SELECT pg_wal_replay_resume()")
    assert wait_for(_replayed(paused, admin))
    assert {reader.collection("diary").search("mutton").snapshot_id for _ in range(4)} == {new}
    col.rollback()


def test_metrics_export_replica_lag(admin: pgcite.Client, reader: pgcite.Client) -> None:
    app = create_app(config=ServiceConfig(auth=False, warm_up=False), client=reader)
    with TestClient(app) as http:
        hit = http.post("/v1/collections/diary/search", json={"query": "mutton"})
        assert hit.status_code == 200, hit.text
        text = http.get("/metrics").text
    assert 'pgcite_replica_up{replica="standby-5433:5433"} 1.0' in text
    assert 'pgcite_replica_lag_bytes{replica="standby-5434:5434"}' in text
    assert "pgcite_replica_lag_seconds" in text and "pgcite_reads_total" in text


def test_a_search_embeds_its_query_before_taking_a_connection(
        reader: pgcite.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection held through the query's embedding (CPU work: seconds on a loaded machine)
    starved the pools: with 32 clients on 2 cores, reads waited past the pool's wait on both
    replicas, then on the primary, whose PoolTimeout is a 503 (bench/replicas.py)."""
    held: list[bool] = []

    @contextmanager
    def tracking() -> Iterator[psycopg.Connection]:
        with reader.connection() as conn:
            held.append(True)
            try:
                yield conn
            finally:
                held.pop()

    col = Collection(reader, reader.collection("diary").info, connection=tracking)
    embedder = col.view().models.embedder
    assert embedder is not None
    original, during = embedder.embed_query, []

    def spy(query: str) -> Any:
        during.append(bool(held))
        return original(query)

    monkeypatch.setattr(embedder, "embed_query", spy)
    before = sum(n for k, n in reader.replicas.served.items() if k not in ("primary", "retried"))
    result = col.search("the fire of London", mode="hybrid", snippets=False)
    assert result.hits and result.timings_ms["embed"] > 0
    assert during == [False]  # embedded with no connection checked out
    served = sum(n for k, n in reader.replicas.served.items() if k not in ("primary", "retried"))
    assert served == before + 1  # and it ran on a replica


def test_a_killed_replica_is_taken_out_and_rejoins_after_restart(
        cluster: Cluster, reader: pgcite.Client) -> None:
    col = reader.collection("diary")
    col.search("mutton")  # both pools open
    col.search("mutton")
    victim = cluster.standbys[0]
    assert victim.pid is not None
    os.kill(victim.pid, signal.SIGKILL)
    assert wait_for(lambda: victim.pid is None)
    for _ in range(6):
        assert col.search("mutton").hits  # no error reaches the caller
    down = next(r for r in reader.replicas.replicas if r.label == "standby-5433:5433")
    assert not down.healthy and reader.replicas.served["retried"] >= 1
    start_standby(cluster.data_dir, victim.port)  # restarts the same copy: it catches up
    assert wait_for(lambda: (col.search("mutton") is not None) and down.healthy, timeout=20)


def test_a_replicas_failure_sends_the_read_to_the_next_node(reader: pgcite.Client) -> None:
    calls: list[str] = []

    def read() -> int:
        with reader.connection() as conn:
            port = conn.execute("SELECT current_setting('port')").fetchone()
            calls.append(str(port and port[0]))
            if len(calls) == 1:  # the replica's backend dies under the first try
                conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
            return len(calls)

    assert reader.read(read) == 2
    assert len(set(calls)) == 2  # run again, on another node
    assert reader.replicas.served["retried"] == 1
    assert sum(not r.healthy for r in reader.replicas.replicas) == 1


@pytest.mark.parametrize("holding_a_connection", [False, True])
def test_a_local_failure_during_a_read_reaches_the_caller_once(
        reader: pgcite.Client, holding_a_connection: bool) -> None:
    """An error that is not the replica's (an LLM endpoint refusing, a local file) is not a
    replica failure: no retry elsewhere, no replica taken out."""
    calls: list[int] = []

    def read() -> None:
        calls.append(1)
        reader.collection("diary").search("mutton")  # the read did reach a replica
        if holding_a_connection:
            with reader.connection() as conn:
                conn.execute("SELECT 1")
                raise OSError("disk full writing a local cache")
        raise ConnectionRefusedError("the LLM endpoint refused the connection")

    with pytest.raises(OSError):
        reader.read(read)
    assert calls == [1]
    assert "retried" not in reader.replicas.served
    assert all(r.healthy for r in reader.replicas.replicas)


def test_with_the_primary_dead_reads_go_on_and_writes_fail_clearly(cluster: Cluster) -> None:
    # A primary named by URL (not the embedded supervisor, which would restart it at once)
    with cluster.client(database_url=cluster.primary_url) as reader:
        col = reader.collection("diary")
        postmaster = cluster.primary.get_pid()
        os.kill(postmaster, signal.SIGKILL)
        try:
            assert wait_for(lambda: not server_alive(cluster.primary))
            for _ in range(4):
                assert col.search("mutton").hits
            assert "primary" not in reader.replicas.served
            with pytest.raises(DatabaseError, match="cannot connect"):
                reader.create_collection("written_while_down")
        finally:
            restart_server(cluster.primary, within_s=30)
