"""Progress bars for long work (rich), silent when not wanted or not on a terminal."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

stderr = Console(stderr=True)


@contextmanager
def progress_bar(enabled: bool = True) -> Iterator[Progress]:
    """A rich Progress on stderr (so ``--json`` output on stdout stays clean)."""
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=stderr,
        disable=not enabled,
        transient=False,
    )
    with progress:
        yield progress
