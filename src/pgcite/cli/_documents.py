"""`pgcite documents list|delete`: what a collection holds, and taking documents out of it."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from pgcite.cli._common import JsonOption, client, console, emit_json, user_errors

app = typer.Typer(help="List the documents of a collection, or delete some (a new snapshot).",
                  no_args_is_help=True)

CollectionArg = Annotated[str, typer.Argument(help="Collection name.")]


@app.command("list")
def list_(
    collection: CollectionArg,
    snapshot: Annotated[int | None, typer.Option(
        help="List this snapshot's documents (default: the active snapshot's).")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many.")] = None,
    offset: Annotated[int, typer.Option(min=0, help="Skip this many first.")] = 0,
    json_out: bool = JsonOption,
) -> None:
    """List documents: id, title, dates, author, corpus and chunks, oldest first."""
    with user_errors(), client() as c:
        docs = c.collection(collection).documents(snapshot_id=snapshot, limit=limit,
                                                  offset=offset)
    if json_out:
        emit_json([d.model_dump(mode="json") for d in docs])
        return
    if not docs:
        console.print("no documents")
        return
    # ids are what a reader copies into `documents delete` or a script parses: never cut, at any
    # terminal width (the other columns give way)
    table = Table()
    table.add_column("id", no_wrap=True, min_width=max(len(d.id) for d in docs))
    for name in ("title", "dates", "author", "corpus", "chunks"):
        table.add_column(name)
    for d in docs:
        dates = _dates(d.date_start, d.date_end)
        table.add_row(escape(d.id), escape(d.title or ""), dates, escape(d.author or ""),
                      escape(d.corpus or ""), str(d.chunks))
    console.print(table)


def _dates(start: object, end: object) -> str:
    if start is None:
        return "undated"
    return str(start) if end in (None, start) else f"{start} – {end}"


@app.command()
def delete(
    collection: CollectionArg,
    ids: Annotated[list[str], typer.Argument(help="Document ids (see `pgcite documents list`).")],
    activate: Annotated[bool, typer.Option(
        help="Make the new snapshot live (through the gate when the collection has a golden "
        "set); --no-activate leaves it built for `pgcite snapshot activate`.")] = True,
    json_out: bool = JsonOption,
) -> None:
    """Delete documents: a NEW snapshot of the active one without them, activated like an ingest.

    Nothing stored is erased (`pgcite snapshot rollback` brings them back; `pgcite snapshot gc`
    reclaims the space later). An unknown id is an error, and then nothing changes. Exits 1 if
    the gate refused the new snapshot (it stays built, inactive).
    """
    with user_errors(), client() as c:
        report = c.collection(collection).delete_documents(ids, activate=activate)
    if json_out:
        emit_json(report)
    else:
        state = ("active" if report.activated else "built, inactive: "
                 f"pgcite snapshot activate {collection} {report.snapshot_id}")
        console.print(f"deleted {len(report.removed)} document(s) from snapshot "
                      f"{report.from_snapshot} of [bold]{escape(collection)}[/]: snapshot "
                      f"{report.snapshot_id} ({state})", highlight=False)
        if report.gate:
            console.print(f"gate: {escape(report.gate)}", highlight=False)
    if (report.gate or "").startswith("refused"):
        raise typer.Exit(1)
