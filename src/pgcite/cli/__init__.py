"""The ``pgcite`` command line (typer + rich). Every command takes ``--json``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pgcite.cli import _collection, _documents, _snapshot
from pgcite.cli._ask import ask_command
from pgcite.cli._common import set_global
from pgcite.cli._demo import demo_command
from pgcite.cli._eval import eval_command
from pgcite.cli._ingest import ingest_command
from pgcite.cli._key import app as key_app
from pgcite.cli._mcp import mcp_command
from pgcite.cli._search import search_command
from pgcite.cli._serve import serve_command

app = typer.Typer(
    name="pgcite",
    help="Grounded retrieval with citations on PostgreSQL + pgvector.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(_collection.app, name="collection")
app.add_typer(_snapshot.app, name="snapshot")
app.add_typer(_documents.app, name="documents")
app.command("ingest")(ingest_command)
app.command("search")(search_command)
app.command("demo")(demo_command)
app.command("eval")(eval_command)
app.command("ask")(ask_command)
app.command("serve")(serve_command)
app.command("mcp")(mcp_command)
app.add_typer(key_app, name="key")


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


def main() -> None:
    app()
