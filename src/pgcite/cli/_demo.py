"""`pgcite demo`: the main job on the embedded default — a collection over Samuel Pepys's diary,
ingested and searched with citations (a date cutoff among the questions)."""

from __future__ import annotations

import datetime as dt
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from pgcite.cli._common import JsonOption, console, emit_json, fail, settings, user_errors
from pgcite.cli._ingest import print_report
from pgcite.cli._search import print_hits

# The whole diary: --data, else $PGCITE_DEMO_DATA, else shared/data/pepys-diary beside (or
# above) the current folder or the repository this package was installed from.
DIARY_DIR = Path("shared/data/pepys-diary")
DEMO_DATA_ENV = "PGCITE_DEMO_DATA"

# (question, cutoff): a fact, an exact old spelling, a paraphrase, and a cutoff question.
SAMPLE_QUESTIONS: list[tuple[str, dt.date | None]] = [
    ("What did Pepys see of the Great Fire of London?", None),
    ('Where did Pepys bury his "Parmazan" cheese?', None),
    ("How did Pepys feel about his own money and savings?", None),
    ("Who was blamed for starting the fire?", dt.date(1666, 10, 31)),
]


# The diary's dates are the edition's: Gregorian equivalents of Pepys's Old-Style (Julian) dates,
# 10 days on (shared/data/pepys-diary/SOURCE.txt). A historian reads "1666-09-12" as the wrong
# day for the Fire unless told, so the demo says so, and shows his own day labels beside them.
CALENDAR = ("Dates are New Style (Gregorian), as the edition gives them. Pepys wrote in the Old "
            "Style (Julian) calendar, then 10 days behind: the Fire he dated 2 September 1666 is "
            "1666-09-12 here, and a --cutoff is a New Style day. His own day labels are kept with "
            "each entry (metadata date_label and section) and shown in brackets: [O.S. ...].")


def pepys_day(hit: Any) -> str | None:
    """Pepys's own label of an entry's day, from its metadata: ``O.S. 2nd (Lord’s day),
    September 1666`` (None where the data has none)."""
    label, month = hit.metadata.get("date_label"), hit.metadata.get("section")
    parts = [str(p) for p in (label, month) if p]
    return "O.S. " + ", ".join(parts) if parts else None


def sample_path() -> Path:
    return Path(str(resources.files("pgcite") / "data" / "pepys-1666-autumn.jsonl"))


def _entries(path: Path) -> Path:
    return path / "entries.jsonl" if path.is_dir() else path


def full_diary(data: Path | None) -> Path:
    """Where the whole diary is, or a one-line error naming where it was looked for."""
    if data is not None:  # --data or $PGCITE_DEMO_DATA
        if _entries(data).is_file():
            return _entries(data)
        raise fail(f"no diary at {data} (expected entries.jsonl, or a folder holding it)",
                   hint="nothing was created")
    repo = Path(__file__).resolve().parents[3]  # src/pgcite/cli/_demo.py -> the checkout
    bases = dict.fromkeys(b for root in (Path.cwd(), repo) for b in (root, root.parent))
    candidates = [base / DIARY_DIR / "entries.jsonl" for base in bases]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise fail("the full diary was not found (looked for " + ", ".join(
        str(c) for c in candidates) + ")",
        hint=f"give --data PATH/TO/pepys-diary (or set {DEMO_DATA_ENV}); nothing was created")


def next_steps(collection: str) -> list[str]:
    """Three commands to try after the demo."""
    return [
        f'pgcite search {collection} "the plague" --cutoff 1666-10-31 --explain',
        f'pgcite ask {collection} "What did Pepys do with his wine during the fire?"',
        f"pgcite documents list {collection} --limit 10",
    ]


def _where(config: Any) -> str:
    if config.database_url is not None:
        return "the PostgreSQL server named by --database-url / PGCITE_DATABASE_URL"
    return f"{config.data_dir} (embedded PostgreSQL; --data-dir / PGCITE_DATA_DIR to change)"


def demo_command(
    full: Annotated[bool, typer.Option(
        help="Ingest the whole diary (3,415 entries, ~10 min on 2 cores) from --data.")]
    = False,
    data: Annotated[Path | None, typer.Option(
        envvar=DEMO_DATA_ENV, help="The whole diary for --full: its entries.jsonl or the "
        "pepys-diary folder (default: shared/data/pepys-diary found from the current folder "
        "or the repository).")] = None,
    source: Annotated[Path | None, typer.Option(help="Another diary-style JSONL to ingest.")]
    = None,
    collection: Annotated[str, typer.Option(help="Collection name to use.")] = "pepys",
    json_out: bool = JsonOption,
) -> None:
    """Create a collection, ingest Pepys's diary (Sept-Dec 1666, shipped in the package) and answer sample questions with cited passages.

    Safe to re-run: nothing is re-embedded.
    """
    from pgcite import Client, CollectionNotFound, Overrides

    # the data is found before anything is created: a missing file changes nothing
    path = source or (full_diary(data) if full else sample_path())
    if not path.is_file():
        raise fail(f"no such file: {path}", hint="nothing was created")
    config = settings()
    out: dict[str, object] = {}
    with user_errors(), Client(config) as client:
        try:
            col = client.collection(collection)
        except CollectionNotFound:
            col = client.create_collection(collection, language="english")
        if not json_out:
            console.print(f"ingesting [bold]{escape(str(path))}[/] into collection "
                          f"[bold]{collection}[/] …")
        report = col.ingest([path], overrides=Overrides(author="Samuel Pepys", corpus="A"),
                            progress=not json_out)
        out["ingest"] = report.model_dump(mode="json")
        if not json_out:
            print_report(report)
        if not json_out:
            console.print(f"[dim]{escape(CALENDAR)}[/]", highlight=False)
        results = []
        for question, cutoff in SAMPLE_QUESTIONS:
            result = col.search(question, top_k=3, filters={"cutoff": cutoff})
            results.append(result.model_dump(mode="json"))
            if not json_out:
                note = f"  (only entries up to {cutoff})" if cutoff else ""
                console.rule(f"[bold]{question}[/]{note}")
                print_hits(result, explain=False, day_label=pepys_day)
        out["searches"] = results
        from pgcite.cli._ask import print_answer

        answers = []  # grounded answers: extractive (no model server), every citation checked
        for question, cutoff in SAMPLE_QUESTIONS:
            answer = col.answer(question, filters={"cutoff": cutoff})
            answers.append(answer.model_dump(mode="json"))
            if not json_out:
                note = f"  (only entries up to {cutoff})" if cutoff else ""
                console.rule(f"[bold]answer: {question}[/]{note}")
                print_answer(answer, trace=False)
        out["answers"] = answers
    out["calendar"] = CALENDAR
    out["stored_in"] = _where(config)
    out["next"] = next_steps(collection)
    if json_out:
        emit_json(out)
    else:
        console.rule("[bold]next[/]")
        console.print(f"collection [bold]{collection}[/] is stored in {out['stored_in']}",
                      highlight=False)
        console.print("try:", highlight=False)
        for command in next_steps(collection):
            console.print(f"  {command}", highlight=False, soft_wrap=True)
    if report.failed:
        raise typer.Exit(1)
