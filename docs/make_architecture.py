"""Draw the import picture in docs/architecture.md from the real import graph (grimp, the graph
import-linter checks), in the order of the layers contract in pyproject.toml.

    python docs/make_architecture.py          # rewrite the block between the markers
    python docs/make_architecture.py --check  # exit 1 if the block is out of date
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
START, END = "<!-- import-graph:start -->", "<!-- import-graph:end -->"


def layers() -> list[list[str]]:
    """The contract's layers, top first, each a list of sibling modules."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = config["tool"]["importlinter"]["contracts"][0]
    return [[m.split("#")[0].strip() for m in layer.split("|")] for layer in contract["layers"]]


def picture() -> str:
    graph = grimp.build_graph("pgcite")
    order = layers()
    lines = ["```", "layer (top imports down)   module       imports directly"]
    for depth, siblings in enumerate(order):
        for name in siblings:
            full = f"pgcite.{name}"
            below = []
            for lower in (m for layer in order[depth + 1:] for m in layer):
                if graph.direct_import_exists(importer=full, imported=f"pgcite.{lower}",
                                              as_packages=True):
                    below.append(lower)
            upward = [m for layer in order[:depth + 1] for m in layer if m != name
                      and graph.direct_import_exists(importer=full, imported=f"pgcite.{m}",
                                                     as_packages=True)]
            if any(graph.direct_import_exists(importer=m, imported="pgcite")
                   for m in {full, *graph.find_descendants(full)}):
                below.insert(0, "pgcite (the API)")  # the front doors' way in
            line = f"{depth + 1:>2}  {name:<14} -> {', '.join(below) or '(nothing)'}"
            if upward:  # what lint-imports reports as broken
                line += f"   !! UPWARD: {', '.join(upward)}"
            lines.append(line)
    lines.append("```")
    return "\n".join(lines)


def main() -> int:
    text = DOC.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n{picture()}\n{END}{tail}"
    if "--check" in sys.argv:
        if new != text:
            print("docs/architecture.md: the import picture is out of date; "
                  "run python docs/make_architecture.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    print(f"updated {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
