"""Shared by the benchmark scripts: where data and results live, building a collection once, and
reference baselines (bm25s, exact dense search) as harness searchers."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from psycopg import sql

import pgcite
from pgcite.evaluate import GoldenQuery, ScoredHit, Searcher, SearchOutcome

ROOT = Path(__file__).resolve().parent
DATA = Path(os.environ.get("PGCITE_BENCH_DATA", ROOT.parent.parent / "shared" / "data"))
RESULTS = ROOT / "results"
# Collections of a range of the diary's entries (first and last `date`, ISO), each asked the
# judged questions about it (bench/abstention/README.md): a small archive, the year 1664 and a
# journal of ~530 entries.
PEPYS_FEB_1663 = ("1663-02-01", "1663-02-26")
PEPYS_1664 = ("1664-01-01", "1664-12-31")
PEPYS_JOURNAL = ("1661-07-01", "1662-12-31")


def dated_in(span: tuple[str, str]) -> Callable[[dict[str, Any]], bool]:
    """Whether a diary entry is dated in ``span`` (first and last day, both kept)."""
    first, last = span
    return lambda r: bool(r.get("date")) and first <= r["date"] <= last


# The retrieval configurations every quality benchmark runs side by side: the legs and the
# fusions alone (no optional stage), and what a search does by default (convex fusion plus
# the heuristic router, docs/retrieval.md).
NO_STAGES: dict[str, Any] = {"route": False}
VARIANTS: dict[str, dict[str, Any]] = {
    "keyword": {"mode": "keyword", "stages": NO_STAGES},
    "vector": {"mode": "vector", "stages": NO_STAGES},
    "hybrid (rrf)": {"mode": "hybrid", "fusion": "rrf", "stages": NO_STAGES},
    "hybrid (convex)": {"mode": "hybrid", "fusion": "convex", "stages": NO_STAGES},
    "hybrid (default: convex + router)": {"mode": "hybrid"},
}


def _checkout_stamp() -> str:
    """The commit checked out now (short), marked when src/ differs from it."""
    from pgcite.evaluate._collection import git_commit

    head = git_commit()
    if head is None:
        return "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "src"],
                           cwd=ROOT.parent, text=True, capture_output=True).stdout.strip()
    return head[:7] + ("+uncommitted src" if dirty else "")


# Taken when a benchmark starts, which is when its code is imported: a summary written at the
# end of a long run stamped with the commit checked out by then named code the run never ran.
_STARTED_AT = _checkout_stamp()


def commit_stamp() -> str:
    """The commit a run measures (short): the one checked out when it started, marked when src/
    differed from it, and when the checkout changed while it ran."""
    now = _checkout_stamp()
    return _STARTED_AT if now == _STARTED_AT else f"{_STARTED_AT} (checkout {now} by its end)"


def machine() -> str:
    """The machine a run measured on, as every summary names it, with the 1-minute load average
    when it is called (these machines are shared: it says how noisy a timing is)."""
    return (f"{platform.machine()}, {os.cpu_count()} CPUs, 1-minute load average "
            f"{os.getloadavg()[0]:.1f}")


def run_stamp(command: str | None = None) -> dict[str, Any]:
    """What every summary says about its run: the command (default: this process's own),
    the commit (commit_stamp), the date and the machine."""
    if command is None:
        command = " ".join(["python", f"bench/{Path(sys.argv[0]).name}", *sys.argv[1:]])
    return {"command": command, "commit": commit_stamp(), "date": time.strftime("%Y-%m-%d"),
            "machine": machine()}


def stamp_line(stamp: dict[str, Any]) -> str:
    """A report's line naming its run: command, commit, date and machine."""
    return (f"`{stamp['command']}` at commit {stamp['commit']} on {stamp['date']} "
            f"({stamp['machine']}).")


def settings(**overrides: Any) -> pgcite.Settings:
    """The benchmark database: PGCITE_DATABASE_URL / PGCITE_DATA_DIR, else bench/.data;
    ``overrides`` set the others (e.g. ``merge_budget_s=0``)."""
    values: dict[str, Any] = dict(overrides)
    if "PGCITE_DATA_DIR" not in os.environ and "PGCITE_DATABASE_URL" not in os.environ:
        values["data_dir"] = ROOT / ".data"
    return pgcite.Settings(**values)


def client(*, llm: pgcite.ChatModel | None = None, **overrides: Any) -> pgcite.Client:
    """A client of the benchmark database (``settings``), with ``llm`` as its chat model."""
    return pgcite.Client(settings(**overrides), llm=llm)


def free_port() -> int:
    """A free TCP port on 127.0.0.1, for a `pgcite serve` a benchmark starts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ensure_collection(
    c: pgcite.Client,
    name: str,
    paths: Sequence[Path],
    *,
    language: str = "english",
    embedder: str = "all-MiniLM-L6-v2",
    overrides: pgcite.Overrides | None = None,
    aliases: Path | None = None,
    settings: pgcite.CollectionSettings | None = None,
) -> pgcite.Collection:
    """The collection, created and ingested if needed (re-runs embed nothing: cache + versions);
    ``settings`` apply when it is created."""
    try:
        col = c.collection(name)
    except pgcite.CollectionNotFound:
        col = c.create_collection(name, language=language, embedder=embedder, settings=settings)
    report = col.ingest(paths, overrides=overrides, progress=sys.stderr.isatty(),
                        aliases=aliases)
    if report.failed:
        raise SystemExit(f"ingest of {name} failed: {report.failed}")
    print(f"{name}: {report.documents} documents, {report.embedded} embedded now, "
          f"{report.seconds:.1f} s", file=sys.stderr)
    return col


def cell(value: Any) -> str:
    """A figure for a markdown table: rates to 3 decimals, larger numbers to 1, None as –."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}" if value <= 1 else f"{value:.1f}"
    return str(value)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def bm25s_searcher(corpus: list[dict[str, Any]], *, language: str = "english",
                   depth: int = 100) -> Searcher:
    """The BM25 reference: bm25s over the same title + text, Snowball stemmer, stop words."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer(language)
    ids = [str(doc["_id"]) for doc in corpus]
    texts = [f"{doc.get('title') or ''} {doc['text']}" for doc in corpus]
    stop = "en" if language == "english" else None
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords=stop, stemmer=stemmer, show_progress=False),
                    show_progress=False)

    def search(query: GoldenQuery) -> SearchOutcome:
        tokens = bm25s.tokenize([query.text], stopwords=stop, stemmer=stemmer,
                                show_progress=False)
        docs, scores = retriever.retrieve(tokens, k=min(depth, len(ids)), show_progress=False)
        hits = [ScoredHit(id=ids[d], document_id=ids[d], score=float(s), date_end=None)
                for d, s in zip(docs[0], scores[0], strict=True) if s > 0]
        return SearchOutcome(hits=hits)

    return search


def exact_dense_searcher(col: pgcite.Collection, vectors: dict[str, np.ndarray], *,
                         depth: int = 100) -> Searcher:
    """Exact cosine search in numpy over the snapshot's own chunk vectors: the ANN ceiling."""
    snap = col.active_snapshot()
    with col.client.connection() as conn:
        rows = conn.execute(sql.SQL(
            "SELECT c.id, c.document_id, c.date_end, c.embedding FROM {s}.chunks c"
            " JOIN {s}.snapshot_members m USING (version_pk) WHERE m.snapshot_id = %s"
        ).format(s=col.info.schema_id), (snap.snapshot_id,)).fetchall()
    matrix = np.stack([np.asarray(r[3].to_numpy(), dtype=np.float32) for r in rows])

    def search(query: GoldenQuery) -> SearchOutcome:
        if query.cutoff is not None:
            raise NotImplementedError("exact baseline has no cutoff filter")
        sims = matrix @ vectors[query.id]
        top = np.argsort(-sims)[: depth * 3]
        hits = [ScoredHit(id=rows[i][0], document_id=rows[i][1], score=float(sims[i]),
                    date_end=rows[i][2]) for i in top]
        return SearchOutcome(hits=hits, confidence=float(sims[top[0]]))

    return search


def write(result: Any, name: str) -> Path:
    """summary.json + report.md into results/<name>/ (committed: small); the per-query
    results.json and the HTML report into results/<name>/runs/ (git ignores it)."""
    from pgcite.evaluate import write_reports, write_summary

    out = RESULTS / name
    write_summary(result, out)
    write_reports(result, out / "runs")
    print(f"wrote {out}/summary.json, report.md; detail in {out}/runs/ (results.json, "
          "report.html)", file=sys.stderr)
    return out


def wait_ready(base: str, server: subprocess.Popen[bytes], timeout_s: float = 240) -> None:
    """Until a `pgcite serve` started by a benchmark answers /readyz (or exits, or time runs out)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with status {server.returncode}")
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit("the server did not become ready")
