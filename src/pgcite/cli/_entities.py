"""`pgcite entities`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from pgcite.cli._common import (
    CorpusOpt,
    CutoffOpt,
    JsonOption,
    SnapshotOpt,
    cli_filters,
    console,
    emit_json,
    err_console,
    user_errors,
)

if TYPE_CHECKING:
    from pgcite import EntitiesResult


def print_entities(result: EntitiesResult) -> None:
    if None in result.models:
        err_console.print("[yellow]warning:[/] some documents of this snapshot were read by no "
                          "entity model (none installed for the language -- English: pip "
                          "install 'pgcite\\[entities]' -- or ingested before entities): they "
                          "count for nothing here", highlight=False)
    where = (f" near {escape(result.near)} (→ {escape(result.near_key or '')})"
             if result.near else "")
    if not result.entities:
        console.print(f"no entities{where} in the passages these filters allow",
                      highlight=False)
    for rank, entity in enumerate(result.entities, start=1):
        console.print(f"[bold]{rank}. {escape(entity.name)}[/] [dim]{entity.label} · "
                      f"{entity.chunks} passages{where and ' together'}[/]  "
                      + " ".join(f"\\[{escape(c)}]" for c in entity.citations), highlight=False)
    for edge in result.edges:
        console.print(f"{escape(edge.source)} — {escape(edge.target)}: {edge.weight}  "
                      + " ".join(f"\\[{escape(c)}]" for c in edge.citations), highlight=False)
    console.print(f"[dim]snapshot {result.snapshot_id}[/]")


def entities_command(
    collection: Annotated[str, typer.Argument(help="Collection to read.")],
    near: Annotated[str | None, typer.Option(
        help="Rank the entities mentioned in the same passages as this one (any spelling "
        "its aliases know), e.g. \"Sir W. Penn\". Without it: the most mentioned.")] = None,
    kind: Annotated[str, typer.Option(
        help="any, person, place or organisation (the model's most frequent label).")] = "any",
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1000)] = 20,
    citations: Annotated[int, typer.Option(
        min=1, max=100, help="Citation ids listed per entity (oldest first).")] = 5,
    edges: Annotated[int, typer.Option(
        min=0, max=1000, help="Also list the N heaviest co-occurrence edges.")] = 0,
    cutoff: CutoffOpt = None,
    corpus: CorpusOpt = None,
    filter_: Annotated[list[str] | None, typer.Option(
        "--filter", help="author=X, source=X, or on metadata: key=value, key>=v … "
        "(repeatable), as for search.")] = None,
    snapshot: SnapshotOpt = None,
    json_out: bool = JsonOption,
) -> None:
    """Who, where, how often: entities ranked by the passages that mention them, each with
    the citation ids that support it, under the same filters as a search (a --cutoff means
    nothing after it counts). Needs entities stored at ingest (the `entities` extra)."""
    from pgcite import Client
    from pgcite.cli._common import settings
    from pgcite.retrieve import KINDS

    with user_errors(), Client(settings()) as client:
        if kind not in KINDS:
            from pgcite import ConfigError

            raise ConfigError(f"unknown kind {kind!r}", hint=f"use one of {', '.join(KINDS)}")
        col = client.collection(collection)
        filters = cli_filters(col, corpus, cutoff, filter_, snapshot)
        result = col.entities(near=near, filters=filters, kind=kind,  # type: ignore[arg-type]
                              limit=limit, citations=citations, edges=edges,
                              snapshot_id=snapshot)
    if json_out:
        emit_json(result)
    else:
        print_entities(result)
