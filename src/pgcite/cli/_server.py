"""`pgcite server standby`: a local hot standby of the embedded server, for read replicas."""

from __future__ import annotations

import signal
import sys
import threading
from typing import Annotated

import typer

from pgcite.cli._common import JsonOption, console, emit_json, fail, settings, user_errors

app = typer.Typer(help="The embedded PostgreSQL server: local read replicas.",
                  no_args_is_help=True)


@app.command("standby")
def standby_command(
    port: Annotated[int, typer.Option(
        min=1, max=65535, help="Socket port of this standby (one per standby).")] = 5433,
    json_out: bool = JsonOption,
) -> None:
    """Run a hot standby of the embedded server until interrupted (Ctrl-C, SIGTERM).

    The first run copies the primary with pg_basebackup -R into DATA_DIR/standby-PORT; later
    runs restart that copy, which catches up by streaming replication. Point the service at it
    with PGCITE_READ_URLS (the URL is printed)."""
    from pgcite.store import start_standby, stop_standby

    current = settings()
    if current.database_url is not None:
        raise fail("standbys are for the embedded server; PGCITE_DATABASE_URL names another",
                   hint="make replicas of that server with its own tools (docs/scale-out.md)",
                   code=2)
    with user_errors():
        standby = start_standby(current.data_dir, port, current.embedded_shared_buffers)
    if json_out:
        emit_json({"url": standby.url, "port": port, "dataDir": str(standby.pgdata),
                   "pid": standby.pid})
        sys.stdout.flush()  # the caller reads the URL while this runs on
    else:
        console.print(f"standby on port {port} ({standby.pgdata}); stop with Ctrl-C\n"
                      f"PGCITE_READ_URLS='{standby.url}'")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):
            if standby.pid is None:
                raise fail(f"the standby on port {port} stopped; see {standby.pgdata / 'log'}")
    finally:
        with user_errors():
            stop_standby(standby)
