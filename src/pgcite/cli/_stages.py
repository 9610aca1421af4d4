"""Stage flags shared by `pgcite search` and `pgcite ask` (None = the collection's setting)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from pgcite.cli._common import console

if TYPE_CHECKING:
    from pgcite import StageEvent

_MODELS = ("Models come from PGCITE_LLM / PGCITE_LLM_BASE_URL / PGCITE_LLM_MODEL and "
           "PGCITE_RERANKER / PGCITE_RERANKER_PATH / PGCITE_RERANKER_URL; a stage whose model "
           "is not configured is skipped and says so.")
RouteOpt = Annotated[bool | None, typer.Option(
    "--route/--no-route", help="Heuristic router (on by default): names/ids → keyword-heavy, "
    "multi-concept → decompose, long questions without names → HyDE (with --route-llm and an "
    "LLM; otherwise the plain hybrid); who/where/how-often and keyword-heavy questions get the "
    "entity boost (see --entity-boost).", rich_help_panel="Quality stages")]
RouteLlmOpt = Annotated[bool | None, typer.Option(
    "--route-llm/--no-route-llm", help="Let the router ask the LLM when unsure and run HyDE "
    "on the hyde route (needs PGCITE_LLM).", rich_help_panel="Quality stages")]
DecomposeOpt = Annotated[bool | None, typer.Option(
    "--decompose/--no-decompose", help="Split 'X vs Y'-style questions and fuse per-concept "
    "results.", rich_help_panel="Quality stages")]
HydeOpt = Annotated[bool | None, typer.Option(
    "--hyde/--no-hyde", help="Embed an LLM-written hypothetical passage instead of the "
    "question (needs PGCITE_LLM).", rich_help_panel="Quality stages")]
RerankOpt = Annotated[bool | None, typer.Option(
    "--rerank/--no-rerank", help="Rerank the top --rerank-depth candidates (needs "
    "PGCITE_RERANKER). " + _MODELS, rich_help_panel="Quality stages")]
RerankDepthOpt = Annotated[int | None, typer.Option(
    "--rerank-depth", min=1, max=1000, help="Candidates to rerank (default 50).",
    rich_help_panel="Quality stages")]
BoostOpt = Annotated[list[str] | None, typer.Option(
    "--boost", help="FIELD=VALUE:MULTIPLIER on fused scores, e.g. corpus=A:1.5 (repeatable).",
    rich_help_panel="Quality stages")]

EntityBoostOpt = Annotated[str | None, typer.Option(
    "--entity-boost", help="Fused scores of passages naming the query's entities times 1 + "
    "WEIGHT x their idf share: auto (the default: 0.5 on who/where/how-often and keyword-heavy "
    "questions, with the router), a number for every question, 0 off. Needs entities stored "
    "at ingest.", rich_help_panel="Quality stages")]


def stage_overrides(route: bool | None, decompose: bool | None, hyde: bool | None,
                    rerank: bool | None, rerank_depth: int | None,
                    boost: list[str] | None, route_llm: bool | None = None,
                    entity_boost: str | None = None) -> dict[str, Any] | None:
    """The request's stage overrides from the flags given (None when none was given)."""
    from pgcite.retrieve import parse_boost

    flags = {"route": route, "route_llm": route_llm, "decompose": decompose, "hyde": hyde,
             "rerank": rerank, "rerank_depth": rerank_depth}
    overrides: dict[str, Any] = {k: v for k, v in flags.items() if v is not None}
    if boost:
        overrides["boosts"] = [parse_boost(spec).model_dump() for spec in boost]
    if entity_boost is not None:
        overrides["entity_boost"] = _entity_boost(entity_boost)
    return overrides or None


def _entity_boost(text: str) -> str | float:
    from pgcite import ConfigError

    if text.strip().lower() == "auto":
        return "auto"
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"--entity-boost {text!r} is neither auto nor a number",
                          hint="e.g. --entity-boost 0 (off) or --entity-boost 0.5") from None


def print_stage_events(events: Sequence[StageEvent]) -> None:
    """What each stage did: applied ones dimmed; a stage that was skipped or fell back stands
    out, so that a flag asked for (``--hyde``) never silently does nothing."""
    for event in events:
        line = f"{event.stage} {event.outcome}: {escape(event.detail)}"
        if event.outcome == "applied":
            console.print(f"[dim]{line} ({event.ms:.0f} ms)[/]", highlight=False)
        else:
            console.print(f"[yellow]note:[/] {line}", highlight=False)
