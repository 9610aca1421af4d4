"""Parallel ingest into one snapshot: N worker processes stage the same SciFact abstracts
(`pgcite ingest --stage-only`, through the Python API) into a throwaway collection, then ONE
build (`pgcite snapshot build --staged --activate`); end to end, cold embedding cache, side by
side with plain ingest processes of the same documents (one snapshot each).

    nice -n 10 python bench/parallel_ingest.py --docs 200 --workers 1 2 --plain 1 2 --repeats 2
    # writes bench/results/parallel_ingest/{summary.json,report.md}
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import DATA, RESULTS, client

import pgcite

NAME = "bench_parallel_ingest"

# One worker process: load the model, then ingest its share (staged, or plain), timed inside.
WORKER = r"""
import json, sys, time
import pgcite
from pgcite.embed._registry import embedder_for
url, name, mode = sys.argv[1:4]
started = time.perf_counter()
with pgcite.Client(pgcite.Settings(database_url=url)) as client:
    col = client.collection(name)
    embedder_for(col.info.embedder, client.settings)  # loaded once per process, kept
    loaded = time.perf_counter()
    report = col.ingest(sys.argv[4:], stage=(mode == "staged"))
    done = time.perf_counter()
    print(json.dumps({"load_s": loaded - started, "seconds": done - loaded,
                      "chunks": report.chunks_added, "embedded": report.embedded,
                      "staged": report.staged, "snapshot_id": report.snapshot_id}), flush=True)
"""


def _split(lines: list[str], parts: int, folder: Path) -> list[Path]:
    """Contiguous shares of the documents, one file per worker."""
    size = -(-len(lines) // parts)
    paths = []
    for i in range(parts):
        path = folder / f"share-{parts}-{i}.jsonl"
        path.write_text("\n".join(lines[i * size: (i + 1) * size]) + "\n")
        paths.append(path)
    return paths


def _fresh(c: pgcite.Client) -> pgcite.Collection:
    """A new collection, so a cold embedding cache (the cache goes with its collection)."""
    c.drop_collection(NAME, missing_ok=True)
    return c.create_collection(NAME)


def run(c: pgcite.Client, mode: str, workers: int, lines: list[str], folder: Path) -> dict[
        str, Any]:
    col = _fresh(c)
    shares = _split(lines, workers, folder)
    started = time.perf_counter()
    # The cores are split between the workers (PGCITE_EMBED_THREADS), as one would deploy
    # them: two workers each on all cores would only fight over them.
    threads = max(1, (os.cpu_count() or 1) // workers)
    env = {**os.environ, "PGCITE_EMBED_THREADS": str(threads)}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, c.db.url, NAME, mode, str(p)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for p in shares]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        if proc.returncode != 0:
            raise SystemExit(f"worker failed: {err[-2000:]}")
        outs.append(json.loads(out.strip().splitlines()[-1]))
    ingest_s = time.perf_counter() - started
    build_s = 0.0
    if mode == "staged":
        built = col.build_staged()
        build_s = time.perf_counter() - started - ingest_s
        assert built.activated and built.snapshot_id is not None
    total_s = time.perf_counter() - started
    snapshots = col.snapshots()
    active = col.active_snapshot()
    # Past the model load: the slowest worker's ingest, then the build.
    work_s = max(o["seconds"] for o in outs) + build_s
    return {
        "mode": mode, "workers": workers, "embed_threads_each": threads,
        "documents": active.n_documents, "chunks": active.n_chunks,
        "snapshots_made": len(snapshots), "embedded": sum(o["embedded"] for o in outs),
        "worker_load_s": [round(o["load_s"], 2) for o in outs],
        "worker_ingest_s": [round(o["seconds"], 2) for o in outs],
        "processes_s": round(ingest_s, 2), "build_s": round(build_s, 2),
        "end_to_end_s": round(total_s, 2),
        "chunks_per_s": round((active.n_chunks or 0) / total_s, 2),
        "chunks_per_s_after_load": round((active.n_chunks or 0) / work_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--plain", type=int, nargs="*", default=[1, 2],
                        help="also time this many plain `ingest` processes (each builds and "
                        "activates its own snapshot)")
    args = parser.parse_args()
    lines = (DATA / "scifact" / "corpus.jsonl").read_text().splitlines()[: args.docs]
    plan = [("plain", w) for w in args.plain] + [("staged", w) for w in args.workers]
    runs = []
    with tempfile.TemporaryDirectory() as tmp, client() as c:
        for repeat in range(args.repeats):
            for mode, workers in plan:
                result = {**run(c, mode, workers, lines, Path(tmp)), "repeat": repeat}
                print(json.dumps(result), file=sys.stderr)
                runs.append(result)
        c.drop_collection(NAME, missing_ok=True)
    summary = {"docs": args.docs, "cpu_count": os.cpu_count(),
               "load": [round(x, 2) for x in os.getloadavg()], "runs": runs}
    out = RESULTS / "parallel_ingest"
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    rows = "".join(
        f"| {r['mode']} | {r['workers']} × {r['embed_threads_each']} | {r['repeat']} "
        f"| {r['chunks']} | {r['snapshots_made']} | {max(r['worker_ingest_s'])} "
        f"| {r['build_s']} | {r['end_to_end_s']} | {r['chunks_per_s']} "
        f"| {r['chunks_per_s_after_load']} |\n" for r in runs)
    (out / "report.md").write_text(
        f"# Parallel ingest: staged workers + one build\n\n{args.docs} SciFact abstracts, "
        f"cold embedding cache, {os.cpu_count()} CPUs (load average at the end "
        f"{summary['load']}); each worker is a process that loads the model itself (counted "
        "end to end, not after load). The CPUs are split between the workers "
        "(PGCITE_EMBED_THREADS)."
        "\n\n| mode | workers × embed threads | repeat | chunks | snapshots made "
        "| slowest worker s | build s | end to end s | chunks/s end to end "
        "| chunks/s after load |\n|---|---|---|---|---|---|---|---|---|---|\n" + rows)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
