"""`pgcite ask --stream`: text as it is generated, then the checked answer's citations.

What streamed is provisional: the guard checks the whole text at the end. When it changed
anything (a dropped citation, an abstention, a fallback) the command says so and prints the
checked text, so nothing the guard removed is left as the answer on screen.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from rich.markup import escape

from pgcite import Answer, Delta, Final, StreamEvent
from pgcite.cli._common import console


def print_stream(events: Iterable[StreamEvent], *, trace: bool, json_lines: bool) -> Answer:
    """Show ``events`` as they come; returns the checked answer."""
    from pgcite.cli._ask import print_answer

    final: Final | None = None
    for event in events:
        if json_lines:  # one JSON object per line and event (NDJSON)
            sys.stdout.write(event.model_dump_json() + "\n")
            sys.stdout.flush()
        elif isinstance(event, Delta):
            console.print(escape(event.text), end="", highlight=False, soft_wrap=True)
        if isinstance(event, Final):
            final = event
    assert final is not None, "a stream always ends with its final event"
    if json_lines:
        return final.answer
    if final.streamed_text:
        console.print()
    if final.removed_citations:
        console.print("[bold red]the citation check removed "
                      + ", ".join(f"\\[{escape(i)}]" for i in final.removed_citations)
                      + " (not among the passages given)[/]", highlight=False)
    show_text = final.replaced or not final.streamed_text
    if final.replaced:
        console.print("[yellow]checked answer (replaces the text above):[/]")
    print_answer(final.answer, trace=trace, text=show_text)
    return final.answer
