"""work_mem for searches: PostgreSQL's 4MB against a larger value, on bench/scale.py's
collections (build them first), where an exact keyword leg that sums every posting builds a hash
table of millions of chunks (at 10M it spills past 4MB x hash_mem_multiplier).

work_mem applies on a configuration reload, so the settings alternate query by query: the
embedded server's pgcite.conf (store/_server.py) gets the value, the server reloads, then the
query runs; the order flips every query, and each query runs once untimed per setting first
(bench/scale.py's ``timed`` does the same for its variants). pgcite.conf is restored at the end.

    python bench/work_mem.py                      # the 1M and 10M collections, ~10 min
    python bench/work_mem.py --cases scale_1000k:hybrid:cutoff --queries 100
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, cast, get_args

import numpy as np
import scale
from _common import RESULTS, client

import pgcite
from pgcite.store._server import SETTINGS_FILE

SETTINGS = ("4MB", "64MB")
# collection:mode:filter, the filter one of FILTERS' names
CASES = ("scale_1000k:hybrid:cutoff", "scale_10000k:keyword:none")
FILTERS: dict[str, dict[str, Any] | None] = {
    "none": None, "cutoff": scale.FILTERS["cutoff 1699"], "corpus": scale.FILTERS["corpus A"]}


def _mode(text: str) -> pgcite.Mode:
    """A case's mode, one of pgcite's search modes."""
    if text not in get_args(pgcite.Mode):
        raise SystemExit(f"unknown mode {text!r} (one of {', '.join(get_args(pgcite.Mode))})")
    return cast(pgcite.Mode, text)


def _reload(c: pgcite.Client, conf: Path, text: str) -> None:
    """pgcite.conf as ``text``, and the server told to read it again."""
    conf.write_text(text)
    with c.db.connect(autocommit=True) as conn:
        conn.execute("SELECT pg_reload_conf()")
    time.sleep(0.15)  # the backends read the file when the signal reaches them


def run_case(c: pgcite.Client, conf: Path, base: str, case: str, n: int) -> dict[str, Any]:
    name, mode_text, where = case.split(":")
    mode = _mode(mode_text)
    rng = np.random.default_rng(scale.SEED + 2)
    texts = scale.random_queries(scale.vocabulary(), rng, n)
    vecs = scale.synthetic_vectors(n, rng, scale.centroids())
    col = c.collection(name)
    ms: dict[str, list[float]] = {s: [] for s in SETTINGS}
    same = 0
    for i, (text, vec) in enumerate(zip(texts, vecs, strict=True)):
        ids: dict[str, list[str]] = {}
        for timed in (False, True):
            for setting in SETTINGS[::1 if i % 2 == 0 else -1]:
                _reload(c, conf, f"{base}work_mem = '{setting}'\n")
                result = col.search(text, top_k=5, query_vector=vec, snippets=False, mode=mode,
                                    filters=FILTERS[where])
                if timed:
                    ms[setting].append(result.timings_ms["database"])
                    ids[setting] = [h.id for h in result.hits]
        same += all(v == ids[SETTINGS[0]] for v in ids.values())
    return {"queries": n, "same_hits": same, **{s: scale.summary(v) for s, v in ms.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=list(CASES),
                        help="collection:mode:filter (filter: none, cutoff or corpus)")
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()
    results: dict[str, Any] = {"settings": list(SETTINGS), "cases": {}}
    with client() as c:
        if c.settings.database_url is not None:
            raise SystemExit("bench/work_mem.py rewrites the embedded server's pgcite.conf")
        conf = c.settings.data_dir.expanduser().resolve() / "pg18" / SETTINGS_FILE
        base = conf.read_text()
        try:
            for case in args.cases:
                print(f"{case}: {args.queries} queries", file=sys.stderr)
                results["cases"][case] = run_case(c, conf, base, case, args.queries)
        finally:
            _reload(c, conf, base)
    out = RESULTS / "work_mem"
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(results, indent=2))
    (out / "report.md").write_text(render(results))
    print(render(results))


def render(results: dict[str, Any]) -> str:
    lines = ["# work_mem for searches (database ms, top-5, settings alternating query by query)",
             "", "| collection:mode:filter | work_mem | p50 | p95 | mean | same hits |",
             "|---|---|---|---|---|---|"]
    for case, r in results["cases"].items():
        for setting in results["settings"]:
            m = r[setting]
            lines.append(f"| {case} | {setting} | {m['p50_ms']} | {m['p95_ms']} | "
                         f"{m['mean_ms']} | {r['same_hits']}/{r['queries']} |")
    lines += ["", "Shared 2-core machine: compare the rows of one run only."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
