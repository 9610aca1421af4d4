"""Load test of the HTTP service on loopback: N concurrent clients POST /answer (extractive, no
model server) for a fixed time; reports throughput, latency percentiles, errors, and the
server's own per-stage means from /metrics.

    .venv/bin/python bench/load_http.py                 # 32 clients, 20 s
    .venv/bin/python bench/load_http.py --clients 32 --seconds 60 --endpoint search
    .venv/bin/python bench/load_http.py --clients 16 --endpoint search --backends onnx torch

It builds the demo collection (Pepys, Sept-Dec 1666, shipped in the package) in bench/.data
unless PGCITE_DATA_DIR / PGCITE_DATABASE_URL say otherwise, creates a reader key, starts
`pgcite serve` as a child process (once per ``--backends`` embedding backend, one after the
other, same load), and writes bench/results/http_load/{summary.json,report.md}.
Exit status 1 if any request failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from _common import free_port, wait_ready
from _common import settings as bench_settings

import pgcite
from pgcite.cli._demo import SAMPLE_QUESTIONS, sample_path
from pgcite.service import create_key

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "http_load"
QUESTIONS = [q for q, _ in SAMPLE_QUESTIONS] + [
    "What did Pepys do on the day the fire began?",
    "Who was the Lord Mayor during the fire?",
    "What did Pepys think of Isaac Newton's theory of gravity?",  # an absent question
    "How much money did Pepys have at the end of the year?",
]


def prepare(settings: pgcite.Settings, name: str) -> str:
    """The collection (ingested once; re-runs embed nothing) and a fresh reader key."""
    with pgcite.Client(settings) as client:
        try:
            col = client.collection(name)
        except pgcite.CollectionNotFound:
            col = client.create_collection(name)
        col.ingest([sample_path()], overrides=pgcite.Overrides(author="Samuel Pepys",
                                                                corpus="A"))
        with client.db.transaction() as conn:
            return create_key(conn, name, "reader", note="bench/load_http.py").token


def start_server(settings: pgcite.Settings, port: int,
                 backend: str | None = None) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-c", "from pgcite.cli import main; main()"]
    if settings.database_url is None:
        args += ["--data-dir", str(settings.data_dir)]
    args += ["serve", "--port", str(port), "--log-level", "warning"]
    env = {**os.environ, **({"PGCITE_EMBED_BACKEND": backend} if backend else {})}
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, env=env)


async def _worker(http: httpx.AsyncClient, url: str, field: str, index: int, deadline: float,
                  out: dict[str, list[Any]]) -> None:
    i = index
    while time.monotonic() < deadline:
        body = {field: QUESTIONS[i % len(QUESTIONS)], "top_k": 5}
        i += 1
        started = time.perf_counter()
        try:
            resp = await http.post(url, json=body)
            ok = resp.status_code == 200
            detail = None if ok else f"HTTP {resp.status_code}: {resp.text[:200]}"
        except httpx.HTTPError as exc:
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        out["latency_ms"].append((time.perf_counter() - started) * 1000)
        if not ok:
            out["errors"].append(detail)


async def run_load(base: str, token: str, collection: str, endpoint: str, clients: int,
                   seconds: float, *, timeout_s: float = 60) -> dict[str, list[Any]]:
    url = f"{base}/v1/collections/{collection}/{endpoint}"
    field = "question" if endpoint == "answer" else "query"
    out: dict[str, list[Any]] = {"latency_ms": [], "errors": []}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, limits=limits,
                                 timeout=timeout_s) as http:
        deadline = time.monotonic() + seconds
        await asyncio.gather(*(_worker(http, url, field, i, deadline, out)
                               for i in range(clients)))
    return out


def _percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000, method="inclusive")[int(q * 10) - 1]


def stage_means(metrics_text: str) -> dict[str, float]:
    """Mean ms per pipeline stage, from the server's Prometheus histograms."""
    sums = dict(re.findall(r'pgcite_stage_duration_seconds_sum\{stage="(\w+)"\} (\S+)',
                           metrics_text))
    counts = dict(re.findall(r'pgcite_stage_duration_seconds_count\{stage="(\w+)"\} (\S+)',
                             metrics_text))
    return {s: round(float(sums[s]) / float(counts[s]) * 1000, 2) for s in sums
            if float(counts.get(s, 0))}


def stage_share_within(metrics_text: str, bound_s: float = 0.05) -> dict[str, float]:
    """Per stage, the share of its observations at or under ``bound_s`` (a histogram bucket
    bound: 50 ms is one), e.g. how often the query embedding met a 50 ms budget."""
    label = repr(bound_s).rstrip("0")
    within = dict(re.findall(r'pgcite_stage_duration_seconds_bucket\{le="' + re.escape(label)
                             + r'",stage="(\w+)"\} (\S+)', metrics_text))
    counts = dict(re.findall(r'pgcite_stage_duration_seconds_count\{stage="(\w+)"\} (\S+)',
                             metrics_text))
    return {s: round(float(within[s]) / float(counts[s]), 3) for s in within
            if float(counts.get(s, 0))}


def summarise(raw: dict[str, list[Any]], args: argparse.Namespace, wall_s: float,
              stages: dict[str, float], within_50ms: dict[str, float],
              backend: str | None) -> dict[str, Any]:
    lat = raw["latency_ms"]
    return {
        "endpoint": args.endpoint, "clients": args.clients, "seconds": args.seconds,
        "requests": len(lat), "errors": len(raw["errors"]),
        "error_samples": sorted(set(raw["errors"]))[:5],
        "throughput_rps": round(len(lat) / wall_s, 2),
        "latency_ms": {
            "p50": round(_percentile(lat, 50), 1), "p95": round(_percentile(lat, 95), 1),
            "p99": round(_percentile(lat, 99), 1), "max": round(max(lat), 1),
            "mean": round(statistics.fmean(lat), 1)},
        "server_stage_mean_ms": stages,
        "server_stage_share_within_50ms": within_50ms,
        "embed_backend": backend or os.environ.get("PGCITE_EMBED_BACKEND", "onnx (default)"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "command": " ".join(["bench/load_http.py", *sys.argv[1:]]),
    }


def report_md(runs: list[dict[str, Any]]) -> str:
    r = runs[0]
    lines = [
        "# HTTP load test", "",
        f"`{r['command']}`: {r['clients']} concurrent clients on loopback for {r['seconds']} s, "
        f"POST /v1/collections/…/{r['endpoint']} (extractive, no model server), "
        f"{r['machine']['cpus']} CPUs (load generator and server share them); one server per "
        "embedding backend, one after the other.", "",
        "| backend | requests | errors | throughput | p50 | p95 | p99 | max |",
        "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for run in runs:
        lat = run["latency_ms"]
        lines.append(f"| {run['embed_backend']} | {run['requests']} | {run['errors']} | "
                     f"{run['throughput_rps']} req/s | {lat['p50']} ms | {lat['p95']} ms | "
                     f"{lat['p99']} ms | {lat['max']} ms |")
    lines += ["", "Server side, per stage (from /metrics): mean ms, and the share of "
              "observations within 50 ms (histogram bucket).", ""]
    for run in runs:
        within = run.get("server_stage_share_within_50ms", {})
        stages = ", ".join(f"{k} {v} ms" + (f" ({within[k]:.0%} ≤ 50 ms)" if k in within else "")
                           for k, v in run["server_stage_mean_ms"].items())
        lines.append(f"- {run['embed_backend']}: {stages}")
    return "\n".join([*lines, ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--endpoint", choices=["answer", "search"], default="answer")
    parser.add_argument("--collection", default="pepys_http")
    parser.add_argument("--backends", nargs="*", choices=["onnx", "torch"], default=[None],
                        help="embedding backends to serve with, one server each (default: "
                             "PGCITE_EMBED_BACKEND or the default backend)")
    args = parser.parse_args()
    settings = bench_settings()
    token = prepare(settings, args.collection)
    runs = [run_backend(settings, token, args, backend) for backend in args.backends]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "summary.json").write_text(json.dumps({"runs": runs}, indent=2) + "\n")
    (RESULTS / "report.md").write_text(report_md(runs))
    print(report_md(runs))
    if any(run["errors"] for run in runs):
        raise SystemExit(1)


def run_backend(settings: pgcite.Settings, token: str, args: argparse.Namespace,
                backend: str | None) -> dict[str, Any]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(settings, port, backend)
    try:
        wait_ready(base, server)
        asyncio.run(run_load(base, token, args.collection, args.endpoint, 4, 2))  # warm up
        warm = httpx.get(f"{base}/metrics").text  # subtracted: the warm-up is not the load
        started = time.monotonic()
        raw = asyncio.run(run_load(base, token, args.collection, args.endpoint, args.clients,
                                   args.seconds))
        wall = time.monotonic() - started
        text = httpx.get(f"{base}/metrics").text
    finally:
        server.terminate()
        server.wait(timeout=30)
    metrics = _minus(text, warm)
    return summarise(raw, args, wall, stage_means(metrics), stage_share_within(metrics), backend)


def _minus(after: str, before: str) -> str:
    """The stage histograms' sample lines of ``after`` less those of ``before`` (counters)."""
    old = dict(re.findall(r"^(pgcite_stage_duration_seconds_\S+) (\S+)$", before, re.M))
    return "\n".join(f"{name} {float(value) - float(old.get(name, 0))}" for name, value in
                     re.findall(r"^(pgcite_stage_duration_seconds_\S+) (\S+)$", after, re.M))


if __name__ == "__main__":
    main()
