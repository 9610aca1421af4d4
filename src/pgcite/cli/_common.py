"""What every command shares: settings from global options, output as text or --json, and
turning PgciteError into a one-line message and a non-zero exit."""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from pgcite import PgciteError
from pgcite._modes import MODES

if TYPE_CHECKING:  # imported when a command runs: `pgcite --help` does without them
    from pgcite.config import Settings

# soft_wrap: a line is never broken at the terminal width (a long path would split an error a
# script greps for); the terminal folds it for the eye. Tables still fit the width.
console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)

JsonOption = typer.Option(False, "--json", help="Print machine-readable JSON on stdout.")

# Retrieval options shared by `search` and `ask`.
ModeOpt = Annotated[str, typer.Option(help=" | ".join(MODES))]
CutoffOpt = Annotated[dt.datetime | None, typer.Option(
    formats=["%Y-%m-%d"], help="Only passages dated on or before this day (YYYY-MM-DD).")]
CorpusOpt = Annotated[list[str] | None, typer.Option(help="Only these corpus tiers (repeatable).")]
EntityOpt = Annotated[list[str] | None, typer.Option(
    "--entity", help="Only passages that mention this entity, in any spelling the "
    "collection's aliases know, e.g. \"Sir W. Penn\" (repeatable: all of them).")]
SnapshotOpt = Annotated[int | None, typer.Option(
    "--snapshot", min=1, help="Use this snapshot instead of the active one, e.g. a built, "
    "inactive one before activating it (see `pgcite snapshot list`).")]

_state: dict[str, Any] = {}
F = TypeVar("F", bound=Callable[..., Any])


def set_global(data_dir: Path | None, database_url: str | None) -> None:
    _state["data_dir"] = data_dir
    _state["database_url"] = database_url


def settings() -> Settings:
    from pydantic import ValidationError

    from pgcite.config import Settings

    overrides: dict[str, Any] = {}
    if _state.get("data_dir") is not None:
        overrides["data_dir"] = _state["data_dir"]
    if _state.get("database_url") is not None:
        overrides["database_url"] = _state["database_url"]
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        # A bad PGCITE_* variable is the user's input: name it, no traceback.
        raise fail("; ".join(_setting_problem(e, overrides) for e in exc.errors()),
                   hint="fix or unset it (docs/configuration.md lists every setting)",
                   code=2) from None


def _setting_problem(error: Any, overrides: dict[str, Any]) -> str:
    field = str(error["loc"][0]) if error.get("loc") else "?"
    where = f"--{field.replace('_', '-')}" if field in overrides else f"PGCITE_{field.upper()}"
    return f"{where}={error.get('input')!r}: {error.get('msg', 'invalid')}"


def client() -> Any:
    from pgcite import Client

    return Client(settings())


def emit_json(payload: Any) -> None:
    from pydantic import BaseModel

    if isinstance(payload, BaseModel):
        text = payload.model_dump_json(indent=2)
    else:
        text = json.dumps(payload, indent=2, default=str, ensure_ascii=False)
    sys.stdout.write(text + "\n")


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 page``, ``3 pages`` (``many``: an irregular plural)."""
    return f"{count} {noun if count == 1 else (many or noun + 's')}"


def fail(message: str, hint: str | None = None, code: int = 1) -> typer.Exit:
    # escaped: text in brackets is not markup ('pgcite[mcp]' was printed as 'pgcite')
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    if hint:
        err_console.print(f"[dim]hint:[/] {escape(hint)}", highlight=False)
    return typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn pgcite's own errors into a clear message and exit code (no traceback); so too a
    value one of its models refused and an error the database raised (a one-line message, as
    every surface gives: pgcite/_inputs.py)."""
    try:
        yield
    except PgciteError as exc:
        raise fail(exc.message, exc.hint, exc.exit_code) from None
    except KeyboardInterrupt:
        raise fail("interrupted; nothing half-written is visible (re-run to resume)",
                   code=130) from None
    except Exception as exc:
        # imported here, when something failed: `pgcite --help` does without pydantic
        from pydantic import ValidationError

        from pgcite._inputs import excerpt, first_problem

        if isinstance(exc, ValidationError):
            raise fail(f"invalid input: {first_problem(exc)}", code=2) from None
        if type(exc).__module__.partition(".")[0] not in ("psycopg", "psycopg_pool"):
            raise  # a bug: its traceback is what a report needs
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise fail(f"database error: {excerpt(first, 300)}",
                   hint="nothing half-written is visible; re-run once the cause is fixed",
                   code=1) from None


def cli_filters(col: Any, corpus: list[str] | None, cutoff: dt.datetime | None,
                filter_args: list[str] | None, snapshot_id: int | None = None,
                entity: list[str] | None = None) -> Any:
    """The Filters of `search`/`ask` flags: --corpus, --cutoff and --filter (typed by the
    metadata fields of the snapshot searched)."""
    from pgcite.retrieve import filters_from_args

    return filters_from_args(
        filter_args or [], lambda: col.snapshot(snapshot_id).metadata_fields or {},
        corpora=corpus or None, cutoff=cutoff.date() if cutoff else None, entity=entity or None)
