"""The ``pgcite`` command line (typer + rich). Every command takes ``--json``."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer._click.exceptions import ClickException  # typer vendors click (pyproject pins it)
from typer.core import TyperGroup

from pgcite.cli import _collection, _documents, _exhibit, _server, _snapshot
from pgcite.cli._ask import ask_command
from pgcite.cli._common import set_global
from pgcite.cli._demo import demo_command
from pgcite.cli._entities import entities_command
from pgcite.cli._eval import eval_command
from pgcite.cli._ingest import ingest_command
from pgcite.cli._key import app as key_app
from pgcite.cli._mcp import mcp_command
from pgcite.cli._search import search_command
from pgcite.cli._serve import serve_command


class _PlainUsageErrors(TyperGroup):
    """Usage errors (bad option, missing argument) as click prints them, one unwrapped line,
    instead of typer's rich panel that breaks them at the terminal width: scripts grep them."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             windows_expand_args: bool = True, **extra: Any) -> Any:
        call = {"args": args, "prog_name": prog_name, "complete_var": complete_var,
                "windows_expand_args": windows_expand_args, **extra}
        if not standalone_mode:
            return super().main(standalone_mode=False, **call)
        try:
            code = super().main(standalone_mode=False, **call)
        except ClickException as exc:
            if type(exc).__name__ != "NoArgsIsHelpError":  # its help is printed already
                exc.show()
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    name="pgcite",
    cls=_PlainUsageErrors,
    help="Grounded retrieval with citations on PostgreSQL + pgvector.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(_collection.app, name="collection")
app.add_typer(_snapshot.app, name="snapshot")
app.add_typer(_documents.app, name="documents")
app.add_typer(_exhibit.app, name="exhibit")
app.command("ingest")(ingest_command)
app.command("search")(search_command)
app.command("entities")(entities_command)
app.command("demo")(demo_command)
app.command("eval")(eval_command)
app.command("ask")(ask_command)
app.command("serve")(serve_command)
app.command("mcp")(mcp_command)
app.add_typer(key_app, name="key")
app.add_typer(_server.app, name="server")


@app.callback()
def _global(
    data_dir: Annotated[Path | None, typer.Option(
        envvar="PGCITE_DATA_DIR", help="Where the embedded server keeps its data "
        "(default: the user data dir).")] = None,
    database_url: Annotated[str | None, typer.Option(
        envvar="PGCITE_DATABASE_URL", help="Use this PostgreSQL server (needs pgvector >= 0.8) "
        "instead of the embedded one.")] = None,
) -> None:
    set_global(data_dir, database_url)
    # A damaged PDF fails its file with the reason ("failed: x.pdf: not a readable PDF (...)");
    # pypdf's own warnings about it ("EOF marker not found") are noise on a terminal
    logging.getLogger("pypdf").setLevel(logging.ERROR)


def _terminate(signum: int, _frame: object) -> None:
    """SIGTERM (systemd, docker stop, kill) ends the command as Ctrl-C does: through the exit
    handlers that close the pool and stop the embedded server, which the default action (die at
    once) skips, leaving PostgreSQL running and this pid in its handle file."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: a second one must not cut cleanup short
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    try:
        app()
    except SystemExit as exc:
        _exit(exc.code)
    _exit(0)


def _exit(code: object) -> NoReturn:
    """End the process as ``sys.exit(code)`` would, without tearing the interpreter down.

    After the command everything that matters is done by the exit handlers: the client's pool
    closed, this process's handle on the embedded server given back (the server stopped, or
    left to its keeper), logs flushed. Finalising the interpreter after them -- freeing every
    module, numpy's and ONNX Runtime's among them -- cost a search about 0.2 s of CPU for
    nothing (bench/cli.py). So: the other threads joined, the exit handlers run, the streams
    flushed, and then ``os._exit``."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message"): said on stderr, status 1
        print(code, file=sys.stderr)
        status = 1
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe: nothing left to say there
            stream.flush()
    os._exit(status)
