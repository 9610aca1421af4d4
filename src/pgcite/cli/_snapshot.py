"""`pgcite snapshot build|list|eval|activate|rollback|gc`: the snapshot lifecycle.

build → (eval) → activate through the gate → rollback if needed → gc. See docs/snapshots.md.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from pgcite.cli._common import (
    JsonOption,
    client,
    console,
    emit_json,
    err_console,
    fail,
    user_errors,
)

app = typer.Typer(help="Build, evaluate, activate, roll back and clean up snapshots.",
                  no_args_is_help=True)

CollectionArg = Annotated[str, typer.Argument(help="Collection name.")]
SnapshotArg = Annotated[int, typer.Argument(help="Snapshot id (see `pgcite snapshot list`).")]
GoldenOpt = Annotated[Path | None, typer.Option(
    help="golden.jsonl or a BEIR folder (default: the collection's, from `collection set`).")]
ProgressOpt = Annotated[bool, typer.Option(help="Show a progress bar.")]


@app.command()
def build(
    collection: CollectionArg,
    paths: Annotated[list[Path] | None, typer.Argument(
        help="Sources to ingest into the new snapshot. None, with --embedder: re-embed every "
        "document of the active snapshot with that model.")] = None,
    replace: Annotated[bool, typer.Option(
        help="The snapshot holds only these documents (default: the live ones plus these).")]
    = False,
    embedder: Annotated[str | None, typer.Option(
        help="Build with this model instead of the collection's (a new partial HNSW index; "
        "the collection switches model only when the snapshot is activated).")] = None,
    corpus: Annotated[str | None, typer.Option(help="Corpus tier forced on every document.")]
    = None,
    author: Annotated[str | None, typer.Option(help="Author forced on every document.")] = None,
    map_: Annotated[list[str] | None, typer.Option(
        "--map", help="JSONL field mapping FIELD=KEY (as for `pgcite ingest`).")] = None,
    corpus_version: Annotated[str | None, typer.Option(help="Label for the snapshot.")] = None,
    staged: Annotated[bool, typer.Option(
        "--staged", help="No PATH: one snapshot of the active one plus everything "
        "`pgcite ingest --stage-only` stored (per document the version staged last). "
        "An error if nothing is staged.")] = False,
    activate: Annotated[bool, typer.Option(
        "--activate", help="With --staged: make the snapshot live (through the gate when the "
        "collection has a golden set; exits 1 if it refuses).")] = False,
    progress: ProgressOpt = True,
    json_out: bool = JsonOption,
) -> None:
    """Build a new, INACTIVE snapshot (the live one keeps serving).

    Resumable: a killed build re-run embeds nothing twice and makes no duplicate snapshot.
    With --staged it builds what staging workers stored (docs/snapshots.md, "Parallel ingest").
    """
    from pgcite.cli._ingest import print_report

    if staged or activate:
        _build_staged(collection, paths or [], staged, activate, replace, embedder,
                      corpus_version, json_out)
        return
    with user_errors(), client() as c:
        c.collection(collection)  # a clear error for an unknown name, before loading models
        report = _build(c, collection, paths or [], replace, embedder, corpus, author, map_,
                        corpus_version, progress and not json_out)
    if json_out:
        emit_json(report)
    else:
        print_report(report)
        if report.snapshot_id is not None:
            console.print(f"next: pgcite snapshot activate {collection} {report.snapshot_id}")
    if report.failed:
        raise typer.Exit(1)


def _build_staged(collection: str, paths: list[Path], staged: bool, activate: bool,
                  replace: bool, embedder: str | None, corpus_version: str | None,
                  json_out: bool) -> None:
    from pgcite.cli._ingest import print_snapshot_outcome

    if not staged:
        raise fail("--activate goes with --staged (`pgcite ingest` builds and activates)")
    if paths or replace or embedder is not None:
        raise fail("--staged builds what is staged: no PATH, --replace or --embedder")
    with user_errors(), client() as c:
        report = c.collection(collection).build_staged(activate=activate,
                                                       corpus_version=corpus_version)
    if json_out:
        emit_json(report)
    else:
        console.print(
            f"[bold]{report.collection}[/]: {report.staged} staged versions of "
            f"{report.documents} documents ({report.superseded} superseded by a later one, "
            f"{report.unchanged} live already), {report.segments} staged segments, "
            f"{report.seconds:.1f} s", highlight=False)
        print_snapshot_outcome(report.snapshot_id, report.activated, report.gate)
        if report.snapshot_id is not None and report.gate is None and not report.activated:
            console.print(f"next: pgcite snapshot activate {collection} {report.snapshot_id}")
    if (report.gate or "").startswith("refused"):
        raise typer.Exit(1)


def _build(c: Any, collection: str, paths: list[Path], replace: bool, embedder: str | None,
           corpus: str | None, author: str | None, map_: list[str] | None,
           corpus_version: str | None, progress: bool) -> Any:
    from pgcite import FieldMapping, Overrides
    from pgcite.ingest import ingest, reembed

    if not paths:
        if embedder is None:
            raise fail("give PATHs to ingest, or --embedder ID to re-embed the active snapshot")
        return reembed(c.db, collection, embedder, progress=progress, settings=c.settings)
    return ingest(
        c.db, collection, paths, mapping=FieldMapping.parse(map_ or []),
        overrides=Overrides(corpus=corpus, author=author), corpus_version=corpus_version,
        replace=replace, activate=False, progress=progress, settings=c.settings,
        embedder_id=embedder, chat=c.llm(),  # used only by contextual = "llm" collections
    )


@app.command("list")
def list_(collection: CollectionArg, json_out: bool = JsonOption) -> None:
    """List snapshots: which is active, which is the rollback target, their evaluations."""
    from pgcite.store import activations, previous_snapshot

    with user_errors(), client() as c:
        col = c.collection(collection)
        snaps = col.snapshots()
        with c.connection() as conn:
            previous = previous_snapshot(conn, col.info)
            ever = {a.snapshot_id for a in activations(conn, col.info)}
    rows = [_snapshot_row(s, previous, ever) for s in snaps]
    if json_out:
        emit_json(rows)
        return
    table = Table("id", "", "model", "docs", "chunks", "created", "evaluation", "gate")
    for row in rows:
        table.add_row(str(row["snapshot_id"]), row["status"], row["embed_model"].split("@")[0],
                      str(row["n_documents"]), str(row["n_chunks"]), row["created"],
                      row["figures"], row["gate"])
    console.print(table if rows else f"no snapshots yet: pgcite ingest {collection} PATH")


def _snapshot_row(snap: Any, previous: int | None, ever: set[int]) -> dict[str, Any]:
    evaluation = snap.evaluation or {}
    figures = evaluation.get("figures") or {}
    verdict = evaluation.get("verdict")
    status = ("active" if snap.active else "previous" if snap.snapshot_id == previous
              else "retired" if snap.snapshot_id in ever else "never active")
    return {
        **snap.model_dump(mode="json"),
        "status": status,
        "created": snap.created_at.strftime("%Y-%m-%d %H:%M"),
        "figures": ", ".join(f"{k} {figures[k]:.2f}" for k in ("pass_rate", "recall@10")
                             if k in figures) or "-",
        "gate": "-" if not verdict else (
            "passed" if all(c["passed"] for c in verdict["checks"]) else "refused"),
    }


@app.command("eval")
def eval_(
    collection: CollectionArg,
    snapshot: SnapshotArg,
    golden: GoldenOpt = None,
    progress: ProgressOpt = True,
    json_out: bool = JsonOption,
) -> None:
    """Evaluate a snapshot on the golden set and say whether it would pass the gate.

    The result is stored with the snapshot and compared against the active snapshot.
    """
    from pgcite.lifecycle import evaluate_command

    with user_errors(), client() as c:
        summary = evaluate_command(c.collection(collection), snapshot, golden,
                                   progress=progress and not json_out)
    if json_out:
        emit_json(summary)
        return
    figures = ", ".join(f"{k} {v:.3f}" for k, v in summary.figures.items())
    console.print(f"snapshot {snapshot} on {summary.golden} ({summary.queries} queries, "
                  f"{summary.mode}): {figures}; cutoff violations {summary.cutoff_violations}")
    verdict = summary.verdict
    if verdict is not None:
        against = f"active snapshot {verdict.baseline}" if verdict.baseline else "the floors"
        if verdict.passed:
            console.print(f"[green]would pass[/] the gate (against {against})")
        else:
            console.print(f"[red]would be refused[/] (against {against}): "
                          + escape(verdict.failure_text()), highlight=False)


@app.command()
def activate(
    collection: CollectionArg,
    snapshot: SnapshotArg,
    golden: GoldenOpt = None,
    force: Annotated[bool, typer.Option(
        help="Activate even if floors or regression checks fail (logged with what was "
        "skipped). Never skips a cutoff violation.")] = False,
    progress: ProgressOpt = True,
    json_out: bool = JsonOption,
) -> None:
    """Make a snapshot live, in one transaction, if it passes the gate.

    With a golden set configured: floors met, no regression beyond the tolerance, no cutoff
    violation. Without one, activation is immediate.
    """
    from pgcite.lifecycle import activate as do_activate

    with user_errors(), client() as c:
        result = do_activate(c.collection(collection), snapshot, golden_path=golden, force=force,
                             progress=progress and not json_out)
    if json_out:
        emit_json(result)
        return
    if not result.changed:
        console.print(f"snapshot {snapshot} of [bold]{collection}[/] is active already")
        return
    for skipped in result.skipped:
        err_console.print(f"[yellow]forced past:[/] {escape(skipped)}", highlight=False)
    gate = "gate passed" if result.gated and not result.skipped else (
        "FORCED" if result.skipped else "no gate configured")
    console.print(f"snapshot {result.snapshot_id} of [bold]{collection}[/] is active "
                  f"({gate}; previous {result.previous_id}; {result.embedder})")


@app.command()
def rollback(collection: CollectionArg, json_out: bool = JsonOption) -> None:
    """Go back to the previously active snapshot (no gate: it passed when it was live).

    Rolling back twice returns to where you started.
    """
    from pgcite.lifecycle import rollback as do_rollback

    with user_errors(), client() as c:
        result = do_rollback(c.collection(collection))
    if json_out:
        emit_json(result)
        return
    console.print(f"rolled back [bold]{collection}[/] to snapshot {result.snapshot_id} "
                  f"(from {result.previous_id}; {result.embedder})")


@app.command()
def gc(
    collection: CollectionArg,
    older_than: Annotated[str, typer.Option(
        help="Remove never-activated snapshots older than this: 7d, 12h, 30m, 0.")] = "7d",
    keep: Annotated[int, typer.Option(
        help="Retired (once active) snapshots to keep, besides the active one and the "
        "rollback target.")] = 3,
    dry_run: Annotated[bool, typer.Option(help="Only say what would be removed.")] = False,
    json_out: bool = JsonOption,
) -> None:
    """Remove snapshots nobody can reach, then versions and chunks no snapshot references."""
    from pgcite.lifecycle import gc as do_gc

    with user_errors(), client() as c:
        report = do_gc(c.collection(collection), older_than=parse_duration(older_than),
                       keep_retired=keep, dry_run=dry_run)
    if json_out:
        emit_json(report)
        return
    verb = "would remove" if dry_run else "removed"
    console.print(f"{collection}: {verb} snapshots {report.snapshots_removed or 'none'}, "
                  f"{report.versions_removed} versions, {report.chunks_removed} chunks"
                  + (f", indexes {', '.join(report.indexes_dropped)}"
                     if report.indexes_dropped else ""))


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([dhms]?)\s*$")


def parse_duration(text: str) -> dt.timedelta:
    from pgcite import ConfigError

    match = _DURATION.match(text)
    if not match:
        raise ConfigError(f"bad duration {text!r}", hint="e.g. 7d, 12h, 30m, 45s or 0")
    value, unit = float(match.group(1)), match.group(2) or "s"
    return dt.timedelta(**{{"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}[unit]:
                           value})
