"""Contextual chunks: the same corpus embedded with and without a context header before each
chunk (``contextual="header"``: title, locator, dates, author), side by side in one evaluation per
dataset. Both sides are built here once, each with its setting stated: the header ones
(``scifact_ctx``, ``pepys_ctx``, which bench/stages.py also reads) and the off ones
(``scifact_off``, ``pepys_off``). The off side was once bench/scifact.py's and bench/pepys.py's
own collections; since new collections default to the header those are header collections too,
and the comparison read the header against itself.

    python bench/contextual.py    # writes bench/results/contextual/{scifact,pepys}/ and summary.*
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from _common import DATA, RESULTS, client, write

import pgcite
from pgcite._types import Contextual
from pgcite.evaluate import EvalResult, GoldenSet, Searcher, evaluate, load_golden
from pgcite.evaluate._collection import collection_searcher, embed_queries, run_metadata
from pgcite.store._collections import CollectionSettings

DEPTH = 100
# Vector and hybrid are what the header can change; keyword is there to show that it does not
# (its index is title + body either way; only Pepys' chunk cuts move a little).
MODES: dict[str, dict[str, Any]] = {
    "keyword": {"mode": "keyword", "stages": {"route": False}},
    "vector": {"mode": "vector", "stages": {"route": False}},
    "hybrid (convex)": {"mode": "hybrid", "fusion": "convex", "stages": {"route": False}},
}


def contextual_collection(
    c: pgcite.Client, name: str, paths: list[Path], *, overrides: pgcite.Overrides | None = None,
    contextual: Contextual = "header",
) -> tuple[pgcite.Collection, dict[str, Any]]:
    """``name`` with this ``contextual`` setting (MiniLM), created and ingested if needed; the
    ingest's cost."""
    try:
        col = c.collection(name)
    except pgcite.CollectionNotFound:
        col = c.create_collection(name, settings=CollectionSettings(contextual=contextual))
    if col.info.settings.contextual != contextual:
        raise SystemExit(f"{name} exists with contextual={col.info.settings.contextual!r}")
    started = time.monotonic()
    report = col.ingest(paths, overrides=overrides, progress=sys.stderr.isatty())
    if report.failed:
        raise SystemExit(f"ingest of {name} failed: {report.failed}")
    cost = {"seconds": round(time.monotonic() - started, 1), "embedded": report.embedded,
            "cached": report.cached, "chunks_added": report.chunks_added,
            "new_versions": report.new_versions, "situated": report.situated,
            "situate_fallbacks": report.situate_fallbacks}
    print(f"{name}: {report.documents} documents, {cost}", file=sys.stderr)
    return col, cost


def side_by_side(golden: GoldenSet, off: pgcite.Collection, header: pgcite.Collection,
                 extra: dict[str, Any]) -> EvalResult:
    """One evaluation, every mode on both collections, the same query vectors for all."""
    vectors, _ = embed_queries(off.view(), golden)
    configs: dict[str, Searcher] = {}
    for name, opts in MODES.items():
        for label, col in (("off", off), ("header", header)):
            configs[f"{name} · {label}"] = collection_searcher(col.view(), depth=DEPTH, vectors=vectors,
                                                               **opts)
    return evaluate(golden, configs, k=10, progress=sys.stderr.isatty(),
                    metadata=run_metadata(off.view(), {**extra, "depth": DEPTH,
                                                "header_collection": run_metadata(header.view())}))


def ndcg(result: EvalResult) -> dict[str, dict[str, float | None]]:
    """nDCG@10 per configuration: overall and per query kind."""
    data = json.loads(result.model_dump_json())
    table: dict[str, dict[str, float | None]] = {}
    for name, conf in data["configurations"].items():
        row = {"all": conf["overall"].get("ndcg@10")}
        row.update({kind: figures.get("ndcg@10") for kind, figures in conf["by_kind"].items()
                    if "ndcg@10" in figures})
        table[name] = row
    return table


def summary_markdown(summary: dict[str, Any]) -> str:
    lines = ["# Contextual chunks: nDCG@10, header off vs on", ""]
    for dataset, part in summary["datasets"].items():
        kinds = list(next(iter(part["ndcg@10"].values())))
        lines += [f"## {dataset}", "", "| configuration | " + " | ".join(kinds) + " |",
                  "|---|" + "---:|" * len(kinds)]
        for name, row in part["ndcg@10"].items():
            cells = [f"{row[k]:.3f}" if row.get(k) is not None else "–" for k in kinds]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines += ["", f"Header collection ingest: {part['ingest']}", ""]
    return "\n".join(lines)


def main() -> None:
    scifact_root, pepys_root = DATA / "scifact", DATA / "pepys-diary"
    pepys_overrides = pgcite.Overrides(author="Samuel Pepys", corpus="A")
    summary: dict[str, Any] = {"datasets": {}}
    with client() as c:
        corpus = [scifact_root / "corpus.jsonl"]
        off, _ = contextual_collection(c, "scifact_off", corpus, contextual="off")
        header, cost = contextual_collection(c, "scifact_ctx", corpus)
        golden = load_golden(scifact_root, split="train")
        result = side_by_side(golden, off, header, {"benchmark": "contextual-scifact-train",
                                                    "header_ingest": cost})
        write(result, "contextual/scifact")
        summary["datasets"]["scifact (train)"] = {"ndcg@10": ndcg(result), "ingest": cost}

        entries = [pepys_root / "entries.jsonl"]
        off, _ = contextual_collection(c, "pepys_off", entries, overrides=pepys_overrides,
                                       contextual="off")
        header, cost = contextual_collection(c, "pepys_ctx", entries, overrides=pepys_overrides)
        golden = load_golden(pepys_root / "golden.jsonl")
        result = side_by_side(golden, off, header, {"benchmark": "contextual-pepys-golden",
                                                    "header_ingest": cost})
        write(result, "contextual/pepys")
        summary["datasets"]["pepys (golden)"] = {"ndcg@10": ndcg(result), "ingest": cost}
    out = RESULTS / "contextual"
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(summary_markdown(summary))
    print(summary_markdown(summary))


if __name__ == "__main__":
    main()
