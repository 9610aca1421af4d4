"""One runner for the benchmark suites: each suite is a list of the scripts in bench/ with their
arguments, run one after the other as separate processes (each script stays runnable alone).

    python bench/run.py                      # list the suites and what each runs
    python bench/run.py quality              # run a suite, then regenerate bench/README's tables
    python bench/run.py latency --smoke      # only the scripts' own small modes (written aside)
    python bench/run.py scale --dry-run      # print the commands, run nothing

A step that fails does not stop the suite: the runner goes on and exits 1 at the end, naming
the steps that failed. ``--smoke`` runs the steps whose script has a small mode of its own
(its arguments are the script's, unchanged), with their output under bench/.smoke/ where the
script takes a folder, and skips the others, saying so. A full run rewrites the committed
summaries under bench/results/ and then runs make_readme.py (``--no-readme``: not).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass

from _common import ROOT

SMOKE = ".smoke"  # bench/.smoke/: smoke output, kept out of git (.gitignore)


@dataclass(frozen=True)
class Step:
    """One script of a suite: its arguments for the suite's run, and its own smoke mode
    (None: it has none, so ``--smoke`` skips it)."""

    script: str
    args: tuple[str, ...] = ()
    smoke: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Suite:
    """A suite: what it measures, its steps, the folders under bench/results/ its steps write,
    and how long it ran where that was recorded (bench/README.md's suites table is made from
    this, by make_readme.py)."""

    measures: str
    steps: tuple[Step, ...]
    results: str
    runtime: str


SUITES: dict[str, Suite] = {
    "quality": Suite(
        "retrieval quality (nDCG@10, recall, cutoff violations) of every leg and the default "
        "hybrid search, beside bm25s and exact dense search; the context header; the optional "
        "stages; OCR",
        (Step("scifact.py"), Step("pepys.py"), Step("xquad.py"), Step("contextual.py"),
         Step("stages.py", ("--no-llm", "--scifact-queries", "809", "--pepys-collection",
                            "pepys_ctx"), ("--quick",)),
         Step("ocr.py")),
        "scifact, pepys, xquad-{en,ar,ar-en}, contextual, stages, ocr",
        "first run: SciFact's ingest 10-25 min, Pepys' ~10 min (re-runs embed nothing); "
        "ocr's hostile section ~20 min with its before-code; the rest not recorded"),
    "answers": Suite(
        "answers with every default, judged leave-one-collection-out; abstention on unseen "
        "collections; fact/paraphrase retrieval variants; entity facts; self-checks",
        (Step("answers.py", ("--unseen",)), Step("answers.py", ("--limit", "300")),
         Step("abstention.py"), Step("narrative.py"), Step("entities.py"),
         Step("selfcheck.py", (), ("--quick", "--out", f"bench/{SMOKE}/selfcheck"))),
        "answers/unseen, answers, abstention, narrative, entities, selfcheck",
        "narrative ~10 min (its variants' seconds in its summary); entities --full ~1 h; "
        "selfcheck 44 min with SmolLM2; the rest not recorded"),
    "latency": Suite(
        "what a user waits for: the CLI as whole processes, search at depth (beside a "
        "one-statement SQL hybrid and an in-memory reference; snippets on/off; 16 clients), "
        "embedding backends, ingest speed, HTTP load, parallel ingest",
        (Step("cli.py", ("--breakdown",),
              ("--rounds", "1", "--base", "none", "--out", f"bench/{SMOKE}/cli")),
         Step("search_latency.py", (), ("--queries", "30", "--explain", "5", "--clients", "4",
                                         "--name", f"../{SMOKE}/search_latency")),
         Step("embedding.py", ("--docs", "100", "--rounds", "2", "--skip", "latency",
                               "--scifact-full", "--out", "embedding/backends")),
         Step("ingest.py"),
         Step("load_http.py"),
         Step("parallel_ingest.py", ("--docs", "200", "--workers", "1", "2", "--plain", "1", "2",
                                     "--repeats", "2"))),
        "cli, search_latency, embedding/backends, ingest, http_load, parallel_ingest",
        "cli ~2 min; ingest ~7 min on 2 quiet cores, 25+ on busy ones; load_http 20 s a "
        "backend after its ingest; the rest not recorded"),
    "scale": Suite(
        "synthetic 100k-10M chunks: build times and per-mode latency; keyword latency over 100 "
        "small ingests with and without merges, and a build's cost",
        (Step("scale.py", ("--sizes", "100000,1000000", "--results", "scale_segments")),
         Step("merges.py")),
        "scale_segments (older runs: scale, scale_defaults), merges",
        "100k ~10 min; 1M: a build of ~11 min (load 187 s, BM25 185 s, HNSW 292 s) and its "
        "latency passes; merges ~30 min"),
    "reliability": Suite(
        "hostile input on every surface, access rules, kills and leaks (goal figures 0); read "
        "replicas and workers under load, switches and kills",
        (Step("reliability.py", (), ("--short", "--out", f"bench/{SMOKE}/reliability")),
         Step("replicas.py")),
        "reliability, replicas",
        "reliability: long 3 min on idle cores, 27 min on loaded ones; --short (in .ci/run) "
        "~3-5 min; replicas: a few minutes (15 s a throughput cell, 20 s a phase)"),
    "peers": Suite(
        "pgcite's hybrid search beside Haystack's pgvector hybrid pipeline and hand-written "
        "SQL, same server, texts and vectors (needs the quality suite's scifact collection)",
        (Step("peers.py", (), ("--limit", "40")),),
        "peers", "~15 min"),
}


def command(step: Step, smoke: bool) -> list[str]:
    args = step.smoke if smoke else step.args
    return [sys.executable, str(ROOT / step.script), *(args or ())]


def listing() -> str:
    lines = []
    for name, suite in SUITES.items():
        lines.append(f"{name}: {suite.measures}")
        for step in suite.steps:
            smoke = " ".join(step.smoke) if step.smoke is not None else "-"
            lines.append(f"    bench/{step.script} {' '.join(step.args)}".rstrip()
                         + f"    [smoke: {smoke}]")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", nargs="?", choices=list(SUITES))
    parser.add_argument("--smoke", action="store_true",
                        help="only the steps with a small mode of their own, output aside")
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    parser.add_argument("--no-readme", action="store_true",
                        help="after a full run, leave bench/README.md's tables as they are")
    args = parser.parse_args()
    if args.suite is None:
        print(listing())
        return
    failed: list[str] = []
    for step in SUITES[args.suite].steps:
        if args.smoke and step.smoke is None:
            print(f"skip bench/{step.script}: no smoke mode", file=sys.stderr)
            continue
        cmd = command(step, args.smoke)
        shown = " ".join(["python", f"bench/{step.script}", *cmd[2:]])
        print(f"$ {shown}", file=sys.stderr, flush=True)
        if args.dry_run:
            continue
        (ROOT / SMOKE).mkdir(exist_ok=True)
        started = time.monotonic()
        code = subprocess.run(cmd, cwd=ROOT.parent, check=False).returncode
        print(f"  exit {code} after {time.monotonic() - started:.0f} s", file=sys.stderr)
        if code:
            failed.append(shown)
    if not (args.smoke or args.dry_run or args.no_readme):
        subprocess.run([sys.executable, str(ROOT / "make_readme.py")], cwd=ROOT.parent,
                       check=False)
    if failed:
        sys.exit("failed: " + "; ".join(failed))


if __name__ == "__main__":
    main()
