"""`pgcite documents list|delete`: what a collection holds, and taking documents out of it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from pgcite.cli._common import JsonOption, client, console, emit_json, user_errors

if TYPE_CHECKING:
    from pgcite import DocumentInfo

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
    console.print(document_table(docs, console.width))


# The columns of `documents list`, in order; those left out when the terminal is too narrow for
# all of them, least needed first; and the narrowest a cut column gets (cut with an ellipsis).
_COLUMNS = ("id", "title", "dates", "author", "corpus", "chunks")
_DROPPABLE = ("chunks", "corpus", "author")
_CUT = {"title": 10, "author": 8, "corpus": 6}
# the order in which they get what is left, and how wide each may get (None: all it needs)
_GROW = (("title", 40), ("author", 24), ("corpus", 10), ("title", None), ("author", None))
_GAP = 2  # between columns


def document_table(docs: Sequence[DocumentInfo], width: int) -> Table:
    """One line per document at any width, 80 columns included: ids (what a reader copies into
    `documents delete`) and dates are never cut; titles, authors and corpora are cut with an
    ellipsis (--json has them whole); no box (its rules took 16 of 80 columns); and if even
    that does not fit, the chunks, then corpus, then author columns are left out."""
    cells: dict[str, list[str]] = {name: [] for name in _COLUMNS}
    for d in docs:
        for name, value in zip(_COLUMNS, (d.id, d.title or "", _dates(d.date_start, d.date_end),
                                          d.author or "", d.corpus or "", str(d.chunks)),
                               strict=True):
            cells[name].append(value)
    need = {name: max(len(name), *map(len, values)) for name, values in cells.items()}
    widths = {name: min(need[name], _CUT.get(name, need[name])) for name in _COLUMNS}
    shown = list(_COLUMNS)
    for name in _DROPPABLE:
        if sum(widths[c] for c in shown) + _GAP * (len(shown) - 1) <= width:
            break
        shown.remove(name)
    # what is left goes to the cut columns: the title first, up to a point; then the rest
    spare = width - sum(widths[c] for c in shown) - _GAP * (len(shown) - 1)
    for name, cap in _GROW:
        if name in shown and spare > 0:
            grow = max(0, min(spare, min(need[name], cap or need[name]) - widths[name]))
            widths[name] += grow
            spare -= grow
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for name in shown:
        table.add_column(name, no_wrap=True, overflow="ellipsis", width=widths[name],
                         justify="right" if name == "chunks" else "left")
    for row in zip(*(cells[name] for name in shown), strict=True):
        table.add_row(*map(escape, row))
    return table


def _dates(start: dt.date | None, end: dt.date | None) -> str:
    """``1851-05-02``, a range as short as it reads unambiguously: ``1851-05-02–03``,
    ``1851-05-02–06-01``, ``1851-12-30–1852-01-02``."""
    if start is None:
        return "undated"
    if end is None or end == start:
        return start.isoformat()
    if (start.year, start.month) == (end.year, end.month):
        return f"{start.isoformat()}–{end.day:02d}"
    if start.year == end.year:
        return f"{start.isoformat()}–{end.month:02d}-{end.day:02d}"
    return f"{start.isoformat()}–{end.isoformat()}"


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
