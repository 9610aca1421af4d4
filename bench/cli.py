"""The command line as a user feels it: each command timed as a whole process, cold and warm,
this checkout beside a base commit, interleaved round by round.

    python bench/cli.py                      # 5 rounds, base = the merge-base with main
    python bench/cli.py --rounds 9 --base none --out /tmp/cli   # this checkout only

Commands: ``pgcite --help``, ``pgcite search C "the fire"`` and ``pgcite ask C "..."`` on the
packaged Pepys sample (122 entries, MiniLM). States of the embedded server:

- **cold**: no server runs (``PGCITE_SERVER_IDLE_S=0``): the command starts it and stops it;
- **cold (keeper)** (this checkout only): no server runs, and the command starts it and leaves
  it to the keeper, as the first command of a session does by default;
- **warm (held)**: another process holds the server (as in issue 35's measurements): the command
  joins it and leaves it running;
- **warm (keeper)** (this checkout only): nothing but the keeper holds it -- the command before
  left it running for ``PGCITE_SERVER_IDLE_S`` -- which is what consecutive commands get.

Each figure is a whole ``pgcite`` process: wall time (start to exit) and CPU time (user + system
of the process and what it waited for: pg_ctl, initdb; not the server's own processes). The base
code runs from ``git archive BASE src`` with the same interpreter and packages (``PYTHONPATH``
first). The machine may be shared: CPU time is the steadier figure there, and the summary says
the load average. ``--breakdown`` adds where one warm search's time goes, phase by phase.
Writes ``summary.json`` and ``report.md`` (default ``bench/results/cli``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import commit_stamp

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "cli"
SAMPLE = ROOT / "src" / "pgcite" / "data" / "pepys-1666-autumn.jsonl"
COLLECTION = "cli_bench"
COMMANDS: dict[str, list[str]] = {
    "help": ["--help"],
    "search": ["search", COLLECTION, "the fire"],
    "ask": ["ask", COLLECTION, "What did Pepys do during the fire?"],
}
# issue 35's targets, on a quiet machine
TARGETS_S = {("help", "any"): 0.3, ("search", "warm"): 1.0, ("search", "cold"): 3.0}
PGCITE = [sys.executable, "-c", "from pgcite.cli import main; main()"]
HOLD = """
import sys, time
import pgcite
client = pgcite.Client(pgcite.Settings(data_dir=sys.argv[1]))
with client.connection() as conn:
    conn.execute("SELECT 1")
print("ready", flush=True)
sys.stdin.read()  # until the benchmark closes its stdin
client.close()
"""


def run(args: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall s, CPU s, exit status) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        print(f"  exit {done.returncode}: {' '.join(args[3:])}\n{done.stderr[-2000:]}",
              file=sys.stderr)
    return wall, cpu, done.returncode


def postmaster_running(data_dir: Path) -> bool:
    pidfile = data_dir / "pg18" / "postmaster.pid"
    if not pidfile.exists():
        return False
    try:
        os.kill(int(pidfile.read_text().split()[0]), 0)
    except (ValueError, OSError):
        return False
    return True


def wait_stopped(data_dir: Path, within_s: float = 60) -> None:
    deadline = time.monotonic() + within_s
    while postmaster_running(data_dir):
        if time.monotonic() > deadline:
            raise SystemExit(f"the server on {data_dir} did not stop")
        time.sleep(0.2)


def base_tree(rev: str, into: Path) -> Path:
    """``src`` of ``rev`` (for PYTHONPATH)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                          check=False).stdout.strip()


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError, StopIteration):
        model = next(line.split(":", 1)[1].strip() for line in
                     Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    return {"cpus": os.cpu_count(), "cpu": model or platform.processor(),
            "system": platform.platform(), "python": platform.python_version()}


class Bench:
    def __init__(self, data_dir: Path, codes: dict[str, Path | None]) -> None:
        self.data_dir = data_dir
        self.codes = codes  # code name -> PYTHONPATH (None: this checkout)
        self.samples: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
        self.failures = 0

    def env(self, code: str, idle_s: float) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PGCITE_DATABASE_URL"}
        env.update(PGCITE_DATA_DIR=str(self.data_dir), PGCITE_SERVER_IDLE_S=f"{idle_s:g}",
                   COLUMNS="100")
        path = self.codes[code]
        if path is not None:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(path),
                                                              env.get("PYTHONPATH")]))
        return env

    def time(self, code: str, state: str, command: str, idle_s: float) -> None:
        wall, cpu, status = run([*PGCITE, *COMMANDS[command]], self.env(code, idle_s))
        self.failures += status != 0
        self.samples.setdefault((code, state, command), []).append((wall, cpu))
        print(f"  {code:5} {state:14} {command:7} {wall:6.2f} s wall {cpu:5.2f} s cpu",
              file=sys.stderr)

    def round(self, commands: list[str], keeper: bool) -> None:
        for code in self.codes:  # --help touches no server
            self.time(code, "any", "help", 0)
        for command in commands:  # cold: each starts and stops the server
            for code in self.codes:
                wait_stopped(self.data_dir)
                self.time(code, "cold", command, 0)
        wait_stopped(self.data_dir)
        holder = subprocess.Popen([sys.executable, "-c", HOLD, str(self.data_dir)],
                                  env=self.env("head", 0), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        try:
            for command in commands:
                for code in self.codes:
                    self.time(code, "warm (held)", command, 0)
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait(120)
        wait_stopped(self.data_dir)
        if keeper:  # consecutive commands, nothing else running: the keeper holds it
            for number, command in enumerate(commands):
                wait_stopped(self.data_dir)
                self.time("head", "cold (keeper)", command, 300)  # starts it, leaves it up
                if number < len(commands) - 1:
                    run([*PGCITE, "collection", "list"], self.env("head", 0))  # stops it
            for command in commands:
                self.time("head", "warm (keeper)", command, 300)
            run([*PGCITE, "collection", "list"], self.env("head", 0))  # stops it on exit
            wait_stopped(self.data_dir)


def summarise(samples: dict[tuple[str, str, str], list[tuple[float, float]]]
              ) -> list[dict[str, Any]]:
    rows = []
    for (code, state, command), values in samples.items():
        walls, cpus = [w for w, _ in values], [c for _, c in values]
        rows.append({"code": code, "state": state, "command": command, "n": len(values),
                     "wall_median_s": round(statistics.median(walls), 3),
                     "wall_min_s": round(min(walls), 3), "wall_max_s": round(max(walls), 3),
                     "cpu_median_s": round(statistics.median(cpus), 3),
                     "cpu_min_s": round(min(cpus), 3)})
    return rows


BREAKDOWN = """
import json, resource, sys, time
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
marks = [("start", time.perf_counter(), cpu())]
def mark(name):
    marks.append((name, time.perf_counter(), cpu()))
import typer, rich.console
mark("import typer, rich")
import pgcite.cli
mark("import pgcite.cli")
from pgcite._client import Client
mark("import pgcite._client (numpy, psycopg, models)")
from pgcite.cli._common import settings
client = Client(settings())
mark("Client(): join the server, check migrations")
col = client.collection(sys.argv[1])
view = col.view()
mark("collection + its embedder (load the model)")
result = col.search(sys.argv[2])
mark("the search (embed the question, one statement)")
client.close()
mark("close")
print(json.dumps([(n, round(w - marks[i][1], 4), round(c - marks[i][2], 4))
                  for i, (n, w, c) in enumerate(marks[1:])]))
"""


def breakdown(bench: Bench, rounds: int) -> list[dict[str, Any]]:
    """Where one warm search's time goes, phase by phase, in this checkout (medians)."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(bench.data_dir)],
                              env=bench.env("head", 0), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
    runs: list[list[tuple[str, float, float]]] = []
    try:
        for _ in range(rounds):
            out = subprocess.run([sys.executable, "-c", BREAKDOWN, COLLECTION, "the fire"],
                                 env=bench.env("head", 0), capture_output=True, text=True,
                                 check=True).stdout
            runs.append([tuple(x) for x in json.loads(out.strip().splitlines()[-1])])
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(120)
    return [{"phase": phase, "wall_median_s": round(statistics.median(r[i][1] for r in runs), 3),
             "cpu_median_s": round(statistics.median(r[i][2] for r in runs), 3)}
            for i, (phase, _, _) in enumerate(runs[0])]


def report(result: dict[str, Any]) -> str:
    meta = result["metadata"]
    lines = [
        "# CLI latency: whole processes", "",
        f"Commit {meta['commit']}{' (dirty)' if meta.get('dirty') else ''}"
        + (f", base {meta['base']}" if meta["base"] else "") + f", {meta['date']}, "
        f"{meta['machine']['cpus']} CPUs ({meta['machine']['cpu']}), load average "
        f"{meta['loadavg_start'][0]} at the start, {meta['loadavg_end'][0]} at the end"
        + (" -- a shared machine: wall times carry the load, CPU times less so"
           if max(meta["loadavg_start"][0], meta["loadavg_end"][0]) > 1.0 else "")
        + f". {meta['rounds']} rounds, interleaved; `{meta['command']}`.", "",
        "| command | server | code | wall median (min–max) s | CPU median s | target (quiet) |",
        "|---|---|---|---|---|---|",
    ]
    order = {"help": 0, "search": 1, "ask": 2}
    states = {"any": 0, "cold": 1, "cold (keeper)": 2, "warm (held)": 3, "warm (keeper)": 4}
    for row in sorted(result["rows"], key=lambda r: (order[r["command"]], states[r["state"]],
                                                     r["code"] != "base")):
        kind = row["state"].split()[0]
        target = TARGETS_S.get((row["command"], kind))
        lines.append(
            f"| {row['command']} | {row['state']} | {row['code']} | {row['wall_median_s']:.2f} "
            f"({row['wall_min_s']:.2f}–{row['wall_max_s']:.2f}) | {row['cpu_median_s']:.2f} | "
            + (f"≤ {target:g} s" if target and row["code"] == "head" else "") + " |")
    if result.get("breakdown"):
        lines += ["", "One warm search in this checkout, phase by phase (medians):", "",
                  "| phase | wall s | CPU s |", "|---|---|---|"]
        lines += [f"| {p['phase']} | {p['wall_median_s']:.3f} | {p['cpu_median_s']:.3f} |"
                  for p in result["breakdown"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--base", default="merge-base",
                        help="git revision to compare with ('none': this checkout only; "
                        "default: the merge-base of HEAD and main)")
    parser.add_argument("--commands", default="search,ask", help="search and/or ask")
    parser.add_argument("--breakdown", action="store_true",
                        help="also time one warm search's phases (this checkout)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    base = None if args.base == "none" else (
        git("merge-base", "HEAD", "main") if args.base == "merge-base" else args.base)
    work = Path(tempfile.mkdtemp(prefix="pgcite-bench-cli-"))
    loadavg_start = os.getloadavg()
    started = time.monotonic()
    try:
        codes: dict[str, Path | None] = {"head": None}
        if base:
            codes = {"base": base_tree(base, work), "head": None}
        data_dir = Path(os.environ.get("PGCITE_BENCH_CLI_DATA", work / "data"))
        bench = Bench(data_dir, codes)
        setup = [[*PGCITE, "collection", "create", COLLECTION],
                 [*PGCITE, "ingest", COLLECTION, str(SAMPLE), "--no-progress"]]
        for step in setup:  # with this checkout; the base reads the same collection
            subprocess.run(step, env=bench.env("head", 0), capture_output=True, check=False)
        commands = [c for c in args.commands.split(",") if c]
        for number in range(args.rounds):
            print(f"round {number + 1}/{args.rounds}", file=sys.stderr)
            bench.round(commands, keeper=True)
        phases = breakdown(bench, max(3, args.rounds)) if args.breakdown else []
    finally:
        if "bench" in locals():
            wait_stopped(bench.data_dir)
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "metadata": {
            "benchmark": "cli", "command": " ".join(["python bench/cli.py", *sys.argv[1:]]),
            "commit": commit_stamp(),
            "base": git("rev-parse", "--short", base) if base else None,
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": machine(), "rounds": args.rounds,
            "loadavg_start": [round(x, 2) for x in loadavg_start],
            "loadavg_end": [round(x, 2) for x in os.getloadavg()],
            "wall_s": round(time.monotonic() - started, 1), "failed_runs": bench.failures,
        },
        "rows": summarise(bench.samples),
        "breakdown": phases,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "report.md").write_text(report(result))
    print(report(result))
    print(f"wrote {args.out}/summary.json, report.md", file=sys.stderr)
    if bench.failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
