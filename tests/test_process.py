"""The CLI as real processes: SIGTERM and SIGKILL leave no PostgreSQL behind, an unclosed client
is closed before the embedded server stops, and messages do not depend on the terminal width.

Each test runs ``pgcite`` in a subprocess against its own embedded server (a data dir of this
module, not the session's), and checks the OS processes themselves."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from pgcite.store._server import HANDLE_FILE

CLI = [sys.executable, "-c", "from pgcite.cli import main; main()"]
DEADLINE_S = 90.0  # generous: 2 shared cores, a cold import of torch and an initdb


@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    # Not under pytest's tmp dir: as root the server runs as another user (see conftest.py).
    path = Path(tempfile.mkdtemp(prefix="pgcite-proc-"))
    yield path
    _stop_leftovers(path)
    shutil.rmtree(path, ignore_errors=True)


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PGCITE_DATABASE_URL"}
    return {**env, "PGCITE_DATA_DIR": str(data_dir), **extra}


def pgcite(data_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=_env(data_dir, **env), capture_output=True,
                          text=True, timeout=DEADLINE_S, check=False)


def postmasters(data_dir: Path) -> list[psutil.Process]:
    """Running PostgreSQL servers whose data directory is under ``data_dir``."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["name"] == "postgres" and any(str(data_dir) in a for a in cmdline):
            found.append(proc)
    return found


def handles(data_dir: Path) -> str:
    path = data_dir.resolve() / "pg18" / HANDLE_FILE
    return path.read_text() if path.exists() else "[]"


def _gone(data_dir: Path, within_s: float = 15.0) -> bool:
    return _none_within(lambda: postmasters(data_dir), within_s)


def _none_within(found: Callable[[], list[psutil.Process]], within_s: float) -> bool:
    """Whether ``found()`` comes back empty within ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while found():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _stop_leftovers(data_dir: Path) -> None:
    for proc in postmasters(data_dir):
        proc.kill()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start_serve(data_dir: Path, *extra: str,
                 within_s: float = DEADLINE_S) -> tuple[subprocess.Popen[str], str]:
    port = _free_port()
    proc = subprocess.Popen([*CLI, "serve", "--no-auth", "--port", str(port), *extra],
                            env=_env(data_dir), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0]
        try:
            if httpx.get(f"{base}/healthz", timeout=1.0).status_code == 200:
                return proc, base
        except httpx.TransportError:
            time.sleep(0.5)
    proc.kill()
    raise AssertionError("pgcite serve did not come up")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_stopping_serve_stops_postgres(data_dir: Path, sig: signal.Signals) -> None:
    proc, base = _start_serve(data_dir)
    assert httpx.get(f"{base}/readyz", timeout=10).status_code == 200
    assert postmasters(data_dir)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode in (0, 128 + sig), out  # a graceful stop (uvicorn may say 0)
    assert "Traceback" not in out, out
    assert _gone(data_dir), f"PostgreSQL left running after {sig.name}:\n{out}"
    assert handles(data_dir) == "[]"
    # and the next command starts (and stops) the server cleanly
    listed = pgcite(data_dir, "collection", "list", "--json")
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    assert _gone(data_dir)


def test_serve_workers_stop_gracefully_and_postgres_with_them(data_dir: Path) -> None:
    """`serve --workers 2`: uvicorn's workers are multiprocessing children, which skip atexit;
    they must still drop their handles, so the embedded server stops with the service."""
    proc, base = _start_serve(data_dir, "--workers", "2", within_s=3 * DEADLINE_S)
    assert httpx.get(f"{base}/readyz", timeout=10).status_code == 200
    workers = psutil.Process(proc.pid).children(recursive=True)
    assert sum("spawn_main" in " ".join(w.cmdline()) for w in workers) >= 2
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=2 * DEADLINE_S)
    assert "Traceback" not in out, out
    assert _gone(data_dir), f"PostgreSQL left running after the workers stopped:\n{out}"
    assert handles(data_dir) == "[]"


@pytest.mark.replicas
def test_server_standby_runs_until_sigterm_then_stops_its_postgres(data_dir: Path) -> None:
    proc = subprocess.Popen([*CLI, "server", "standby", "--port", "5439", "--json"],
                            env=_env(data_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    lines: list[str] = []
    while not lines or lines[-1] not in ("}\n", ""):  # the JSON object, or EOF if it died
        lines.append(proc.stdout.readline())
    assert lines[-1] == "}\n", proc.communicate()[1]
    started = json.loads("".join(lines))
    standby = [p for p in postmasters(data_dir) if "standby-5439" in " ".join(p.cmdline())]
    assert standby and standby[0].pid == started["pid"]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=DEADLINE_S)
    assert "Traceback" not in err, err
    assert _gone(data_dir), "the standby (or the primary it held) was left running"


def test_dead_process_handle_is_dropped(data_dir: Path) -> None:
    """SIGKILL skips every exit handler: the server keeps running with a dead pid in its handle
    file. The next command must drop that pid, and so stop the server when it exits."""
    proc, _ = _start_serve(data_dir)
    proc.kill()
    proc.communicate(timeout=DEADLINE_S)
    assert postmasters(data_dir) and str(proc.pid) in handles(data_dir)
    listed = pgcite(data_dir, "collection", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert _gone(data_dir), f"stale handle kept PostgreSQL running: {handles(data_dir)}"
    assert handles(data_dir) == "[]"


UNCLOSED = """
import sys, threading
import pgcite
from pgcite.config import Settings
client = pgcite.Client(Settings(data_dir=sys.argv[1]))
def use():
    with client.connection() as conn:
        conn.execute("SELECT pg_sleep(0.05)")
threads = [threading.Thread(target=use) for _ in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""  # exits with the client (and its pool, grown by the threads) still open


def test_unclosed_client_is_closed_before_the_server_stops(data_dir: Path) -> None:
    log = data_dir.resolve() / "pg18" / "log"
    for _ in range(3):  # the teardown race showed about one run in seven; the log check always
        before = log.read_text(errors="replace") if log.exists() else ""
        done = subprocess.run([sys.executable, "-c", UNCLOSED, str(data_dir)],
                              env=_env(data_dir), capture_output=True, text=True,
                              timeout=DEADLINE_S, check=False)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        assert _gone(data_dir)
        # the pool's connections were closed by the client, not cut by the server's shutdown
        new = log.read_text(errors="replace")[len(before):]
        assert "terminating connection due to administrator command" not in new, new


def test_messages_do_not_wrap_at_the_terminal_width(data_dir: Path) -> None:
    deep = data_dir / "a-rather-long-user-name" / "projects" / "archive" / "pgcite" / "fixtures"
    deep.mkdir(parents=True, exist_ok=True)
    missing = deep / "missing.jsonl"
    assert pgcite(data_dir, "collection", "create", "narrow").returncode == 0
    for columns in ("20", "80"):
        done = pgcite(data_dir, "ingest", "narrow", str(missing), "--no-progress",
                      COLUMNS=columns)
        assert done.returncode == 1
        assert f"failed: {missing}: no such file or directory\n" in done.stderr, done.stderr
        assert "Exception ignored" not in done.stderr
        usage = pgcite(data_dir, "search", "narrow", "q", "--cutoff", "1666-13-45",
                       COLUMNS=columns)
        assert usage.returncode == 2
        assert "Error: Invalid value for '--cutoff': " in usage.stderr, usage.stderr
        assert "does not match the formats '%Y-%m-%d'." in usage.stderr, usage.stderr
    assert _gone(data_dir)


# --- the keeper: warm between commands, stopped once idle, never kept up by the dead -----------


HOLD = """
import sys, time
import pgcite
from pgcite.config import Settings
client = pgcite.Client(Settings(data_dir=sys.argv[1]))
with client.connection() as conn:
    conn.execute("SELECT 1")
print("ready", flush=True)
time.sleep(600)
"""  # a process using the server (an ingest, say) until it is killed


def keepers(data_dir: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if "_keeper.py" in cmdline and str(data_dir.resolve()) in cmdline:
            found.append(proc)
    return found


def no_keeper(data_dir: Path, within_s: float = 15.0) -> bool:
    """The keeper exits once it has stopped the server (pg_ctl returns after the postmaster)."""
    return _none_within(lambda: keepers(data_dir), within_s)


def holder(data_dir: Path, **env: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(data_dir)], env=_env(data_dir, **env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n", proc.stderr
    return proc


def test_the_server_stays_warm_for_the_idle_time_then_stops(data_dir: Path) -> None:
    first = pgcite(data_dir, "collection", "list", "--json", PGCITE_SERVER_IDLE_S="4")
    assert first.returncode == 0, first.stderr
    (server,) = postmasters(data_dir)  # the command is gone; the server stays
    assert len(keepers(data_dir)) == 1 and handles(data_dir) == "[]"
    again = pgcite(data_dir, "collection", "list", "--json", PGCITE_SERVER_IDLE_S="4")
    assert again.returncode == 0, again.stderr
    assert [p.pid for p in postmasters(data_dir)] == [server.pid]  # joined, not restarted
    assert len(keepers(data_dir)) == 1  # one keeper, whoever joins
    assert _gone(data_dir, within_s=4 + 20), "the idle server was never stopped"
    assert no_keeper(data_dir) and handles(data_dir) == "[]"
    assert not (data_dir.resolve() / "pg18" / "pgcite-keeper.pid").exists()


def test_a_sigkilled_holder_does_not_keep_the_server_alive(data_dir: Path) -> None:
    """Nobody runs an exit handler: the keeper drops the dead pid and stops the server once
    idle (issue 37 E)."""
    proc = holder(data_dir, PGCITE_SERVER_IDLE_S="2")
    assert str(proc.pid) in handles(data_dir) and keepers(data_dir)
    proc.kill()
    proc.communicate(timeout=DEADLINE_S)
    assert _gone(data_dir, within_s=2 + 20), f"a dead holder kept it running: {handles(data_dir)}"
    assert no_keeper(data_dir)


def test_serve_stops_the_server_though_an_ingest_beside_it_was_killed(data_dir: Path) -> None:
    """serve + a process killed with -9 (left a zombie: its parent has not reaped it), then
    SIGINT to serve: the last live process stops the server (no keeper: idle 0)."""
    proc, base = _start_serve(data_dir)
    other = holder(data_dir)
    os.kill(other.pid, signal.SIGKILL)  # not reaped yet: a zombie still "exists"
    time.sleep(0.5)
    assert str(other.pid) in handles(data_dir)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=DEADLINE_S)
    try:
        assert _gone(data_dir), f"the killed process kept PostgreSQL up:\n{out}"
        assert handles(data_dir) == "[]"
    finally:
        other.communicate(timeout=DEADLINE_S)


def test_a_warm_server_whose_data_dir_is_deleted_is_stopped() -> None:
    path = Path(tempfile.mkdtemp(prefix="pgcite-proc-gone-"))
    try:
        done = pgcite(path, "collection", "list", "--json", PGCITE_SERVER_IDLE_S="600")
        assert done.returncode == 0, done.stderr
        assert postmasters(path) and keepers(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)
    assert _gone(path, within_s=20), "a server left running on a deleted data directory"
    assert no_keeper(path)


def test_a_broken_pdf_fails_in_one_line_without_pypdf_s_own(data_dir: Path) -> None:
    """pypdf logs "EOF marker not found" on its way to the error the failure line reports."""
    broken = data_dir / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\n1 0 obj<<>>endobj\n")
    assert pgcite(data_dir, "collection", "create", "pdfs").returncode == 0
    done = pgcite(data_dir, "ingest", "pdfs", str(broken), "--no-progress")
    assert done.returncode == 1
    assert f"failed: {broken}: not a readable PDF" in done.stderr, done.stderr
    assert "EOF marker" not in done.stderr.replace("not a readable PDF", ""), done.stderr
    assert _gone(data_dir)
