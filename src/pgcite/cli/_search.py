"""`pgcite search`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from pgcite.cli._common import (
    CorpusOpt,
    CutoffOpt,
    EntityOpt,
    JsonOption,
    ModeOpt,
    SnapshotOpt,
    cli_filters,
    console,
    emit_json,
    err_console,
    user_errors,
)
from pgcite.cli._stages import (
    BoostOpt,
    DecomposeOpt,
    EntityBoostOpt,
    HydeOpt,
    RerankDepthOpt,
    RerankOpt,
    RouteLlmOpt,
    RouteOpt,
    print_stage_events,
    stage_overrides,
)

if TYPE_CHECKING:
    from pgcite import Hit, SearchResult


def _excerpt(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def highlighted(hit: Hit) -> str:
    """The hit's snippet as rich markup, its matched words highlighted (else its opening)."""
    if hit.snippet is None:
        return escape(_excerpt(hit.body))
    parts, at = [], 0
    for start, end in hit.highlights:
        parts += [escape(hit.snippet[at:start]),
                  f"[bold yellow]{escape(hit.snippet[start:end])}[/]"]
        at = end
    parts.append(escape(hit.snippet[at:]))
    return " ".join("".join(parts).split())


def _rank(value: int | None) -> str:
    return "-" if value is None else str(value)


def warn_undated(count: int | None) -> None:
    """Say that a cutoff left undated passages out (before the results: they are incomplete)."""
    if count:
        err_console.print(f"[yellow]warning:[/] the cutoff left out {count} undated passage"
                          f"{'s' if count != 1 else ''} (nothing dates them: see pgcite ingest "
                          "--date, --catalogue)", highlight=False, soft_wrap=True)


def print_hits(result: SearchResult, *, explain: bool,
               day_label: Callable[[Hit], str | None] | None = None) -> None:
    """The hits, one cited passage each; ``day_label``: the source's own name of a hit's day,
    shown beside its date (the demo's diary: Pepys's Old-Style labels)."""
    warn_undated(result.undated_excluded)
    if not result.hits:
        console.print("no passages match (the filters may exclude everything)")
    for hit in result.hits:
        date = hit.date_start.isoformat() if hit.date_start else "undated"
        if day_label is not None and (label := day_label(hit)):
            date = f"{date} \\[{escape(label)}]"
        console.print(f"[bold]{hit.rank}. \\[{escape(hit.id)}][/]  {date}  "
                      f"[dim]{escape(hit.citation)}[/]", highlight=False)
        console.print(f"   {highlighted(hit)}", highlight=False)
    if explain:
        _print_explain(result.hits, result.dropped)
    print_stage_events(result.stages)
    timings = ", ".join(f"{k} {v:.1f} ms" for k, v in result.timings_ms.items())
    console.print(f"[dim]{result.mode} · snapshot {result.snapshot_id} · "
                  f"{result.embedding_model} · {timings}[/]")


def _print_explain(hits: list[Hit], dropped: list[Hit]) -> None:
    table = Table("fused", "keyword", "vector", "id", "bm25", "distance", title="explain")
    for hit in [*hits, *dropped]:
        table.add_row(
            str(hit.rank) if hit in hits else "dropped", _rank(hit.keyword_rank),
            _rank(hit.vector_rank), hit.id,
            f"{hit.keyword_score:.2f}" if hit.keyword_score is not None else "-",
            f"{hit.vector_distance:.3f}" if hit.vector_distance is not None else "-",
        )
    console.print(table)


def search_command(
    collection: Annotated[str, typer.Argument(help="Collection to search.")],
    query: Annotated[str, typer.Argument(help="The question or keywords. \"quoted phrases\" "
                                         "must appear; -word excludes.")],
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, max=1000)] = 5,
    mode: ModeOpt = "hybrid",
    cutoff: CutoffOpt = None,
    corpus: CorpusOpt = None,
    entity: EntityOpt = None,
    filter_: Annotated[list[str] | None, typer.Option(
        "--filter", help="author=X, source=X, or on metadata: key=value, key>=v, key<v, "
        "key:in=a,b, key:exists (repeatable).")] = None,
    ordering: Annotated[str, typer.Option(
        help="score, or corpus (tier A first, then B …).")] = "score",
    fusion: Annotated[str | None, typer.Option(
        help="How hybrid mode fuses the legs: convex (normalised scores) or rrf (reciprocal "
        "rank fusion, k=60); default: the collection's setting (convex).")] = None,
    explain: Annotated[bool, typer.Option(
        help="Show each hit's keyword/vector/fused ranks and what fusion dropped.")] = False,
    route: RouteOpt = None,
    route_llm: RouteLlmOpt = None,
    decompose: DecomposeOpt = None,
    hyde: HydeOpt = None,
    rerank: RerankOpt = None,
    rerank_depth: RerankDepthOpt = None,
    boost: BoostOpt = None,
    entity_boost: EntityBoostOpt = None,
    snapshot: SnapshotOpt = None,
    json_out: bool = JsonOption,
) -> None:
    """Hybrid search (BM25 + vector, fused) with hard filters; prints cited passages."""
    from pgcite import Client, SearchOptions
    from pgcite._modes import parse_fusion, parse_mode
    from pgcite.cli._common import settings

    with user_errors(), Client(settings()) as client:
        col = client.collection(collection)
        filters = cli_filters(col, corpus, cutoff, filter_, snapshot, entity)
        stages = stage_overrides(route, decompose, hyde, rerank, rerank_depth, boost,
                                 route_llm, entity_boost)
        options = SearchOptions(ordering=ordering, fusion=parse_fusion(fusion) if fusion else None)
        result = col.search(query, top_k=top_k, mode=parse_mode(mode), filters=filters,
                            options=options, explain=explain, stages=stages,
                            snapshot_id=snapshot, snippets=True)  # it prints every hit
    if json_out:
        emit_json(result)
    else:
        print_hits(result, explain=explain)
