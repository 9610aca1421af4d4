"""Shared buffers of the embedded server: PostgreSQL's 128 MB (what initdb leaves) against
pgcite's default, a quarter of the memory (store/_server.py), on the 1M-chunk collection of
bench/scale.py (build it first: ``python bench/scale.py --sizes 1000000``).

A setting applies when the server starts, so the two cannot alternate query by query: each runs
in rounds (a child process, the server's only user, so it restarts with that setting), the
settings alternating round by round, and a setting's figures pool its rounds. A round starts
with cold buffers, as a restarted server does; each query runs once untimed before it is timed
(bench/scale.py's ``timed``), so both settings read every page from the OS cache at least once.

    python bench/shared_buffers.py            # ~10 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import scale
from _common import RESULTS, client

from pgcite.store._server import default_shared_buffers, machine_memory

COLLECTION = "scale_1000k"
ROUNDS = 3
# Unfiltered searches, then the filters of bench/scale.py (a third of the chunks, a quarter),
# where the vector leg walks HNSW furthest; the vector leg alone shows its share.
VARIANTS: scale.Variants = {
    "hybrid": ({"mode": "hybrid"}, ()),
    **{f"hybrid, {f}": ({"mode": "hybrid", "filters": v}, ()) for f, v in scale.FILTERS.items()},
    "vector, cutoff 1699": ({"mode": "vector", "filters": scale.FILTERS["cutoff 1699"]}, ()),
}


def queries(n: int) -> tuple[list[str], np.ndarray]:
    """bench/scale.py's kind of query: six words of its 5,000 commonest, a clustered vector."""
    rng = np.random.default_rng(scale.SEED + 1)
    vocab = scale.vocabulary()
    texts = scale.random_queries(vocab, rng, n)
    return texts, scale.synthetic_vectors(n, rng, scale.centroids())


def one_round(n: int) -> dict[str, Any]:
    """This process's round: the server's setting and each variant's samples."""
    texts, vecs = queries(n)
    with client() as c:
        with c.db.connect() as conn:
            row = conn.execute("SHOW shared_buffers").fetchone()
        db_ms, _ = scale.timed(c.collection(COLLECTION), texts, vecs, VARIANTS)
    return {"shared_buffers": row[0] if row else None, "ms": db_ms}


def run_round(setting: str, n: int) -> dict[str, Any]:
    env = {**os.environ, "PGCITE_EMBEDDED_SHARED_BUFFERS": setting}
    done = subprocess.run([sys.executable, __file__, "--round", "--queries", str(n)], env=env,
                          capture_output=True, text=True, check=True)
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--round", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.round:
        print(json.dumps(one_round(args.queries)))
        return
    settings = {"PostgreSQL's default": "128MB",
                "pgcite's default, a quarter of the memory": default_shared_buffers(
                    machine_memory())}
    samples: dict[str, dict[str, list[float]]] = {s: {v: [] for v in VARIANTS} for s in settings}
    shown: dict[str, str | None] = {}
    for r in range(ROUNDS):
        for label, setting in settings.items():
            print(f"round {r + 1}: {setting}", file=sys.stderr)
            got = run_round(setting, args.queries)
            shown[label] = got["shared_buffers"]
            for variant, ms in got["ms"].items():
                samples[label][variant].extend(ms)
    results = {"collection": COLLECTION, "queries": args.queries, "rounds": ROUNDS,
               "settings": {label: {"shared_buffers": shown[label],
                                    **{v: scale.summary(ms) for v, ms in by.items()}}
                            for label, by in samples.items()}}
    out = RESULTS / "shared_buffers"
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(results, indent=2))
    (out / "report.md").write_text(render(results))
    print(f"wrote {out}/summary.json and report.md", file=sys.stderr)


def render(results: dict[str, Any]) -> str:
    lines = [f"# Shared buffers of the embedded server ({results['collection']}, "
             f"{results['queries']} queries x {results['rounds']} rounds, top-5, database ms)",
             "", "| shared_buffers | search | p50 | p95 | mean |", "|---|---|---|---|---|"]
    for label, by in results["settings"].items():
        for variant in VARIANTS:
            m = by[variant]
            lines.append(f"| {by['shared_buffers']} ({label}) | {variant} | {m['p50_ms']} | "
                         f"{m['p95_ms']} | {m['mean_ms']} |")
    lines += ["", "Shared 2-core machine; rounds alternate the settings (a setting applies when "
              "the server starts), so compare the rows of one run only."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
