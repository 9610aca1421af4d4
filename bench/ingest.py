"""Ingest at the hardware's pace (issue 38): chunks/s of a fresh SciFact collection as its ingest
report gives them, where the time went per stage, and what a re-ingest of the same files costs.

    python bench/ingest.py                      # all 5,183 abstracts; bench/results/ingest/
    python bench/ingest.py --docs 1000 --variants default store-after entities \\
        --rounds 2 --out ingest/variants        # the flow's variants side by side, smaller
    python bench/ingest.py --entries-check      # how --entries reads the diary as printed

Each variant ingests the corpus (one JSONL file in a folder, as a user would) into a fresh
collection (its embedding and entity caches start empty), one variant after the other, round by
round (the machine may be shared: compare within a run). Variants:

- ``default``: the default install: int8 MiniLM, no entity pipeline (the ``entities`` extra
  absent; here the collection's ``entities = off``, the same code path);
- ``entities``: int8 MiniLM and spaCy's NER (the extra installed);
- ``fp32``: ONNX fp32 MiniLM (``PGCITE_EMBED_BACKEND=onnx``), no entities;
- ``store-after``: ``default`` with each group stored only after every chunk is embedded, as
  before the overlapped flow (ingest/_flow.py): the server stores on one core, the other idle;
- ``no-hnsw``: ``default`` into a collection whose HNSW index was dropped (no product runs so):
  the difference in the store stage's server CPU is what inserting into the index costs.

Per run: the report's chunks/s; the seconds after the last group's embedding ended (serial
work with a core idle: the stores still queued, the snapshot, the commit, the statistics); per stage (load, chunk, embed, entities, store, snapshot,
commit, statistics) the wall seconds, this process's CPU seconds and the embedded server's
(``IngestReport.stages``), and within the snapshot stage the new BM25 segment's (timed here
around index._writer.new_segment); how busy the cores were (CPU seconds of both processes over wall
seconds); chunks per CPU second, which a busy machine distorts less than chunks/s. The first
round's collections are then ingested again: from the same folder renamed (document ids and
sources are relative to the folder: nothing changes) and with the file renamed (every document
gets a new version whose source differs: chunks stored again, but embeddings and entities come
from the caches), each against its first ingest's seconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import DATA, RESULTS, client, commit_stamp
from psycopg import sql

import pgcite
from pgcite.embed._registry import load_embedder
from pgcite.index import _writer
from pgcite.ingest import _flow, _pipeline
from pgcite.ingest._entities import recognizer_for
from pgcite.ingest._flow import Chunked
from pgcite.store._collections import (
    CollectionSettings,
    create_collection,
    vector_index_name,
)
from pgcite.store._entities import Mention

ROOT = Path(__file__).resolve().parent.parent
# variant -> (PGCITE_EMBED_BACKEND, the collection's entities setting, store after embedding)
VARIANTS: dict[str, tuple[str, str, bool]] = {
    "default": ("auto", "off", False),
    "entities": ("auto", "auto", False),
    "fp32": ("onnx", "off", False),
    "store-after": ("auto", "off", True),
    "no-hnsw": ("auto", "off", False),  # default without its HNSW index: what inserting costs
}
TARGETS = {"default": 60.0, "entities": 40.0}  # chunks/s on 2 cores (issue 38)
REINGEST_TARGET = 0.10  # a renamed folder's re-ingest against its first ingest


@contextmanager
def store_after() -> Iterator[None]:
    """The order before the overlapped flow: every group is kept until the last is embedded,
    then all are stored in one go (with today's batched statements)."""
    space = vars(_pipeline)  # the pipeline calls write_documents by its module-level name
    original = space["write_documents"]

    def deferred(*args: Any, sink: Any, **kwargs: Any) -> None:
        groups: list[tuple[Chunked, Any, list[list[Mention]]]] = []
        original(*args, sink=lambda *group: groups.append(group), **kwargs)
        for group in groups:
            sink(*group)

    space["write_documents"] = deferred
    try:
        yield
    finally:
        space["write_documents"] = original


def _run(c: pgcite.Client, name: str, folder: Path, variant: str) -> dict[str, Any]:
    backend, entities, after = VARIANTS[variant]
    settings = c.settings.model_copy(update={"embed_backend": backend})
    cpu, load = time.process_time(), os.getloadavg()[0]
    segment: dict[str, float] = {}
    embedded: list[float] = []
    with store_after() if after else _nothing(), timed_segment(c, segment), \
            last_embedding(embedded):
        report = _pipeline.ingest(c.db, name, [folder], progress=False, settings=settings)
    ended = time.perf_counter()
    cpu = time.process_time() - cpu
    assert not report.failed, report.failed
    return {**_row(report, cpu, load, entities), "bm25_segment": segment or None,
            "after_last_embedding_s": round(ended - max(embedded), 3) if embedded else None}


@contextmanager
def last_embedding(ends: list[float]) -> Iterator[None]:
    """When each group's embedding ended: what the run does after the last one is serial work
    (the stores still queued, the snapshot, the commit, the statistics) with a core idle."""
    space = vars(_flow)  # the flow calls it by its module-level name
    original = space["embed_with_cache"]

    def timed(*args: Any, **kwargs: Any) -> Any:
        try:
            return original(*args, **kwargs)
        finally:
            ends.append(time.perf_counter())

    space["embed_with_cache"] = timed
    try:
        yield
    finally:
        space["embed_with_cache"] = original


@contextmanager
def timed_segment(c: pgcite.Client, out: dict[str, float]) -> Iterator[None]:
    """Wall and server CPU seconds of writing the new BM25 segment (part of the snapshot
    stage), into ``out``."""
    original = _writer.new_segment

    def timed(conn: Any, *args: Any, **kwargs: Any) -> int:
        wall, db = time.perf_counter(), c.db.backend_cpu_s(conn)
        try:
            return original(conn, *args, **kwargs)
        finally:
            after = c.db.backend_cpu_s(conn)
            out["wall_s"] = round(time.perf_counter() - wall, 3)
            out["db_cpu_s"] = round(after - db, 3) if after is not None and db is not None else 0.0

    space = vars(_writer)  # index_snapshot calls it by its module-level name
    space["new_segment"] = timed
    try:
        yield
    finally:
        space["new_segment"] = original


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _row(report: pgcite.IngestReport, cpu: float, load: float, entities: str) -> dict[str, Any]:
    db_cpu = sum(s.db_cpu_s or 0.0 for s in report.stages.values())
    busy = cpu + db_cpu
    return {
        "chunks": report.chunks_added, "new_versions": report.new_versions,
        "embedded": report.embedded, "cached": report.cached,
        "entities": report.entities if entities == "auto" else None,
        "entities_cached": report.entities_cached,
        "seconds": report.seconds,
        "chunks_per_s": round(report.chunks_added / report.seconds, 2) if report.seconds else None,
        "process_cpu_s": round(cpu, 2), "server_cpu_s": round(db_cpu, 2),
        "cores_busy": round(busy / report.seconds, 2) if report.seconds else None,
        "chunks_per_cpu_s": round(report.chunks_added / busy, 2) if busy else None,
        "load_average_before": round(load, 1),
        "stages": {k: v.model_dump() for k, v in report.stages.items()},
    }


def _fresh(c: pgcite.Client, name: str, variant: str) -> None:
    """A new collection of this variant's model and entities setting (its caches start empty:
    their rows go with the collection)."""
    backend, entities, _ = VARIANTS[variant]
    c.drop_collection(name, missing_ok=True)
    spec = load_embedder("all-MiniLM-L6-v2",
                         c.settings.model_copy(update={"embed_backend": backend})).spec
    with c.db.transaction() as conn:
        info = create_collection(conn, name, language="english", embedder=spec,
                                 settings=CollectionSettings.model_validate(
                                     {"entities": entities}))
        if variant == "no-hnsw":
            conn.execute(sql.SQL("DROP INDEX {}.{}").format(
                info.schema_id, sql.Identifier(vector_index_name(spec.model_key))))


def _reingests(c: pgcite.Client, name: str, folder: Path, variant: str,
               first: dict[str, Any]) -> dict[str, Any]:
    """The same file from the folder renamed, then under another file name."""
    out: dict[str, Any] = {}
    renamed = folder.with_name(folder.name + "-renamed")
    folder.rename(renamed)
    out["renamed folder"] = _run(c, name, renamed, variant)
    (renamed / "corpus.jsonl").rename(renamed / "scifact-abstracts.jsonl")
    out["renamed file"] = _run(c, name, renamed, variant)
    for row in out.values():
        row["of_first_ingest"] = round(row["seconds"] / first["seconds"], 4)
    renamed.rename(folder)
    (folder / "scifact-abstracts.jsonl").rename(folder / "corpus.jsonl")
    return out


def _warm(c: pgcite.Client, variants: list[str]) -> None:
    """Load every model before the clock starts: a process loads each once."""
    for variant in variants:
        backend = VARIANTS[variant][0]
        embedder = load_embedder("all-MiniLM-L6-v2",
                                 c.settings.model_copy(update={"embed_backend": backend}))
        embedder.embed_documents(["warm up"])
    if any(VARIANTS[v][1] == "auto" for v in variants):
        recognizer = recognizer_for("english")
        assert recognizer is not None, "the entities variant needs the entities extra"
        recognizer.entities(["Samuel Pepys went to London."])


def entries_check() -> dict[str, Any]:
    """``--entries`` on the diary as printed: every entry of the shared Pepys data in one text,
    in order, under a month heading ("SEPTEMBER 1666") per month, each entry as the data writes
    it ("4th. Up by break of day …"); read by ``entry_units`` and compared, in order, with the
    entries' own days. The data's dates are Gregorian and the text's days Old Style: ten days
    apart in the 1660s."""
    import calendar
    import difflib

    from pgcite.ingest._entries import entry_units

    rows = [json.loads(line) for line in
            (DATA / "pepys-diary" / "entries.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r.get("id_date")]
    days = [dt.date.fromisoformat(r["date"]) - dt.timedelta(days=10) for r in rows]
    parts: list[str] = []
    month: tuple[int, int] | None = None
    for row, day in zip(rows, days, strict=True):
        if (day.year, day.month) != month:
            month = (day.year, day.month)
            parts.append(f"{calendar.month_name[day.month].upper()} {day.year}")
        parts.append(row["text"])
    units = entry_units("\n\n".join(parts), "The Diary of Samuel Pepys") or []
    found = [u.date_start.isoformat() for u in units if u.date_start is not None]
    want = [d.isoformat() for d in days]
    entry_days = set(want)
    matcher = difflib.SequenceMatcher(a=want, b=found, autojunk=False)
    return {"entries": len(want), "dated_units": len(found),
            "entries_found_on_their_day": sum(b.size for b in matcher.get_matching_blocks()),
            "units_on_no_entry_day": len([d for d in found if d not in entry_days])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=None, help="the first N abstracts (all)")
    parser.add_argument("--variants", nargs="+", default=["default", "entities"],
                        choices=list(VARIANTS))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-reingest", action="store_true")
    parser.add_argument("--out", default="ingest", help="folder under bench/results")
    parser.add_argument("--entries-check", action="store_true",
                        help="only how --entries reads the diary as printed (no database); "
                        "bench/results/ingest/entries.json")
    args = parser.parse_args()
    if args.entries_check:
        check = {"commit": commit_stamp(), "date": dt.date.today().isoformat(),
                 "command": "python bench/ingest.py --entries-check", **entries_check()}
        (RESULTS / "ingest" / "entries.json").write_text(json.dumps(check, indent=1) + "\n")
        print(json.dumps(check), file=sys.stderr)
        return
    lines = (DATA / "scifact" / "corpus.jsonl").read_text().splitlines()[: args.docs]
    result: dict[str, Any] = {
        "commit": commit_stamp(), "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "command": "python bench/ingest.py " + " ".join(sys.argv[1:]),
        "documents": len(lines), "rounds": args.rounds, "runs": {}, "reingest": {}}
    with tempfile.TemporaryDirectory() as tmp, client() as c:
        _warm(c, args.variants)
        result["load_average_at_start"] = round(os.getloadavg()[0], 1)
        for round_ in range(args.rounds):
            for variant in args.variants:
                name = f"bench_ingest_{variant.replace('-', '_')}"
                folder = Path(tmp) / f"scifact-{variant}"
                folder.mkdir(exist_ok=True)
                (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
                _fresh(c, name, variant)
                row = _run(c, name, folder, variant)
                result["runs"].setdefault(variant, []).append(row)
                print(f"round {round_ + 1} {variant}: {row['chunks_per_s']} chunks/s, "
                      f"{row['chunks_per_cpu_s']} chunks per CPU second, cores busy "
                      f"{row['cores_busy']}", file=sys.stderr)
                if round_ == 0 and not args.no_reingest:
                    result["reingest"][variant] = _reingests(c, name, folder, variant, row)
                c.drop_collection(name)
                shutil.rmtree(folder)
        result["load_average_at_end"] = round(os.getloadavg()[0], 1)
    _write(result, RESULTS / args.out)


def _median(rows: list[dict[str, Any]], key: str) -> Any:
    values = [r[key] for r in rows if r.get(key) is not None]
    return round(statistics.median(values), 2) if values else None


def _write(result: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"# Ingest at the hardware's pace ({result['documents']} SciFact abstracts)", "",
             f"`{result['command']}` at {result['commit']}, {result['date']}; "
             f"{result['machine']}, load average {result['load_average_at_start']} at the "
             f"start, {result['load_average_at_end']} at the end (other work shares the "
             "machine: compare within the run; chunks per CPU second are the steadier figure).",
             "", "| variant | chunks | chunks/s (report) | target | chunks per CPU s | cores busy"
             " | process CPU s | server CPU s | s after the last embedding | rounds (chunks/s) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for variant, rows in result["runs"].items():
        lines.append(
            f"| {variant} | {rows[0]['chunks']} | {_median(rows, 'chunks_per_s')} | "
            f"{TARGETS.get(variant, '–')} | {_median(rows, 'chunks_per_cpu_s')} | "
            f"{_median(rows, 'cores_busy')} | {_median(rows, 'process_cpu_s')} | "
            f"{_median(rows, 'server_cpu_s')} | {_median(rows, 'after_last_embedding_s') or '–'} | "
            f"{[r['chunks_per_s'] for r in rows]} |")
    lines += ["", "Where the time went (first round; wall s / this process's CPU s / the "
              "server's CPU s; stages overlap, so walls add up to more than the run):", "",
              "| variant | " + " | ".join(_pipeline_stages()) + " | total s |",
              "|---|" + "---|" * (len(_pipeline_stages()) + 1)]
    for variant, rows in result["runs"].items():
        lines.append(f"| {variant} | " + " | ".join(
            _cell(rows[0]["stages"].get(s)) for s in _pipeline_stages())
            + f" | {rows[0]['seconds']} |")
    lines += ["", "Of the snapshot stage, the new BM25 segment (first round; wall s / server CPU "
              "s): " + "; ".join(f"{v}: {_segment(rows[0].get('bm25_segment'))}"
                                 for v, rows in result["runs"].items())]
    if result["reingest"]:
        lines += ["", f"Re-ingest of the same file (target: ≤ {REINGEST_TARGET:.0%} of the "
                  "first ingest):", "", "| variant | case | new versions | embedded | cached |"
                  " entities from cache | seconds | of first ingest |", "|---|---|---|---|---|"
                  "---|---|---|"]
        for variant, cases in result["reingest"].items():
            lines += [f"| {variant} | {case} | {r['new_versions']} | {r['embedded']} | "
                      f"{r['cached']} | {r['entities_cached']} | {r['seconds']} | "
                      f"{r['of_first_ingest']:.1%} |" for case, r in cases.items()]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _pipeline_stages() -> tuple[str, ...]:
    from pgcite.ingest._stages import STAGES

    return STAGES


def _segment(seg: dict[str, float] | None) -> str:
    return "–" if not seg else f"{seg['wall_s']:.1f} / {seg['db_cpu_s']:.1f}"


def _cell(stage: dict[str, Any] | None) -> str:
    if not stage:
        return "–"
    db = "" if stage["db_cpu_s"] is None else f" / {stage['db_cpu_s']:.1f}"
    return f"{stage['wall_s']:.1f} / {stage['cpu_s']:.1f}{db}"


if __name__ == "__main__":
    main()
