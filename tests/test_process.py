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
from collections.abc import Iterator
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
    deadline = time.monotonic() + within_s
    while postmasters(data_dir):
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
