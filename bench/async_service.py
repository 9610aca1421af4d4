"""The HTTP service before (a thread hop per request: sync routes in anyio's thread pool) and
after (search and answer on the async API, model work in a bounded executor), side by side in one
run: N concurrent clients against each, interleaved round by round, on the same database.

    .venv/bin/python bench/async_service.py                      # 32 clients, 3 rounds of 8 s
    .venv/bin/python bench/async_service.py --before efee429 --rounds 5 --seconds 10

"before" is the service's code at ``--before`` (a git revision; default: the last commit before
the async service), extracted to a temporary directory; "after" is this checkout. Both run under
bench/_serve_probe.py, which times every hop to a thread from submission to start: anyio's pool
(sync routes, sync dependencies, sync streaming bodies) and the async API's executor. Reported
per variant and endpoint (median over rounds): latency p50/p95, throughput, errors, and the
thread waits. Writes bench/results/async_service/{summary.json,report.md}; exit 1 on any error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any

import httpx
from _common import wait_ready
from load_http import _free_port, _percentile, _settings, prepare, run_load

import pgcite

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "async_service"
BEFORE = "efee429"  # the last commit whose service ran search and answer in threads
VARIANTS = ("before", "after", "after-w16")


def extract(revision: str, into: Path) -> Path:
    """``src/`` of ``revision``, for the child to import pgcite from."""
    archive = subprocess.run(["git", "archive", revision, "src"], cwd=ROOT.parent, check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def start(src: Path, url: str, port: int, workers: int | None) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(src), "PGCITE_DATABASE_URL": url}
    if workers is not None:
        env["BENCH_WORKERS"] = str(workers)
    return subprocess.Popen([sys.executable, str(ROOT / "_serve_probe.py"), str(port)],
                            env=env, stdout=subprocess.DEVNULL)


def phase(base: str, token: str, args: argparse.Namespace, endpoint: str) -> dict[str, Any]:
    httpx.get(f"{base}/bench/waits", params={"reset": "true"})
    started = time.monotonic()
    # a long client timeout: a request given up on keeps the server busy into the next phase
    raw = asyncio.run(run_load(base, token, args.collection, endpoint, args.clients,
                               args.seconds, timeout_s=args.timeout))
    wall = time.monotonic() - started
    waits = httpx.get(f"{base}/bench/waits").json()
    lat = raw["latency_ms"]
    return {"requests": len(lat), "errors": len(raw["errors"]),
            "error_samples": sorted(set(raw["errors"]))[:3],
            "throughput_rps": len(lat) / wall,
            "p50_ms": _percentile(lat, 50), "p95_ms": _percentile(lat, 95), "waits": waits}


def median_of(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    def med(*path: str) -> float:
        """The median over the rounds of the figure at ``path`` (keys, outermost first)."""
        def figure(r: dict[str, Any]) -> float:
            value: Any = r
            for key in path:
                value = value[key]
            return float(value)
        return round(statistics.median(figure(r) for r in rounds), 2)

    out: dict[str, Any] = {
        "requests": sum(r["requests"] for r in rounds), "errors": sum(r["errors"] for r in rounds),
        "throughput_rps": med("throughput_rps"),
        "p50_ms": med("p50_ms"), "p95_ms": med("p95_ms"),
    }
    for pool in ("anyio", "executor"):
        if all(pool in r["waits"] for r in rounds):
            out[pool] = {
                "calls_per_request": round(sum(r["waits"][pool]["calls"] for r in rounds)
                                           / max(1, out["requests"]), 2),
                "wait_p50_ms": med("waits", pool, "p50Ms"),
                "wait_p95_ms": med("waits", pool, "p95Ms"),
                "wait_max_ms": round(max(r["waits"][pool]["maxMs"] for r in rounds), 2),
                "queued_over_1ms": sum(r["waits"][pool]["queued"] for r in rounds)}
    return out


def report_md(r: dict[str, Any]) -> str:
    lines = [
        "# The HTTP service: thread hop per request vs the async API", "",
        f"`{r['command']}`: {r['clients']} concurrent clients, {r['rounds']} interleaved rounds "
        f"of {r['seconds']} s per variant and endpoint (medians over rounds), extractive "
        f"answers, after = the async API's executor at its default threads, after-w16 at "
        f"16, on {r['machine']['cpus']} CPUs shared by the load generator, both servers, "
        "PostgreSQL and other work on the machine. before = "
        f"`{r['before']}` (sync routes in anyio's thread pool); after = this checkout.", "",
        "Thread waits are the time from handing a call to a thread until it starts: anyio's "
        "pool (sync routes, sync dependencies such as the API-key check, sync streaming "
        "bodies) and the async API's bounded executor (query embedding, answer composition).",
        "",
        "| endpoint | variant | req/s | p50 ms | p95 ms | errors | anyio hops/req "
        "| anyio wait p95 ms | executor calls/req | executor wait p50 / p95 ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for endpoint, variants in r["results"].items():
        for variant, m in variants.items():
            ex = m.get("executor")
            ex_calls = ex["calls_per_request"] if ex else "-"
            ex_wait = f"{ex['wait_p50_ms']} / {ex['wait_p95_ms']}" if ex else "-"
            lines.append(
                f"| {endpoint} | {variant} | {m['throughput_rps']} | {m['p50_ms']} "
                f"| {m['p95_ms']} | {m['errors']} | {m['anyio']['calls_per_request']} "
                f"| {m['anyio']['wait_p95_ms']} | {ex_calls} | {ex_wait} |")
    return "\n".join([*lines, ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--endpoints", nargs="+", default=["search", "answer"],
                        choices=["search", "answer"])
    parser.add_argument("--before", default=BEFORE, help="git revision of the 'before' code")
    parser.add_argument("--collection", default="pepys_http")
    parser.add_argument("--timeout", type=float, default=600, help="client timeout, seconds")
    args = parser.parse_args()
    settings = _settings()
    token = prepare(settings, args.collection)
    servers: dict[str, tuple[str, subprocess.Popen[bytes]]] = {}
    with pgcite.Client(settings) as client, tempfile.TemporaryDirectory() as tmp:
        url = client.db.url  # the embedded server stays up while this client is open
        before, after = extract(args.before, Path(tmp)), ROOT.parent / "src"
        sources = {"before": (before, None), "after": (after, None), "after-w16": (after, 16)}
        try:
            for variant in VARIANTS:
                port = _free_port()
                servers[variant] = (f"http://127.0.0.1:{port}",
                                    start(sources[variant][0], url, port,
                                          sources[variant][1]))
            for base, server in servers.values():
                wait_ready(base, server)
                for endpoint in args.endpoints:  # warm up: models, pools, caches
                    asyncio.run(run_load(base, token, args.collection, endpoint, 4, 2))
            rounds: dict[str, dict[str, list[dict[str, Any]]]] = {
                e: {v: [] for v in VARIANTS} for e in args.endpoints}
            for i in range(args.rounds):
                for endpoint in args.endpoints:
                    order = VARIANTS[i % 3:] + VARIANTS[:i % 3]  # none always first
                    for variant in order:
                        measured = phase(servers[variant][0], token, args, endpoint)
                        rounds[endpoint][variant].append(measured)
                        print(f"round {i + 1} {endpoint:6} {variant:6} "
                              f"{measured['throughput_rps']:6.1f} req/s "
                              f"p50 {measured['p50_ms']:7.1f} ms p95 {measured['p95_ms']:7.1f} ms"
                              f" waits {json.dumps(measured['waits'])}", flush=True)
        finally:
            for _, server in servers.values():
                server.terminate()
                server.wait(timeout=30)
    result = {
        "command": " ".join(["bench/async_service.py", *sys.argv[1:]]),
        "clients": args.clients, "seconds": args.seconds, "rounds": args.rounds,
        "before": args.before,
        "results": {e: {v: median_of(rs) for v, rs in by.items()} for e, by in rounds.items()},
        "raw": rounds,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "shared": True},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "summary.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "report.md").write_text(report_md(result))
    print(report_md(result))
    if any(m["errors"] for by in result["results"].values() for m in by.values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
