"""`pgcite ingest`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from pgcite.cli._common import (
    JsonOption,
    console,
    emit_json,
    err_console,
    plural,
    settings,
    user_errors,
)

if TYPE_CHECKING:
    from pgcite import IngestReport


def print_report(report: IngestReport) -> None:
    console.print(
        f"[bold]{report.collection}[/]: {report.documents} documents "
        f"({report.new_versions} new or changed, {report.unchanged} unchanged), "
        f"{report.chunks_added} chunks added, {report.embedded} embedded, {report.cached} from "
        f"cache, {report.skipped} skipped, {len(report.failed)} failed, {report.seconds:.1f} s"
        + (f" ({report.chunks_added / report.seconds:.1f} chunks/s)"
           if report.chunks_added and report.seconds else "")
    )
    for change in report.changes:
        source = f" ({change.source})" if change.source else ""
        console.print(f"changed: {escape(change.document_id)}: {change.field} "
                      f"{_shown(change.old)} -> {_shown(change.new)}{escape(source)}",
                      highlight=False, soft_wrap=True)
    if report.undated:
        # "passages": with --entries a journal's title page stays undated, and "1 of 1
        # documents undated" read as if its dated entries were not
        console.print(f"{report.undated} of {report.documents} documents have undated "
                      "passages: a --cutoff search leaves those out (see --date, --catalogue, "
                      "--dates-from-names, and --entries for a journal in one file)",
                      highlight=False)
    if report.unattributed:
        console.print(f"{report.unattributed} of {report.documents} documents have no author: "
                      "answers name no writer, and a question naming the writer reads the name "
                      "as evidence (see --author, --catalogue)", highlight=False)
    if report.ocr_pages or report.low_confidence:
        console.print(f"{plural(report.ocr_pages, 'page')} read by OCR, "
                      f"{len(report.low_confidence)} flagged (ingested, but check them):",
                      highlight=False)
    for low in report.low_confidence:
        # One line per page, like failures: greppable.
        err_console.print(f"[yellow]low OCR confidence:[/] {escape(low.path)} p. {low.page}: "
                          f"{escape(low.reason)}", highlight=False, soft_wrap=True)
    for warning in report.warnings:
        err_console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False,
                          soft_wrap=True)
    if report.entity_model is not None:
        console.print(f"{report.entities} entity mentions ({report.entity_model})"
                      + (f", {report.entities_cached} chunks' from cache"
                         if report.entities_cached else "")
                      + (f", {report.aliases} aliases" if report.aliases else ""),
                      highlight=False)
    if report.staged:
        console.print(f"{report.staged} versions staged, no snapshot built: pgcite snapshot "
                      f"build {report.collection} --staged", highlight=False)
    else:
        print_snapshot_outcome(report.snapshot_id, report.activated, report.gate)
    for failure in report.failed:
        # One line per file whatever the terminal's width: greppable, and a file per line.
        err_console.print(f"[red]failed:[/] {escape(failure.path)}: {escape(failure.reason)}",
                          highlight=False, soft_wrap=True)


def _shown(value: str | None) -> str:
    return "(none)" if value is None else escape(repr(value) if " " in value else value)


def print_snapshot_outcome(snapshot_id: int | None, activated: bool, gate: str | None) -> None:
    """The snapshot a build made (or that it made none) and the gate's word on it."""
    if snapshot_id is None:
        console.print("nothing changed: no new snapshot")
        return
    console.print(f"snapshot {snapshot_id} ({'active' if activated else 'built, not active'})")
    if gate is not None:
        console.print(f"gate {escape(gate)}", highlight=False)


def ingest_command(
    collection: Annotated[str, typer.Argument(help="Collection to ingest into.")],
    paths: Annotated[list[Path], typer.Argument(
        help="Files or folders: .jsonl, .txt, .md, .html, .pdf, and scans read by OCR: .png, "
        ".jpg, .tif (folders recursively).")],
    corpus: Annotated[str | None, typer.Option(
        help="Corpus tier label forced on every document (e.g. A, B, C; \"\" clears it).")] = None,
    author: Annotated[str | None, typer.Option(
        help="Author forced on every document (\"\" clears it).")] = None,
    date: Annotated[str | None, typer.Option(
        help="Date of a single FILE: 1666-09-02, 1666-09, 1666 or a range 1666-09-02/1666-09-05 "
        "(wins over every other date source).")] = None,
    catalogue: Annotated[Path | None, typer.Option(
        help="Sidecar catalogue (.csv or .jsonl): one row per file with 'file' (path relative "
        "to the folder, or its name) and date, date_end, author, corpus, title, any other "
        "columns as metadata. Wins over what the files say.")] = None,
    dates_from_names: Annotated[bool, typer.Option(
        help="Date files whose names start with a date (1666-09-02-letter.md, 1666-09 …) when "
        "no other source dates them.")] = False,
    dates_from_timestamps: Annotated[bool, typer.Option(
        help="Date files by when they were made (a PDF's creation date, else the file's "
        "modification day) when no other source dates them. Off by default: a scan or a "
        "copy is made long after its text was written.")] = False,
    entries: Annotated[bool, typer.Option(
        help="Read a .txt or .md journal as its entries: a line that is a date (\"March 22, "
        "1852\", \"4th (Lord's day).\", \"## 1852-03-22\", \"March 22.—Walked …\") starts an "
        "entry dated by it, a year or month left out carried from the entry before.")] = False,
    map_: Annotated[list[str] | None, typer.Option(
        "--map", help="JSONL field mapping FIELD=KEY, e.g. --map title=date_label "
        "(fields: id, text, title, date, date_end, author, corpus, source, locator).")] = None,
    corpus_version: Annotated[str | None, typer.Option(
        help="Label recorded on the chunks and the snapshot, e.g. 2024-06 edition.")] = None,
    replace: Annotated[bool, typer.Option(
        help="The new snapshot holds only these documents (default: add to / update the "
        "live ones).")] = False,
    activate: Annotated[bool, typer.Option(help="Make the new snapshot live.")] = True,
    stage_only: Annotated[bool, typer.Option(
        "--stage-only", help="Store the documents (committed batch by batch, invisible to "
        "search) without building a snapshot; many processes may stage at once. Then ONE "
        "`pgcite snapshot build COLLECTION --staged` makes a snapshot of all of it.")] = False,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    aliases: Annotated[Path | None, typer.Option(
        help="Entity alias list (.yaml: canonical name -> [other spellings]; .csv: rows "
        "canonical,alias,...), kept by the collection: its names count as one entity.")] = None,
    json_out: bool = JsonOption,
) -> None:
    """Load, chunk, embed and store documents as a new snapshot of the collection.

    Dates, highest precedence first: --date > --catalogue row > the file itself (front matter
    in .md/.txt, <meta>/<time> in HTML, a PDF's XMP date, JSONL keys; with --entries each
    entry's date line) > --dates-from-names > --dates-from-timestamps. The report counts undated documents (a --cutoff search leaves them
    out). A bad file is reported by name (one line each) and the others are ingested.

    Images and PDF pages without a text layer are read by OCR (Tesseract, in the collection's
    language: the `ocr` extra), one passage per page region, cited as "p. N" with the region's
    boxes and confidence in the metadata; pages read with low confidence are ingested and
    listed in the report. A scan over PGCITE_OCR_MAX_PAGES, _MAX_PAGE_PIXELS or _MAX_SECONDS
    fails alone (docs/ingest.md, "OCR").

    Idempotent: unchanged documents are neither re-chunked nor re-embedded, and if nothing
    changed no snapshot is made. What you gave a document (a flag, a catalogue row, a --map
    key) stays until you give another: re-ingesting without them changes nothing, and what a
    file says never replaces it. The report lists each date, title, author or corpus that
    changed, old -> new. All-or-nothing:
    an interrupted run leaves the collection as it was, and re-running resumes from the
    embedding cache. Exits 1 if any file failed. With a golden set configured (`pgcite
    collection set --golden`) the snapshot goes live only if it passes the activation gate;
    exits 1 if the gate refused it (it stays built, inactive).

    Parallel ingest: run `pgcite ingest COLLECTION PATH... --stage-only` in as many processes
    (or machines) as you like, then `pgcite snapshot build COLLECTION --staged --activate`
    once (docs/snapshots.md, "Parallel ingest"). A killed stager loses only the batch in
    flight; re-running it stores nothing twice.
    """
    from pgcite import Client, FieldMapping, Overrides

    with user_errors():
        mapping = FieldMapping.parse(map_ or [])
        with Client(settings()) as client:
            report = client.collection(collection).ingest(
                paths, mapping=mapping,
                overrides=Overrides(corpus=corpus, author=author, date=date),
                catalogue=catalogue, dates_from_names=dates_from_names,
                dates_from_timestamps=dates_from_timestamps, entries=entries,
                corpus_version=corpus_version, replace=replace, activate=activate,
                progress=progress and not json_out, aliases=aliases, stage=stage_only,
            )
    if json_out:
        emit_json(report)
    else:
        print_report(report)
    if report.failed or (report.gate or "").startswith("refused"):
        raise typer.Exit(1)
