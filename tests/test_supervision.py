"""Supervision of the embedded server under a running service: after ``kill -9`` of the
postmaster, reads answer 503 with a hint, the server is restarted, and reads answer 200 again
within 10 s. Its own data dir: the session's server is never killed."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from fastapi.testclient import TestClient

import pgcite
from pgcite.config import Settings
from pgcite.service import ServiceConfig, create_app


@pytest.fixture()
def own_client() -> Iterator[pgcite.Client]:
    data_dir = Path(tempfile.mkdtemp(prefix="pgcite-supervise-"))  # see conftest.py: not tmp_path
    client = pgcite.Client(Settings(data_dir=data_dir, database_url=None))
    try:
        yield client
    finally:
        client.close()
        supervisor = getattr(client.db, "supervisor", None)
        if supervisor is not None:
            with contextlib.suppress(psutil.Error):  # a failed test may leave it dead
                supervisor._server.cleanup()  # stop it now, not at exit
        shutil.rmtree(data_dir, ignore_errors=True)


def _wait_dead(pid: int) -> None:
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.01)
    raise AssertionError(f"postmaster {pid} still alive 5 s after SIGKILL")


def _postmaster_pid(client: pgcite.Client) -> int:
    return int((client.settings.data_dir / "pg18" / "postmaster.pid").read_text().split()[0])


def test_postmaster_kill_recovers_within_10s(own_client: pgcite.Client) -> None:
    app = create_app(client=own_client, config=ServiceConfig(
        auth=False, warm_up=False, watch_database_s=0))
    with TestClient(app) as api:
        assert api.get("/v1/collections").status_code == 200
        old_pid = _postmaster_pid(own_client)
        os.kill(old_pid, signal.SIGKILL)
        killed = time.monotonic()
        _wait_dead(old_pid)  # the signal is asynchronous: a request before death is served
        statuses: list[int] = []
        while time.monotonic() - killed < 10.0:
            response = api.get("/v1/collections")
            statuses.append(response.status_code)
            if response.status_code == 200:
                break
            assert response.status_code == 503, response.text
            assert response.json()["hint"] == "retry in a few seconds"
            time.sleep(0.1)
        recovered = time.monotonic() - killed
        print(f"recovered in {recovered:.1f} s; statuses {statuses}")
        assert statuses[0] == 503 and statuses[-1] == 200, (statuses, recovered)
        assert _postmaster_pid(own_client) != old_pid
        # and it stays up: more reads, a fresh connection for readiness
        assert all(api.get("/v1/collections").status_code == 200 for _ in range(5))
        assert api.get("/readyz").status_code == 200


def test_async_search_path_recovers_after_a_postmaster_kill(own_client: pgcite.Client,
                                                            tmp_path: Path) -> None:
    """The search route runs on the async pool: a dead server must start its restart there
    too (a 503 now), and the pool must follow the restarted server (a 200 again)."""
    entry = ('{"id": "d-1", "text": "Up betimes and to the office, where the fire was talked'
             ' of all morning.", "date": "1666-09-03"}\n')
    (tmp_path / "entries.jsonl").write_text(entry)
    own_client.create_collection("supervised").ingest([tmp_path / "entries.jsonl"])
    app = create_app(client=own_client, config=ServiceConfig(
        auth=False, warm_up=False, watch_database_s=0))
    with TestClient(app) as api:

        def search() -> int:
            return api.post("/v1/collections/supervised/search",
                            json={"query": "fire at the office"}).status_code

        assert search() == 200
        old_pid = _postmaster_pid(own_client)
        os.kill(old_pid, signal.SIGKILL)
        killed = time.monotonic()
        _wait_dead(old_pid)
        statuses: list[int] = []
        while time.monotonic() - killed < 10.0:
            statuses.append(search())
            if statuses[-1] == 200:
                break
            assert statuses[-1] == 503, statuses
            time.sleep(0.1)
        assert statuses[0] == 503 and statuses[-1] == 200, statuses
        assert all(search() == 200 for _ in range(3))


def _kill_postmaster(client: pgcite.Client) -> int:
    old_pid = _postmaster_pid(client)
    os.kill(old_pid, signal.SIGKILL)
    _wait_dead(old_pid)
    return old_pid


def test_readyz_alone_brings_the_database_back(own_client: pgcite.Client) -> None:
    """A load balancer that calls only /readyz sees the service recover: /readyz itself looks at
    the embedded server and starts its restart (no keyed request needed)."""
    app = create_app(client=own_client, config=ServiceConfig(
        auth=True, warm_up=False, watch_database_s=0))
    with TestClient(app) as api:
        assert api.get("/readyz").status_code == 200
        killed, old_pid = time.monotonic(), _kill_postmaster(own_client)
        statuses: list[int] = []
        while time.monotonic() - killed < 10.0:
            response = api.get("/readyz")
            statuses.append(response.status_code)
            if response.status_code == 200:
                break
            assert response.status_code == 503 and response.json()["hint"], response.text
            time.sleep(0.2)
        assert statuses[0] == 503 and statuses[-1] == 200, statuses
        assert _postmaster_pid(own_client) != old_pid


def test_the_service_restarts_a_dead_postmaster_with_no_request(
        own_client: pgcite.Client) -> None:
    app = create_app(client=own_client, config=ServiceConfig(
        auth=True, warm_up=False, watch_database_s=0.2))
    with TestClient(app):
        killed, old_pid = time.monotonic(), _kill_postmaster(own_client)
        new_pid = old_pid
        while time.monotonic() - killed < 10.0 and new_pid == old_pid:
            time.sleep(0.2)
            with contextlib.suppress(FileNotFoundError, ValueError, IndexError):
                new_pid = _postmaster_pid(own_client)
        assert new_pid != old_pid and psutil.pid_exists(new_pid), "not restarted within 10 s"
        while True:  # it was restarted with no request; now it serves (once it is ready)
            try:
                with own_client.connection() as conn:
                    assert conn.execute("SELECT 1").fetchone() == (1,)
                break
            except pgcite.DatabaseError:
                # not a timing test (bench/reliability.py times it): a bound, on shared cores
                assert time.monotonic() - killed < 30.0, "not serving within 30 s"
                time.sleep(0.2)
