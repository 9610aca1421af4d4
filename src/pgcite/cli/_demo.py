"""`pgcite demo`: the main job on the embedded default — a collection over Samuel Pepys's diary,
ingested and searched with citations (a date cutoff among the questions)."""

from __future__ import annotations

import datetime as dt
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer

from pgcite.cli._common import JsonOption, console, emit_json, settings, user_errors
from pgcite.cli._ingest import print_report
from pgcite.cli._search import print_hits

FULL_DIARY = Path("../shared/data/pepys-diary/entries.jsonl")

# (question, cutoff): a fact, an exact old spelling, a paraphrase, and a cutoff question.
SAMPLE_QUESTIONS: list[tuple[str, dt.date | None]] = [
    ("What did Pepys see of the Great Fire of London?", None),
    ('Where did Pepys bury his "Parmazan" cheese?', None),
    ("How did Pepys feel about his own money and savings?", None),
    ("Who was blamed for starting the fire?", dt.date(1666, 10, 31)),
]


def sample_path() -> Path:
    return Path(str(resources.files("pgcite") / "data" / "pepys-1666-autumn.jsonl"))


def demo_command(
    full: Annotated[bool, typer.Option(
        help=f"Ingest the whole diary (3,415 entries, ~10 min on 2 cores) from {FULL_DIARY}.")]
    = False,
    source: Annotated[Path | None, typer.Option(help="Another diary-style JSONL to ingest.")]
    = None,
    collection: Annotated[str, typer.Option(help="Collection name to use.")] = "pepys",
    json_out: bool = JsonOption,
) -> None:
    """Create a collection, ingest Pepys's diary (Sept-Dec 1666, shipped in the package) and answer sample questions with cited passages.

    Safe to re-run: nothing is re-embedded.
    """
    from pgcite._client import Client
    from pgcite._errors import CollectionNotFound
    from pgcite.ingest._loaders import Overrides

    path = source or (FULL_DIARY if full else sample_path())
    out: dict[str, object] = {}
    with user_errors(), Client(settings()) as client:
        try:
            col = client.collection(collection)
        except CollectionNotFound:
            col = client.create_collection(collection, language="english")
        if not json_out:
            console.print(f"ingesting [bold]{path}[/] into collection [bold]{collection}[/] …")
        report = col.ingest([path], overrides=Overrides(author="Samuel Pepys", corpus="A"),
                            progress=not json_out)
        out["ingest"] = report.model_dump(mode="json")
        if not json_out:
            print_report(report)
        results = []
        for question, cutoff in SAMPLE_QUESTIONS:
            result = col.search(question, top_k=3, filters={"cutoff": cutoff})
            results.append(result.model_dump(mode="json"))
            if not json_out:
                note = f"  (only entries up to {cutoff})" if cutoff else ""
                console.rule(f"[bold]{question}[/]{note}")
                print_hits(result, explain=False)
        out["searches"] = results
        from pgcite.cli._ask import print_answer

        answers = []  # grounded answers: extractive (no model server), every citation checked
        for question, cutoff in SAMPLE_QUESTIONS:
            answer = col.answer(question, cutoff=cutoff)
            answers.append(answer.model_dump(mode="json"))
            if not json_out:
                note = f"  (only entries up to {cutoff})" if cutoff else ""
                console.rule(f"[bold]answer: {question}[/]{note}")
                print_answer(answer, trace=False)
        out["answers"] = answers
    if json_out:
        emit_json(out)
    if report.failed:
        raise typer.Exit(1)
