"""The embedded server runs with pgcite's settings (store/_server.py): its shared buffers are a
quarter of the memory unless set, from the first start of a new data directory on, and a changed
setting applies at the next start. A real server in a data dir of this module's own."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pydantic import ValidationError

from pgcite.config import Settings
from pgcite.store._database import Database
from pgcite.store._server import (
    SETTINGS_FILE,
    default_shared_buffers,
    embedded_server,
    machine_memory,
)

GB = 2**30


def test_default_shared_buffers_is_a_quarter_within_bounds() -> None:
    assert default_shared_buffers(8 * GB) == "2048MB"
    assert default_shared_buffers(24 * GB) == "6144MB"
    assert default_shared_buffers(256 * 2**20) == "128MB"  # never below PostgreSQL's default
    assert default_shared_buffers(512 * GB) == "8192MB"
    assert machine_memory() > 0


@pytest.mark.parametrize("value", ["2 GB", "0MB", "lots", "2gb"])
def test_a_malformed_setting_is_refused(value: str) -> None:
    with pytest.raises(ValidationError):
        Settings(embedded_shared_buffers=value)


@pytest.fixture()
def data_dir() -> Iterator[Path]:
    # Not under pytest's tmp dir: as root the server runs as another user (see conftest.py).
    path = Path(tempfile.mkdtemp(prefix="pgcite-settings-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _shared_buffers(db: Database, expected: str) -> tuple[int, int]:
    """The server's shared_buffers and ``expected``, both in bytes."""
    with psycopg.connect(db.url) as conn:
        row = conn.execute("SELECT pg_size_bytes(current_setting('shared_buffers')),"
                           " pg_size_bytes(%s)", [expected]).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])


def _stop(data_dir: Path) -> None:
    # this process's handle is the server's last: cleaning it up stops the server
    embedded_server(data_dir).cleanup()


def test_a_new_data_dir_starts_with_the_setting_and_a_change_applies_at_restart(
        data_dir: Path) -> None:
    db = Database.open(Settings(data_dir=data_dir, embedded_shared_buffers="160MB"))
    got, want = _shared_buffers(db, "160MB")  # the very first start, right after initdb
    assert got == want
    _stop(data_dir)
    db = Database.open(Settings(data_dir=data_dir, embedded_shared_buffers="1GB"))
    got, want = _shared_buffers(db, "1GB")
    assert got == want
    _stop(data_dir)
    db = Database.open(Settings(data_dir=data_dir))
    got, want = _shared_buffers(db, default_shared_buffers(machine_memory()))
    assert got == want
    _stop(data_dir)
    # included once, however often it started
    conf = data_dir.resolve() / "pg18" / "postgresql.conf"
    assert conf.read_text().count(SETTINGS_FILE) == 1
