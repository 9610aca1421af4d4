"""Read replicas and service workers under load, on loopback: an embedded primary plus two hot
standbys started from the wheel's own binaries (``pg_basebackup -R``), `pgcite serve` with
PGCITE_READ_URLS, 32 concurrent HTTP clients POSTing /answer (extractive).

1. **Throughput**: 0, 1, 2 replicas x 1, 2 workers, ``--seconds`` each.
2. **Baseline**: the switch phase's load without any switch: what fails or is slow there is
   the machine, not the switches. Each failed try is an error (a non-200 from the service, a
   refused or reset connection) or a client timeout (no answer in 60 s: only slowness).
3. **Switches**: 2 replicas; a second snapshot is activated and rolled back three times during
   load. Every answer is checked: its sources all belong to the snapshot it names (no mixing),
   and that snapshot was active on some node (primary or a standby, polled every 20 ms) during
   the request. Activation lag to each standby: p50 / p95 over the switches.
4. **Standby killed** (kill -9) a third of the way in, restarted at two thirds: failed requests
   are counted and retried by the client; lost = those that failed even after 3 tries.
5. **Primary killed** (kill -9): reads go on from the replicas; a write (an activation) must
   fail with a clear error (a 503 saying the database is unavailable, not a hang or a 500).

The service names the primary by URL (PGCITE_DATABASE_URL), so it does not restart it itself
(the embedded supervisor would). Everything shares this machine's cores: the load generator,
the service workers, the primary and both standbys.

    python bench/replicas.py                    # 15 s per throughput cell, 20 s per phase
    python bench/replicas.py --seconds 8 --phase-seconds 12 --matrix 0:1,1:1,2:1,2:2
    python bench/replicas.py --entries 20 --seconds 5 --phases ''   # the matrix only

Writes bench/results/replicas/{summary.json,report.md}. Exit status 1 if a goal figure (errors
-- not client timeouts -- in the switch phase, mixed answers, answers from a snapshot not active on any node, requests
lost, reads failing with the primary dead) is not 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
from _common import free_port, wait_ready
from psycopg import sql

import pgcite
from pgcite.cli._demo import SAMPLE_QUESTIONS, sample_path
from pgcite.store._server import embedded_server, restart_server, server_alive
from pgcite.store._standby import Standby, start_standby, stop_standby

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "replicas"
NAME = "pepys"
QUESTIONS = [q for q, _ in SAMPLE_QUESTIONS] + [
    "What did Pepys do on the day the fire began?",
    "Who was the Lord Mayor during the fire?",
    "What did Pepys think of Isaac Newton's theory of gravity?",
]
MARK = "[second snapshot] "
CLIENT_TIMEOUT_S = 60.0  # a try slower than this is a client timeout, not a service error


# --- the cluster ----------------------------------------------------------------------------


def prepare(data_dir: Path, entries: int) -> tuple[int, int]:
    """Snapshot A (the sample's first ``entries``) active, snapshot B (every third entry
    edited) built inactive."""
    rows = [json.loads(line) for line in sample_path().read_text().splitlines() if line]
    rows = rows[:entries]
    original = data_dir / "original.jsonl"
    original.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pgcite.Client(pgcite.Settings(data_dir=data_dir)) as client:
        col = client.create_collection(NAME)
        a = col.ingest([original]).snapshot_id
        for i, row in enumerate(rows):
            if i % 3 == 0:
                row["text"] = MARK + row["text"]
        edited = data_dir / "edited.jsonl"
        edited.write_text("".join(json.dumps(r) + "\n" for r in rows))
        b = col.ingest([edited], replace=True, activate=False).snapshot_id
    assert a is not None and b is not None
    return a, b


def snapshot_bodies(url: str, snapshot_id: int) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        schema = _schema(conn)
        rows = conn.execute(sql.SQL(
            "SELECT c.id, c.body FROM {s}.chunks c JOIN {s}.snapshot_members m"
            " USING (version_pk) WHERE m.snapshot_id = %s").format(s=sql.Identifier(schema)),
            (snapshot_id,)).fetchall()
    return {i: b for i, b in rows}


def _schema(conn: psycopg.Connection) -> str:
    row = conn.execute("SELECT schema_name FROM pgcite.collections WHERE name = %s",
                       (NAME,)).fetchone()
    assert row is not None
    return str(row[0])


def start_service(primary_url: str, replicas: list[Standby], workers: int,
                  data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "PGCITE_DATABASE_URL": primary_url, "PGCITE_DATA_DIR": str(data_dir),
           "PGCITE_READ_URLS": ",".join(s.url for s in replicas)}
    args = [sys.executable, "-c", "from pgcite.cli import main; main()", "serve", "--no-auth",
            "--port", str(port),
            "--workers", str(workers), "--log-level", "warning"]
    server = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    wait_ready(base, server, timeout_s=400)
    return server, base


def stop_service(server: subprocess.Popen[bytes]) -> None:
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()


# --- the load -------------------------------------------------------------------------------


async def _client(http: httpx.AsyncClient, url: str, index: int, deadline: float,
                  out: list[dict[str, Any]]) -> None:
    i = index
    while time.perf_counter() < deadline:
        question = QUESTIONS[i % len(QUESTIONS)]
        i += 1
        failures, status, body = 0, 0, None
        kinds: list[str] = []  # what each failed try was (see failure_kinds)
        started = time.perf_counter()
        for _ in range(3):  # a failed request is counted, then retried
            try:
                response = await http.post(url, json={"question": question})
                status = response.status_code
                if status == 200:
                    body = response.json()
                    break
                kinds.append(f"http {status}: {_detail(response)}")
            except httpx.TimeoutException:
                status = -1
                kinds.append("client timeout")  # slowness, not an error the service gave
            except httpx.HTTPError as exc:
                status = -1
                kinds.append(f"client {type(exc).__name__}")
            failures += 1
        out.append({"start": started, "end": time.perf_counter(), "status": status,
                    "failures": failures, "kinds": kinds, "snapshot": body and body["snapshotId"],
                    "sources": body and [(s["id"], s["excerpt"]) for s in body["sources"]]})


def _detail(response: httpx.Response) -> str:
    try:
        return str(response.json().get("detail"))[:80]
    except ValueError:
        return response.text[:80]


async def _load(base: str, clients: int, seconds: float) -> list[dict[str, Any]]:
    url = f"{base}/v1/collections/{NAME}/answer"
    out: list[dict[str, Any]] = []
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(timeout=CLIENT_TIMEOUT_S, limits=limits) as http:
        deadline = time.perf_counter() + seconds
        await asyncio.gather(*(_client(http, url, i, deadline, out) for i in range(clients)))
    return out


def load(base: str, clients: int, seconds: float) -> list[dict[str, Any]]:
    return asyncio.run(_load(base, clients, seconds))


def throughput(rows: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    ok = [r for r in rows if r["status"] == 200]
    latencies = sorted((r["end"] - r["start"]) * 1000 for r in ok)
    # over the load's real span: requests begun before the deadline finish after it (tens of
    # seconds under overload), so answers / ``seconds`` overstated the rate several times
    wall = max((r["end"] for r in rows), default=0.0) - min((r["start"] for r in rows),
                                                            default=0.0)
    wall = max(wall, seconds)
    return {"requests": len(rows), "ok": len(ok), "rps": round(len(ok) / wall, 2),
            "wall_s": round(wall, 1),
            "p50_ms": _pct(latencies, 50), "p95_ms": _pct(latencies, 95),
            "failed_tries": sum(r["failures"] for r in rows),
            "lost": sum(1 for r in rows if r["status"] != 200),
            "failures": failure_kinds(rows)}


def failure_kinds(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Failed tries split into errors (a 5xx or other non-200 the service gave, a refused or
    reset connection) and client timeouts (only slowness), with each kind's count."""
    kinds: dict[str, int] = {}
    for r in rows:
        for kind in r.get("kinds", []):
            kinds[kind] = kinds.get(kind, 0) + 1
    timeouts = kinds.get("client timeout", 0)
    return {"errors": sum(kinds.values()) - timeouts, "client_timeouts": timeouts,
            "by_kind": kinds}


def _pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(len(values) * p / 100))], 1)


# --- the pointer timeline -------------------------------------------------------------------


class Poller:
    """Each node's active pointer every 20 ms: (time, snapshot id) at every change."""

    def __init__(self, nodes: dict[str, str]) -> None:
        self.nodes = nodes
        self.changes: dict[str, list[tuple[float, int | None]]] = {n: [] for n in nodes}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._poll, args=(n,), daemon=True)
                         for n in nodes]

    def __enter__(self) -> Poller:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()

    def _poll(self, node: str) -> None:
        last: int | None = -1
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.nodes[node], autocommit=True) as conn:
                    query = sql.SQL("SELECT snapshot_id FROM {}.active").format(
                        sql.Identifier(_schema(conn)))
                    while not self._stop.is_set():
                        row = conn.execute(query).fetchone()
                        value = row[0] if row else None
                        if value != last:
                            self.changes[node].append((time.perf_counter(), value))
                            last = value
                        time.sleep(0.02)
            except psycopg.Error:
                time.sleep(0.1)

    def active_during(self, start: float, end: float, slack: float = 0.03) -> set[int | None]:
        """Every snapshot some node had active at some moment of [start, end] (with the
        polling interval as slack)."""
        seen: set[int | None] = set()
        for changes in self.changes.values():
            before = [v for t, v in changes if t <= start - slack]
            if before:
                seen.add(before[-1])
            seen.update(v for t, v in changes if start - slack < t <= end + slack)
        return seen

    def lags(self, primary: str) -> list[float]:
        """For each change of the primary's pointer, the time until each standby showed it."""
        out = []
        for t0, value in self.changes[primary][1:]:
            for node, changes in self.changes.items():
                if node == primary:
                    continue
                seen = next((t for t, v in changes if t >= t0 - 0.02 and v == value), None)
                if seen is not None:
                    out.append(max(0.0, seen - t0) * 1000)
        return out


def switcher(primary_url: str, a: int, b: int, seconds: float, log: list[float]) -> None:
    """Activate B and roll back to A three times, evenly over ``seconds``."""
    step = seconds / 7
    with pgcite.Client(pgcite.Settings(database_url=primary_url)) as client:
        col = client.collection(NAME)
        for _ in range(3):
            time.sleep(step)
            col.activate(b)
            log.append(time.perf_counter())
            time.sleep(step)
            col.rollback()
            log.append(time.perf_counter())


def check_answers(rows: list[dict[str, Any]], bodies: dict[int, dict[str, str]],
                  poller: Poller) -> dict[str, int]:
    mixed = not_active = 0
    for r in rows:
        if r["status"] != 200:
            continue
        known = bodies.get(r["snapshot"], {})
        if any(i not in known or _excerpt_core(e) not in known[i] for i, e in r["sources"]):
            mixed += 1
        if r["snapshot"] not in poller.active_during(r["start"], r["end"]):
            not_active += 1
    return {"mixed": mixed, "not_active_on_any_node": not_active}


def _excerpt_core(excerpt: str) -> str:
    words = re.sub(r"\s+", " ", excerpt.strip(" ….")).split(" ")
    return " ".join(words[1:8]) if len(words) > 8 else " ".join(words)


# --- the phases -----------------------------------------------------------------------------


def phase_switches(base: str, primary_url: str, standbys: list[Standby], a: int, b: int,
                   args: argparse.Namespace, *, switch: bool = True) -> dict[str, Any]:
    """The load with activations and rollbacks (``switch``), or the same load without any
    (the baseline: what fails there is the machine's load, not the switches)."""
    bodies = {a: snapshot_bodies(primary_url, a), b: snapshot_bodies(primary_url, b)}
    nodes = {"primary": primary_url, **{f"standby-{s.port}": s.url for s in standbys}}
    log: list[float] = []
    with Poller(nodes) as poller:
        time.sleep(0.3)
        thread = threading.Thread(target=switcher, args=(primary_url, a, b, args.phase_seconds,
                                                         log))
        if switch:
            thread.start()
        rows = load(base, args.clients, args.phase_seconds)
        if switch:
            thread.join()
        time.sleep(0.5)
    lags = poller.lags("primary")
    out = {**throughput(rows, args.phase_seconds), **check_answers(rows, bodies, poller),
           "switches": len(log), "answers_per_snapshot": {
               str(s): sum(1 for r in rows if r["snapshot"] == s) for s in (a, b)},
           "lag_ms_p50": _pct(lags, 50), "lag_ms_p95": _pct(lags, 95),
           "lag_samples": len(lags), "metrics": replica_metrics(base)}
    return out


def phase_kill_standby(base: str, data_dir: Path, standby: Standby,
                       args: argparse.Namespace) -> dict[str, Any]:
    events: dict[str, float] = {}

    def chaos() -> None:
        time.sleep(args.phase_seconds / 3)
        assert standby.pid is not None
        os.kill(standby.pid, signal.SIGKILL)
        events["killed"] = time.perf_counter()
        time.sleep(args.phase_seconds / 3)
        start_standby(data_dir, standby.port)
        events["restarted"] = time.perf_counter()

    thread = threading.Thread(target=chaos)
    thread.start()
    rows = load(base, args.clients, args.phase_seconds)
    thread.join()
    time.sleep(2)
    before = replica_metrics(base)
    rows_after = load(base, args.clients, 3)  # does the restarted standby take reads again?
    after = replica_metrics(base)
    label = f"standby-{standby.port}:{standby.port}"
    return {**throughput(rows, args.phase_seconds),
            "restarted_standby_up": after.get(f"up:{label}"),
            "restarted_standby_reads_after": (after.get(f"reads:{label}", 0)
                                              - before.get(f"reads:{label}", 0)),
            "after_restart_ok": sum(1 for r in rows_after if r["status"] == 200)}


def phase_kill_primary(base: str, primary: Any, a: int, args: argparse.Namespace) -> dict[str, Any]:
    pid = primary.get_pid()
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while server_alive(primary) and time.monotonic() < deadline:
        time.sleep(0.05)
    rows = load(base, args.clients, args.phase_seconds / 2)
    started = time.perf_counter()
    write = httpx.post(f"{base}/v1/collections/{NAME}/snapshots/{a}/activate", timeout=60)
    out = {**throughput(rows, args.phase_seconds / 2), "write_status": write.status_code,
           "write_seconds": round(time.perf_counter() - started, 2),
           "write_error": write.json().get("detail") if write.headers.get(
               "content-type", "").startswith("application/json") else write.text[:200]}
    restart_server(primary, within_s=30)
    return out


def replica_metrics(base: str) -> dict[str, float]:
    """pgcite_replica_* and pgcite_reads_total from one worker's /metrics."""
    try:  # an overloaded service may not answer in time: the figures are then missing
        text = httpx.get(f"{base}/metrics", timeout=60).text
    except httpx.HTTPError:
        return {}
    out: dict[str, float] = {}
    for name, key in (("pgcite_replica_up", "up"), ("pgcite_replica_lag_bytes", "lag_bytes"),
                      ("pgcite_replica_lag_seconds", "lag_s"), ("pgcite_reads_total", "reads")):
        for label, value in re.findall(rf'^{name}{{\w+="([^"]+)"}} (\S+)$', text, re.M):
            out[f"{key}:{label}"] = float(value)
    return out


# --- main -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=15.0, help="per throughput cell")
    parser.add_argument("--phase-seconds", type=float, default=20.0)
    parser.add_argument("--entries", type=int, default=122,
                        help="diary entries ingested (the sample has 122)")
    parser.add_argument("--phases", default="baseline,switches,kill",
                        help="phases after the matrix, comma-separated ('' = none): baseline "
                        "(load without switches), switches, kill (a standby, then the primary)")
    parser.add_argument("--matrix", default="0:1,1:1,2:1,0:2,1:2,2:2",
                        help="throughput cells as replicas:workers, comma-separated ('' = none)")
    args = parser.parse_args()
    # SIGTERM (timeout, kill) ends the run through the finally below: standbys and service stop
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    data_dir = Path(tempfile.mkdtemp(prefix="pgcb-"))  # short: standby socket paths
    primary = embedded_server(data_dir)
    primary_url = primary.get_uri()
    standbys: list[Standby] = []
    server = None
    summary: dict[str, Any] = {
        "command": "python bench/replicas.py " + " ".join(a or "''" for a in sys.argv[1:]),
        "clients": args.clients, "seconds": args.seconds, "phase_seconds": args.phase_seconds,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "note": "load generator, service workers, primary and standbys share "
                    "these cores (and, here, other jobs)"}}
    try:
        print("ingesting", file=sys.stderr)
        a, b = prepare(data_dir, args.entries)
        standbys = [start_standby(data_dir, 5433), start_standby(data_dir, 5434)]
        for standby in standbys:
            log_conflict_waits(standby)
        cells = [tuple(int(x) for x in c.split(":")) for c in args.matrix.split(",") if c]
        summary["throughput"] = []
        for count, workers in cells:
            print(f"throughput: {count} replicas, {workers} workers", file=sys.stderr)
            server, base = start_service(primary_url, standbys[:count], workers, data_dir)
            load(base, 4, 2)  # warm up
            rows = load(base, args.clients, args.seconds)
            summary["throughput"].append({"replicas": count, "workers": workers,
                                          **throughput(rows, args.seconds),
                                          "reads": replica_metrics(base)})
            stop_service(server)
            server = None
            save(summary)
        phases = set(args.phases.split(",")) - {""}
        if phases:
            server, base = start_service(primary_url, standbys, 1, data_dir)
            load(base, 4, 2)
        if "baseline" in phases:
            print("baseline (the same load, no switches)", file=sys.stderr)
            summary["baseline"] = phase_switches(base, primary_url, standbys, a, b, args,
                                                 switch=False)
            save(summary)
        if "switches" in phases:
            print("switches", file=sys.stderr)
            summary["switches"] = phase_switches(base, primary_url, standbys, a, b, args)
            save(summary)
        if "kill" in phases:
            print("kill -9 a standby", file=sys.stderr)
            summary["kill_standby"] = phase_kill_standby(base, data_dir, standbys[0], args)
            save(summary)
            print("kill -9 the primary", file=sys.stderr)
            summary["kill_primary"] = phase_kill_primary(base, primary, a, args)
    finally:
        if server is not None:
            stop_service(server)
        summary["standby_log"] = standby_log_counts(standbys)
        for standby in standbys:
            stop_standby(standby)
    save(summary)
    print(report_md(summary))
    shutil.rmtree(data_dir, ignore_errors=True)
    sys.exit(1 if any(goals(summary)) else 0)


def goals(summary: dict[str, Any]) -> list[int]:
    """The figures that must be 0, of the phases that ran: errors (not client timeouts, which
    say the machine is too slow for the load) in the switch phase, mixed answers, answers from
    a snapshot not active on any node, requests lost to a killed standby, reads failing with
    the primary dead, and a write that is not a clear 503 then."""
    out = []
    if "switches" in summary:
        s = summary["switches"]
        out += [s["failures"]["errors"], s["mixed"], s["not_active_on_any_node"]]
    if "kill_standby" in summary:
        out.append(summary["kill_standby"]["lost"])
    if "kill_primary" in summary:
        p = summary["kill_primary"]
        out += [p["lost"], int(p["write_status"] != 503)]
    return out


def log_conflict_waits(standby: Standby) -> None:
    """Have the standby log replay waiting on its queries for over a second (off by default):
    the one cause of a late activation there that its log can show."""
    with (standby.pgdata / "postgresql.auto.conf").open("a") as conf:
        conf.write("log_recovery_conflict_waits = on\n")
    with psycopg.connect(standby.url, autocommit=True) as conn:
        conn.execute("SELECT pg_reload_conf()")


def standby_log_counts(standbys: list[Standby]) -> str:
    """Recovery conflicts in the standbys' logs: replay waiting on (then cancelling) standby
    queries is what would delay an activation's visibility there."""
    counts = {}
    for standby in standbys:
        try:
            text = (standby.pgdata / "log").read_text(errors="replace")
        except OSError:
            continue
        counts[standby.port] = {"conflict with recovery": text.count("conflict with recovery"),
                                "replay waited": text.count("recovery still waiting"),
                                "ERROR": text.count("ERROR:")}
    return ", ".join(f"standby {p}: {c}" for p, c in counts.items())


def save(summary: dict[str, Any]) -> None:
    """Written after every phase: a run cut short still leaves what it measured."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (RESULTS / "report.md").write_text(report_md(summary))


def report_md(r: dict[str, Any]) -> str:
    lines = ["# Read replicas and workers under load", "", f"`{r['command']}`", "",
             f"{r['clients']} concurrent clients POST /answer (extractive) on loopback; "
             f"{r['machine']['cpus']} CPUs shared by the load generator, the service, the "
             "primary and the standbys (and other jobs on this machine). A failed try is an "
             f"**error** (a non-200 the service gave, a refused/reset connection) or a **client "
             f"timeout** (no answer within {CLIENT_TIMEOUT_S:.0f} s: slowness, not an error); "
             "each request is tried 3 times, lost = failed all 3.", ""]
    if r.get("throughput"):
        lines += _throughput_md(r)
    for key, title in (("baseline", "The same load without switches (baseline)"),
                       ("switches", "Activation and rollback x3 during load")):
        if key in r:
            lines += _switches_md(r[key], f"{title} ({r['phase_seconds']} s, 2 replicas)")
    if "kill_standby" in r:
        k = r["kill_standby"]
        lines += ["## kill -9 a standby mid-load, restarted later", "",
                  f"- answers: {k['ok']} ok of {k['requests']}; failed tries (counted, retried) "
                  f"{k['failed_tries']} ({_failures_md(k)}); lost {k['lost']}",
                  f"- the restarted standby: up {k['restarted_standby_up']}, reads after "
                  f"rejoining {k['restarted_standby_reads_after']} (one worker's count)", ""]
    if "kill_primary" in r:
        p = r["kill_primary"]
        lines += ["## kill -9 the primary", "",
                  f"- reads with the primary dead: {p['ok']} ok of {p['requests']}, lost "
                  f"{p['lost']} ({_failures_md(p)})",
                  f"- a write (activation): HTTP {p['write_status']} after "
                  f"{p['write_seconds']} s: {p['write_error']}", ""]
    if r.get("standby_log"):
        lines += ["## Standby logs", "", f"- {r['standby_log']}", ""]
    return "\n".join(lines)


def _failures_md(phase: dict[str, Any]) -> str:
    f = phase.get("failures") or {}
    kinds = ", ".join(f"{k}: {n}" for k, n in f.get("by_kind", {}).items()) or "none"
    return f"errors {f.get('errors', '?')}, client timeouts {f.get('client_timeouts', '?')}; {kinds}"


def _switches_md(s: dict[str, Any], title: str) -> list[str]:
    lines = [f"## {title}", "",
             f"- answers: {s['ok']} ok of {s['requests']} ({s['rps']}/s over "
             f"{s.get('wall_s')} s), latency p50 {s['p50_ms']} ms, p95 "
             f"{s['p95_ms']} ms; {s['answers_per_snapshot']} by snapshot",
             f"- failed tries {s['failed_tries']} ({_failures_md(s)}); lost {s['lost']}",
             f"- answers mixing snapshots: **{s['mixed']}**; answers from a snapshot not active "
             f"on any node during the request: **{s['not_active_on_any_node']}**"]
    if s["switches"]:
        lines.append(f"- switches {s['switches']}; visible on the standbys after p50 "
                     f"{s['lag_ms_p50']} ms, p95 {s['lag_ms_p95']} ms ({s['lag_samples']} "
                     "samples, 20 ms polling)")
    return [*lines, ""]


def _throughput_md(r: dict[str, Any]) -> list[str]:
    lines = [f"## Throughput ({r['seconds']} s per cell)", "",
             "| replicas | workers | answers/s | wall s | p50 ms | p95 ms | errors | client timeouts | "
             "reads by node (one worker's /metrics) |", "|---|---|---|---|---|---|---|---|---|"]
    for c in r["throughput"]:
        reads = ", ".join(f"{k.split(':', 1)[1]} {int(v)}" for k, v in c["reads"].items()
                          if k.startswith("reads:"))
        f = c.get("failures", {})
        lines.append(f"| {c['replicas']} | {c['workers']} | {c['rps']} | {c.get('wall_s')} | "
                     f"{c['p50_ms']} | "
                     f"{c['p95_ms']} | {f.get('errors', '?')} | {f.get('client_timeouts', '?')} "
                     f"| {reads or '-'} |")
    return [*lines, "", *_prediction_md(r["throughput"], r["machine"]["cpus"]), ""]


def _prediction_md(cells: list[dict[str, Any]], cpus: int | None) -> list[str]:
    """What the matrix says for N machines, from its own figures only."""
    by = {(c["replicas"], c["workers"]): c["rps"] for c in cells}
    base = by.get((0, 1))
    best = max(by.values(), default=0.0)
    text = ["**What it predicts for N machines.** On this machine every node shares the same "
            f"{cpus} cores, so adding replicas or workers cannot add CPU: a cell above the "
            "0-replica/1-worker one shows only less contention (connections, the GIL), one "
            "below it the cost of more processes on the same cores."]
    if base:
        text.append(f"Here the best cell gives {best} answers/s against {base} for one worker "
                    f"on the primary alone ({best / base:.2f}x).")
    text.append("An answer is CPU-bound in the service (the extractive answerer embeds every "
                "candidate sentence) far more than in PostgreSQL, and reads share nothing but "
                "the database, so with N machines each running workers (one per core) against "
                "their own replica, answers/s should grow about N times the one-machine "
                "figure until the primary's WAL stream or the load balancer limits it; that is "
                "a prediction from the design, not measured here (one machine, shared cores).")
    return [" ".join(text)]


if __name__ == "__main__":
    main()
