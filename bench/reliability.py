"""The reliability probe as a repeatable suite: a real `pgcite serve` on 127.0.0.1, attacked as an
attacker and as an operator would, every loop bounded in count and time.

    .venv/bin/python bench/reliability.py --short    # CI (.ci/run): 5 min on 2 shared, loaded
                                                     # cores (load 15); less on an idle machine
    .venv/bin/python bench/reliability.py            # long: >= 10,000 filtered hits, longer churn
                                                     # and fuzzing, 500 MB hostile bodies (27 min
                                                     # on the same loaded cores)

It makes its own data directory (a temporary one, removed at the end), builds three collections
(the packaged Pepys sample split into corpora A/B; a private collection; a two-snapshot "churn"
collection), starts the server as a child process and measures, per class of request:

* 5xx responses to hostile input (goal 0): non-JSON numbers, lone surrogates, oversized inputs,
  upload names, bad file content, chunked bodies without a key;
* cross-collection reads (goal 0): another collection's key, its texts searched for, and the
  embedding cache probed for its exact texts;
* cutoff/corpus leaks over random filtered searches and answers (goal 0, of >= 10,000 hits in
  long mode);
* mixed-snapshot answers while activation flips between two snapshots (goal 0);
* kill -9 of an ingest, of a database backend and of the postmaster: what was lost (goal
  nothing) and seconds until the service answers again (503s in between are fine, 500s not);
* a schemathesis run against the live server (cases, 5xx);
* the server's peak memory under hostile bodies.

Writes bench/results/reliability/{summary.json,report.md}; exit status 1 when a goal figure is not
0. The postmaster kill counts as a goal only with --expect-supervision (the service can only
recover from it once something restarts the database server).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as dt
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from _common import wait_ready
from psycopg import sql

import pgcite
from pgcite.cli._demo import sample_path
from pgcite.service import create_key

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "reliability"
SECRET = "The quokka vault of collection B opens with the word zanzibar-7319."
CHURN_TAGS = {1: "tagone", 2: "tagtwo"}
POSTMASTER_KIND = "after postmaster kill"


@dataclass(frozen=True)
class Mode:
    docs: int  # Pepys sample entries in rel_a
    text_chars: int  # each entry cut to this many characters (short: one chunk each)
    kill_docs: int  # documents of the ingest that is killed
    filtered_hits: int  # stop the filtered searches once this many hits were checked
    filtered_s: float
    churn_s: float
    fuzz_examples: int
    fuzz_s: float
    hostile_mb: int  # size of the chunked bodies sent without a key
    recover_s: float  # how long to wait for the service after a kill


SHORT = Mode(docs=60, text_chars=500, kill_docs=120, filtered_hits=3000, filtered_s=20,
             churn_s=10, fuzz_examples=150, fuzz_s=20, hostile_mb=100, recover_s=12)
LONG = Mode(docs=1000, text_chars=100_000, kill_docs=600, filtered_hits=12000, filtered_s=600,
            churn_s=60, fuzz_examples=2000, fuzz_s=240, hostile_mb=500, recover_s=30)


@dataclass
class Tally:
    """Requests sent per class and the 5xx among them (503 counted apart: it is the documented
    answer while the database is away)."""

    sent: Counter[str] = field(default_factory=Counter)
    status: dict[str, Counter[int]] = field(default_factory=dict)
    samples: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, status: int, detail: str = "") -> None:
        with self.lock:
            self.sent[kind] += 1
            self.status.setdefault(kind, Counter())[status] += 1
            if status >= 500 and status != 503 and len(self.samples) < 10:
                self.samples.append(f"{kind}: {status} {detail[:200]}")

    def five_xx(self, *, excluding: tuple[str, ...] = ()) -> int:
        """5xx other than 503, and requests that got no answer at all (599)."""
        return sum(n for kind, c in self.status.items() if kind not in excluding
                   for s, n in c.items() if s >= 500 and s != 503)


# --- setup --------------------------------------------------------------------------------------


def _jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def build(client: pgcite.Client, work: Path, mode: Mode) -> dict[str, Any]:
    """The collections, their keys, and what the checks compare against."""
    lines = sample_path().read_text().splitlines()
    sample = [json.loads(line) for line in lines if line][: mode.docs]
    for i, rec in enumerate(sample):
        rec["corpus"], rec["text"] = "AB"[i % 2], rec["text"][: mode.text_chars]
    client.create_collection("rel_a").ingest([_jsonl(work / "a.jsonl", sample)])
    client.create_collection("rel_b").ingest([_jsonl(work / "b.jsonl", [
        {"_id": "b-secret", "date": "1700-01-01", "text": SECRET}])])
    churn = client.create_collection("rel_churn")
    for sid, tag in CHURN_TAGS.items():
        records = [{"_id": f"c-{i}", "date": f"1666-10-{i + 1:02d}",
                    "text": f"{tag} {rec['text'][:400]}"} for i, rec in enumerate(sample[:8])]
        churn.ingest([_jsonl(work / f"churn{sid}.jsonl", records)], replace=True,
                     activate=sid == 1)
    keys = {}
    with client.db.transaction() as conn:
        for who, (col, role) in {"a_reader": ("rel_a", "reader"), "a_admin": ("rel_a", "admin"),
                                 "b_reader": ("rel_b", "reader"),
                                 "churn_admin": ("rel_churn", "admin")}.items():
            keys[who] = {"Authorization": f"Bearer {create_key(conn, col, role).token}"}
    dates = sorted(r["date"] for r in sample)
    return {"keys": keys, "first": dates[0], "last": dates[-1], "a_docs": len(sample)}


def cache_scope_cost(client: pgcite.Client, source: Path) -> dict[str, Any]:
    """What scoping the embedding cache costs, on the realistic case of one document set in two
    collections: its texts looked up in rel_a's cache (all hits: what a shared cache would give
    the second collection) and embedded for a second collection (all misses: what scoping
    makes it do). The texts are the pipeline's own (same chunker, budget, contextual mode)."""
    from pgcite._types import Document
    from pgcite.embed._registry import embedder_for
    from pgcite.ingest._chunking import chunk_document, embedding_text
    from pgcite.ingest._loaders import iter_documents
    from pgcite.ingest._pipeline import chunk_budget
    from pgcite.store._embedding_cache import embed_with_cache

    info = client.collection("rel_a").info
    embedder = embedder_for(info.embedder, client.settings)
    mode = info.settings.contextual
    texts = [embedding_text(chunk, mode) for doc in iter_documents([source])
             if isinstance(doc, Document)
             for chunk in chunk_document(doc, count_tokens=embedder.count_tokens, contextual=mode,
                                         max_tokens=chunk_budget(info.settings, info.embedder))]
    client.create_collection("rel_copy")
    started = time.perf_counter()
    _, own = embed_with_cache(client.db, embedder, texts, scope="rel_a")
    hit_s = time.perf_counter() - started
    started = time.perf_counter()
    _, other = embed_with_cache(client.db, embedder, texts, scope="rel_copy")
    miss_s = time.perf_counter() - started
    return {"chunks": len(texts), "same_collection_s": round(hit_s, 2),
            "same_collection_cached": own.cached, "second_collection_s": round(miss_s, 2),
            "second_collection_embedded": other.embedded,
            "ms_per_reembedded_chunk": round(miss_s / max(1, other.embedded) * 1000, 1)}


# --- the server ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", "from pgcite.cli import main; main()", "--data-dir",
         str(data_dir), "serve", "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "critical"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


# --- hostile input ------------------------------------------------------------------------------


def chunked_post(port: int, path: str, headers: dict[str, str], total_mb: int,
                 timeout_s: float = 60) -> tuple[int | None, int]:
    """POST a chunked body of ``total_mb`` MB over a raw socket, stopping as soon as the server
    answers; returns (status or None, MB sent)."""
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
    head += "Content-Type: application/json\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    chunk = b"x" * (1 << 20)
    frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    sent, deadline = 0, time.monotonic() + timeout_s
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(head.encode() + b'5\r\n{"q":\r\n')
        try:
            while sent < total_mb and time.monotonic() < deadline:
                if select.select([sock], [], [], 0)[0]:
                    break  # the server answered: stop sending
                sock.sendall(frame)
                sent += 1
            if sent >= total_mb:
                sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass
        try:
            reply = sock.recv(64)
        except OSError:
            return None, sent
    parts = reply.split(b" ", 2)
    return (int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None), sent


def hostile(http: httpx.Client, base: str, port: int, keys: dict[str, dict[str, str]],
            mode: Mode, tally: Tally, server_pid: int) -> dict[str, Any]:
    a = f"{base}/v1/collections/rel_a"
    reader, admin = keys["a_reader"], keys["a_admin"]
    json_ct = {"content-type": "application/json"}
    bodies = {
        "non-JSON numbers": [b'{"F": "fire", "top_k": NaN}', b'{"F": "fire", "threshold": '
                             b'Infinity}', b'{"F": "x", "filters": {"metadata": [{"key": "y", '
                             b'"value": -Infinity}]}}'],
        "lone surrogates": [b'{"F": "\\ud800"}', b'{"F": "x", "\\udfff": 1}',
                            b'{"F": "x", "corpora": ["\\ud800"]}'],
        "oversized inputs": [json.dumps({"F": "x" * 5_000_000}).encode(),
                             json.dumps({"F": "x", "corpora": ["c" * 150] * 60}).encode(),
                             json.dumps({"F": "x", "filters": {"metadata": [
                                 {"key": "k" * 5000, "value": 1}] * 40}}).encode()],
    }
    longest = 0
    for kind, raws in bodies.items():
        for endpoint, name in (("search", b"query"), ("answer", b"question")):
            for raw in raws:
                resp = http.post(f"{a}/{endpoint}", content=raw.replace(b'"F"', b'"' + name
                                 + b'"'), headers={**reader, **json_ct})
                tally.add(kind, resp.status_code, resp.text)
                longest = max(longest, len(resp.content))
    nested = b"[" * 100_000 + b"]" * 100_000
    uploads = {
        "upload names": [("n" * 300 + ".jsonl", b'{"_id": "u-long", "text": "long name"}\n'),
                         ("\u0645\u0644\u0641.jsonl", b'{"_id": "u-ar", "text": "arabic"}\n')],
        "bad file content": [("nul.jsonl", b'{"_id": "u-nul", "text": "a \\u0000 b"}\n'),
                             ("nul.txt", b"text \x00 with a NUL\n"),
                             ("surrogate.jsonl", b'{"_id": "u-s", "text": "\\ud800"}\n'),
                             ("deep.jsonl", b'{"_id": "u-d", "m": ' + nested + b"}\n")],
    }
    for kind, files in uploads.items():
        for filename, data in files:
            resp = http.post(f"{a}/documents", headers=admin, files={"files": (filename, data)})
            tally.add(kind, resp.status_code, resp.text)
    before = peak_rss_mb(server_pid)
    hostile_bodies = []
    for label, path, headers in (
            ("search, no key", "/v1/collections/rel_a/search", {}),
            ("search, reader key", "/v1/collections/rel_a/search", reader),
            ("upload, no key", "/v1/collections/rel_a/documents", {})):
        status, sent = chunked_post(port, path, headers, mode.hostile_mb)
        tally.add("chunked bodies", status or 599, f"{label}: no answer")
        hostile_bodies.append({"request": label, "status": status, "mb_sent": sent,
                               "mb_offered": mode.hostile_mb})
    return {"longest_error_body_bytes": longest, "hostile_bodies": hostile_bodies,
            "peak_rss_mb_before": before, "peak_rss_mb_after": peak_rss_mb(server_pid)}


# --- isolation and filters ----------------------------------------------------------------------


def cross_collection(http: httpx.Client, base: str, keys: dict[str, dict[str, str]],
                     tally: Tally) -> int:
    """Reads of rel_b's content by a rel_a key, or of rel_a's by a rel_b key (goal 0)."""
    reads = 0
    for col, key in (("rel_a", keys["b_reader"]), ("rel_b", keys["a_reader"]),
                     ("rel_b", keys["a_admin"])):
        for endpoint, body in (("search", {"query": "fire"}), ("answer", {"question": "fire"})):
            resp = http.post(f"{base}/v1/collections/{col}/{endpoint}", headers=key, json=body)
            tally.add("cross-collection", resp.status_code, resp.text)
            reads += resp.status_code == 200
        resp = http.get(f"{base}/v1/collections/{col}/snapshots", headers=key)
        tally.add("cross-collection", resp.status_code, resp.text)
        reads += resp.status_code == 200
    for endpoint, field_name in (("search", "query"), ("answer", "question")):
        resp = http.post(f"{base}/v1/collections/rel_a/{endpoint}", headers=keys["a_reader"],
                         json={field_name: SECRET, "top_k": 20})
        tally.add("cross-collection", resp.status_code, resp.text)
        if resp.status_code == 200:  # the query is echoed back: look at the passages only
            data = resp.json()
            items = data["hits"] if endpoint == "search" else data["sources"]
            reads += any("zanzibar" in json.dumps(item) or "b-secret" in json.dumps(item)
                         for item in items)
    # The embedding cache: an admin of rel_a uploads rel_b's exact text.
    resp = http.post(f"{base}/v1/collections/rel_a/documents", headers=keys["a_admin"],
                     files={"files": ("guess.jsonl", json.dumps({"_id": "guess",
                                                                 "text": SECRET}) + "\n")})
    tally.add("cross-collection", resp.status_code, resp.text)
    if resp.status_code == 201:
        reads += resp.json()["report"]["cached"] > 0
    return reads


def _random_filters(rng: random.Random, first: str, last: str) -> dict[str, Any]:
    start, end = dt.date.fromisoformat(first), dt.date.fromisoformat(last)
    cutoff = start + dt.timedelta(days=rng.randint(0, (end - start).days))
    body: dict[str, Any] = {"top_k": rng.choice([10, 20]),
                            "mode": rng.choice(["keyword", "vector", "hybrid"]),
                            "cutoff": cutoff.isoformat()}
    if rng.random() < 0.5:
        body["corpora"] = [rng.choice("AB")]
    return body


WORDS = ("fire", "king", "office", "wife", "money", "church", "dinner", "Duke", "fleet",
         "plague", "coach", "river", "letter", "house", "music", "play", "court", "night")


def _leaks(items: list[dict[str, Any]], body: dict[str, Any]) -> tuple[int, int]:
    leaks = 0
    for item in items:
        date = item.get("date")
        late = date is None or date > body["cutoff"]
        leaks += late or ("corpora" in body and item.get("corpus") not in body["corpora"])
    return len(items), leaks


def filtered(base: str, setup: dict[str, Any], mode: Mode, tally: Tally) -> dict[str, int]:
    """Random filtered searches and answers, four at a time, until enough hits were checked."""
    rng = random.Random(7)
    counts = Counter[str]()
    deadline = time.monotonic() + mode.filtered_s
    lock = threading.Lock()

    def one(seed: int) -> None:
        local = random.Random(seed)
        body = _random_filters(local, setup["first"], setup["last"])
        endpoint = local.choice(["search", "answer"])
        words = " ".join(local.sample(WORDS, 2))
        payload = {**body, ("query" if endpoint == "search" else "question"): words}
        resp = httpx.post(f"{base}/v1/collections/rel_a/{endpoint}",
                          headers=setup["keys"]["a_reader"], json=payload, timeout=60)
        tally.add("filtered", resp.status_code, resp.text)
        if resp.status_code != 200:
            return
        data = resp.json()
        items = data["hits"] if endpoint == "search" else data["sources"]
        checked, leaks = _leaks(items, body)
        with lock:
            counts["requests"] += 1
            counts["hits_checked"] += checked
            counts["leaks"] += leaks

    with cf.ThreadPoolExecutor(4) as pool:
        while counts["hits_checked"] < mode.filtered_hits and time.monotonic() < deadline:
            list(pool.map(one, [rng.randrange(1 << 30) for _ in range(8)]))
    return dict(counts)


def churn(base: str, keys: dict[str, dict[str, str]], mode: Mode, tally: Tally) -> dict[str, int]:
    """Activation flips between snapshots 1 and 2 while readers search and answer; a response
    whose passages are not all of the snapshot it names is a mixed answer (goal 0)."""
    stop = time.monotonic() + mode.churn_s
    counts = Counter[str]()
    lock = threading.Lock()
    url = f"{base}/v1/collections/rel_churn"

    def flipper() -> None:
        target = 2
        while time.monotonic() < stop:
            resp = httpx.post(f"{url}/snapshots/{target}/activate", headers=keys["churn_admin"],
                              timeout=60)
            tally.add("activation churn", resp.status_code, resp.text)
            with lock:
                counts["activations"] += resp.status_code == 200
            target = 3 - target
            time.sleep(0.05)

    def reader(index: int) -> None:
        http = httpx.Client(headers=keys["churn_admin"], timeout=60)
        while time.monotonic() < stop:
            endpoint = ("search", "answer")[index % 2]
            field_name = "query" if endpoint == "search" else "question"
            resp = http.post(f"{url}/{endpoint}", json={field_name: "office coach", "top_k": 8})
            tally.add("activation churn", resp.status_code, resp.text)
            if resp.status_code != 200:
                continue
            data = resp.json()
            texts = [h["text"] for h in data["hits"]] if endpoint == "search" else [
                s["excerpt"] for s in data["sources"]]
            own = CHURN_TAGS.get(data["snapshotId"], "?")
            mixed = any(not t.startswith(own) for t in texts)
            with lock:
                counts["responses"] += 1
                counts["mixed"] += mixed
        http.close()

    threads = [threading.Thread(target=flipper)] + [
        threading.Thread(target=reader, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return dict(counts)


# --- fuzzing ------------------------------------------------------------------------------------


def fuzz(base: str, keys: dict[str, dict[str, str]], mode: Mode, tally: Tally) -> dict[str, Any]:
    try:
        import schemathesis
        from hypothesis import HealthCheck, given, settings
        from hypothesis import strategies as st
        from schemathesis import GenerationMode
        from schemathesis.core.result import Ok
    except ImportError:
        return {"skipped": "schemathesis is not installed (pip install -e '.[dev]')"}
    schema = schemathesis.openapi.from_url(f"{base}/openapi.json")
    ops = []
    for r in schema.get_all_operations():
        if not isinstance(r, Ok):  # an operation the schema cannot describe: the service's bug
            raise r.err()
        ops.append(r.ok())
    keyed = {k: v for k, v in keys["a_admin"].items()}
    strategies = [op.as_strategy(m, path_parameters={"collection": "rel_a"}, headers=keyed)
                  for op in ops for m in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)]
    strategies += [op.as_strategy(GenerationMode.POSITIVE) for op in ops]
    deadline = time.monotonic() + mode.fuzz_s
    cases = Counter[str]()

    @settings(max_examples=mode.fuzz_examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=st.one_of(strategies))
    def run(case: Any) -> None:
        if time.monotonic() > deadline:
            return
        try:
            response = case.call(base_url=base, timeout=60)
        except Exception as exc:  # a dropped connection is what the fuzz is looking for
            tally.add("schemathesis", 599, f"{case.method} {case.formatted_path}: {exc}")
            cases["dropped"] += 1
            return
        tally.add("schemathesis", response.status_code,
                  f"{case.method} {case.formatted_path}: {response.text[:200]}")
        cases["cases"] += 1

    started = time.monotonic()
    run()
    return {"cases": cases["cases"], "dropped": cases["dropped"],
            "seconds": round(time.monotonic() - started, 1)}


# --- kill -9 ------------------------------------------------------------------------------------


def _active(url: str, collection: str) -> tuple[int, int]:
    """(active snapshot id, documents in it), read on a fresh connection."""
    with psycopg.connect(url, connect_timeout=5) as conn:
        row = conn.execute(sql.SQL(
            "SELECT s.snapshot_id, s.n_documents FROM {s}.active a"
            " JOIN {s}.snapshots s USING (snapshot_id)").format(
                s=sql.Identifier(f"pgc_{collection}"))).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def _recover(http: httpx.Client, base: str, keys: dict[str, dict[str, str]], limit_s: float,
             tally: Tally, kind: str) -> float | None:
    """Seconds until a search answers 200 again (None: not within ``limit_s``)."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        try:
            resp = http.post(f"{base}/v1/collections/rel_a/search", headers=keys["a_reader"],
                             json={"query": "fire", "top_k": 3}, timeout=10)
            tally.add(kind, resp.status_code, resp.text)
            if resp.status_code == 200 and resp.json()["hits"]:
                return round(time.monotonic() - started, 2)
        except httpx.HTTPError as exc:
            tally.add(kind, 599, f"{type(exc).__name__}")
        time.sleep(0.2)
    return None


def kill_ingest(data_dir: Path, url: str, work: Path, mode: Mode) -> dict[str, Any]:
    """Kill an ingest mid-embedding; the collection must be as it was, the rerun must resume."""
    records = [{"_id": f"k-{i}", "date": "1666-11-01", "corpus": "A",
                "text": f"Entry {i}. " + " ".join(random.Random(i).sample(WORDS, 12)) * 3}
               for i in range(mode.kill_docs)]
    path = _jsonl(work / "kill.jsonl", records)
    before = _active(url, "rel_a")
    cmd = [sys.executable, "-c", "from pgcite.cli import main; main()", "--data-dir",
           str(data_dir), "ingest", "rel_a", str(path), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, cached = time.monotonic() + 120, 0
    while time.monotonic() < deadline and proc.poll() is None:
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT count(*) FROM pgcite.embedding_cache"
                               " WHERE collection = 'rel_a'").fetchone()
        if row and row[0] > cached and cached:
            break  # embedding is under way: kill it now
        cached = cached or (row[0] if row else 0)
        time.sleep(0.2)
    finished_first = proc.poll() is not None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    after = _active(url, "rel_a")
    started = time.monotonic()
    rerun = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=600)
    report = json.loads(rerun.stdout) if rerun.returncode == 0 else {}
    return {"finished_before_kill": finished_first, "active_before": before,
            "active_after_kill": after, "lost": int(not finished_first and after != before),
            "rerun_s": round(time.monotonic() - started, 1), "rerun_ok": rerun.returncode == 0,
            "rerun_embedded": report.get("embedded"), "rerun_cached": report.get("cached")}


def _backend_pids(url: str) -> list[int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE backend_type ="
                            " 'client backend' AND pid <> pg_backend_pid()").fetchall()
    return [int(r[0]) for r in rows]


def kill_backend(http: httpx.Client, base: str, url: str, keys: dict[str, dict[str, str]],
                 limit_s: float, tally: Tally) -> dict[str, Any]:
    before = _active(url, "rel_a")
    pids = _backend_pids(url)
    if not pids:
        return {"skipped": "no client backend to kill"}
    os.kill(pids[0], signal.SIGKILL)  # PostgreSQL then resets every backend (crash recovery)
    seconds = _recover(http, base, keys, limit_s, tally, "after backend kill")
    after = _active(url, "rel_a") if seconds is not None else None
    return {"recovered_s": seconds, "lost": int(after is not None and after != before),
            "active_before": before, "active_after": after}


def kill_postmaster(http: httpx.Client, base: str, data_dir: Path,
                    keys: dict[str, dict[str, str]], limit_s: float,
                    tally: Tally) -> dict[str, Any]:
    pidfile = data_dir / "pg18" / "postmaster.pid"
    if not pidfile.exists():
        return {"skipped": "no embedded postmaster (PGCITE_DATABASE_URL?)"}
    pid = int(pidfile.read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    seconds = _recover(http, base, keys, limit_s, tally, POSTMASTER_KIND)
    return {"recovered_s": seconds, "waited_s": limit_s,
            "statuses": dict(tally.status.get(POSTMASTER_KIND, {}))}


# --- the run ------------------------------------------------------------------------------------


def run(mode: Mode, args: argparse.Namespace, data_dir: Path, work: Path) -> dict[str, Any]:
    tally = Tally()
    timings: dict[str, float] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        started = time.monotonic()
        out = fn()
        timings[name] = round(time.monotonic() - started, 1)
        print(f"  {name}: {timings[name]} s", file=sys.stderr)
        return out

    with pgcite.Client(pgcite.Settings(data_dir=data_dir, database_url=None)) as client:
        setup = timed("setup", lambda: build(client, work, mode))
        cost = timed("cache scope cost", lambda: cache_scope_cost(client, work / "a.jsonl"))
        url = client.db.url
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(data_dir, port)
    results: dict[str, Any] = {"cache_scope_cost": cost}
    try:
        timed("server start", lambda: wait_ready(base, server))
        keys = setup["keys"]
        with httpx.Client(timeout=60) as http:
            results["hostile"] = timed("hostile", lambda: hostile(
                http, base, port, keys, mode, tally, server.pid))
            results["cross_collection_reads"] = timed("cross-collection", lambda: (
                cross_collection(http, base, keys, tally)))
            results["filtered"] = timed("filtered", lambda: filtered(base, setup, mode, tally))
            results["churn"] = timed("churn", lambda: churn(base, keys, mode, tally))
            results["fuzz"] = timed("fuzz", lambda: fuzz(base, keys, mode, tally))
            results["kill_ingest"] = timed("kill ingest", lambda: kill_ingest(
                data_dir, url, work, mode))
            results["kill_backend"] = timed("kill backend", lambda: kill_backend(
                http, base, url, keys, mode.recover_s, tally))
            results["kill_postmaster"] = timed("kill postmaster", lambda: kill_postmaster(
                http, base, data_dir, keys, mode.recover_s, tally))
            metrics = http.get(f"{base}/metrics").text
        results["metrics_5xx"] = sum(
            float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
            if line.startswith("pgcite_http_requests_total{") and 'status="5' in line)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    results["requests"] = {k: {"sent": n, "statuses": {str(s): c for s, c in sorted(
        tally.status[k].items())}} for k, n in sorted(tally.sent.items())}
    results["five_xx"] = tally.five_xx()
    # Without supervision nothing restarts the database: requests then wait out the pool's
    # timeout. Counted apart, and a goal only with --expect-supervision.
    results["five_xx_outside_postmaster_kill"] = tally.five_xx(excluding=(POSTMASTER_KIND,))
    results["five_xx_samples"] = tally.samples
    results["timings_s"] = timings
    return results


def goals(r: dict[str, Any], mode_name: str, expect_supervision: bool) -> dict[str, int]:
    """Each goal figure; every one must be 0."""
    out = {
        "5xx (503 aside; no answer counts as 599)": r["five_xx"] if expect_supervision
        else r["five_xx_outside_postmaster_kill"],
        "cross-collection reads": r["cross_collection_reads"],
        "cutoff/corpus leaks": r["filtered"].get("leaks", 0),
        "mixed-snapshot answers": r["churn"].get("mixed", 0),
        "lost on kill -9": r["kill_ingest"]["lost"] + r["kill_backend"].get("lost", 0),
        "backend kill not recovered": int(r["kill_backend"].get("recovered_s") is None),
        "ingest rerun failed": int(not r["kill_ingest"]["rerun_ok"]),
        "hostile bodies answered late or not": sum(
            b["status"] is None or b["mb_sent"] > 64 for b in r["hostile"]["hostile_bodies"]),
    }
    if mode_name == "long":
        out["filtered hits short of 10,000"] = max(0, 10000 - r["filtered"].get(
            "hits_checked", 0))
    if expect_supervision:
        recovered = r["kill_postmaster"].get("recovered_s")
        out["postmaster kill not recovered in 10 s"] = int(recovered is None or recovered > 10)
    return out


def report_md(r: dict[str, Any]) -> str:
    g, h = r["goals"], r["hostile"]
    lines = ["# Reliability probe", "",
             f"`{r['command']}` ({r['mode']} mode), {r['machine']['cpus']} CPUs, server and "
             f"probe on one machine; {r['wall_s']} s in all.", "",
             "## Goal figures (each must be 0)", "", "| figure | value |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in g.items()]
    lines += ["", "## Requests per class", "", "| class | sent | statuses |", "|---|---:|---|"]
    lines += [f"| {k} | {v['sent']} | " + ", ".join(f"{s}×{n}" for s, n in v["statuses"].items())
              + " |" for k, v in r["requests"].items()]
    f, c = r["filtered"], r["churn"]
    lines += ["", "## Filters, snapshots, kills", "",
              f"- Filtered searches and answers: {f.get('requests', 0)} requests, "
              f"{f.get('hits_checked', 0)} hits checked against their cutoff and corpora, "
              f"{f.get('leaks', 0)} leaks.",
              f"- Activation churn: {c.get('activations', 0)} activations, "
              f"{c.get('responses', 0)} responses checked, {c.get('mixed', 0)} mixed.",
              f"- kill -9 of an ingest: {json.dumps(r['kill_ingest'])}.",
              f"- kill -9 of a backend: {json.dumps(r['kill_backend'])}.",
              f"- kill -9 of the postmaster: {json.dumps(r['kill_postmaster'])}.",
              f"- schemathesis: {json.dumps(r['fuzz'])}.",
              f"- 5xx counted by /metrics: {r['metrics_5xx']:.0f} (503s included).",
              "", "## Memory and error bodies", "",
              f"- Server peak RSS {h['peak_rss_mb_before']} MB before the hostile bodies, "
              f"{h['peak_rss_mb_after']} MB after: "
              + "; ".join(f"{b['request']}: {b['status']} after {b['mb_sent']} of "
                          f"{b['mb_offered']} MB" for b in h["hostile_bodies"]) + ".",
              f"- Longest error body: {h['longest_error_body_bytes']} bytes.",
              "", "## Cost of a per-collection embedding cache", "",
              f"- {json.dumps(r['cache_scope_cost'])}", ""]
    if r["five_xx_samples"]:
        lines += ["## 5xx samples", ""] + [f"- `{s}`" for s in r["five_xx_samples"]] + [""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="the CI mode (about 3 min)")
    parser.add_argument("--expect-supervision", action="store_true",
                        help="count a postmaster kill not recovered within 10 s as a failure")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    mode_name = "short" if args.short else "long"
    mode = SHORT if args.short else LONG
    # its servers stop with their last process (no keeper keeps them warm): it deletes their
    # data directory at the end, and checks that nothing is left running
    os.environ.setdefault("PGCITE_SERVER_IDLE_S", "0")
    started = time.monotonic()
    # A SIGTERM (a CI timeout) unwinds like an exception: the server child is stopped, the
    # temporary directory removed, and the embedded database stopped by its exit handler.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix="pgcite-reliability-"))
    try:
        result = run(mode, args, work / "data", work)
    finally:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    result.update(mode=mode_name, wall_s=round(time.monotonic() - started, 1),
                  command=" ".join(["bench/reliability.py", *sys.argv[1:]]),
                  machine={"cpus": os.cpu_count()})
    result["goals"] = goals(result, mode_name, args.expect_supervision)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    (args.out / "report.md").write_text(report_md(result))
    failed = {k: v for k, v in result["goals"].items() if v}
    print(f"wrote {args.out}/summary.json, report.md; {result['wall_s']} s", file=sys.stderr)
    if failed:
        print(f"goal figures not 0: {failed}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
