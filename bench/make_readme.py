"""Regenerate the results tables in bench/README.md from the committed bench/results/*/summary.json
(a run of each benchmark rewrites its summary; see "How each table is made" in bench/README.md),
its suites table from bench/run.py's SUITES, and the figures the project README quotes
(:data:`FIGURES`).

    python bench/make_readme.py
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results"
README = ROOT / "README.md"
PROJECT_README = ROOT.parent / "README.md"
START, END = "<!-- results:start -->", "<!-- results:end -->"
SUITES_START, SUITES_END = "<!-- suites:start -->", "<!-- suites:end -->"
RETRIEVAL = ["scifact", "pepys", "xquad-en", "xquad-ar", "xquad-ar-en", "peers"]


def fmt(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def retrieval_rows(name: str, data: dict[str, Any]) -> list[str]:
    rows = []
    for config, res in data["configurations"].items():
        overall = res["overall"]
        safety = (res.get("safety") or {}).get("total") or {}
        db = (res.get("latency") or {}).get("database") or {}
        rows.append(
            f"| {name} | {config} | {fmt(overall.get('ndcg@10'))} | {fmt(overall.get('recall@10'))}"
            f" | {fmt(overall.get('recall@100'))} | {fmt(overall.get('mrr@10'))}"
            f" | {fmt(overall.get('pass_rate'), 2)} | {safety.get('cutoff_violations', '–')}"
            f" | {fmt(db.get('p50'), 1)} |")
    return rows


SCALE_HEADER = ["| chunks | keyword | vector | hybrid | hybrid, every posting summed |"
                " hybrid, term_depth=1000 | hybrid (term_depth=1000) + query embedding |"
                " load / BM25 / HNSW build s | measured at |",
                "|---|---|---|---|---|---|---|---|---|"]


def p50_p95(latency: dict[str, Any], mode: str) -> str:
    """p50 / p95 of a mode; – for a run that did not measure it (made before it was, or
    without it: bench/scale.py --no-baselines)."""
    if mode not in latency:
        return "–"
    return f"{latency[mode]['p50_ms']} / {latency[mode]['p95_ms']}"


def scale_rows(data: dict[str, Any]) -> list[str]:
    rows = []
    for r in data.values():
        if not isinstance(r, dict) or "latency" not in r:
            continue
        lat, build = r["latency"], r["build"]
        modes = ("keyword", "vector", "hybrid", "hybrid, summed", "hybrid, term_depth=1000",
                 "hybrid_end_to_end_with_embedding")
        rows.append(f"| {r['chunks']:,} | " + " | ".join(p50_p95(lat, m) for m in modes)
                    + f" | {build['load_s']} / {build['snapshot_bm25_build_s']}"
                    f" / {build['hnsw_build_s'] or '– (no vector index)'}"
                    f" | {r.get('stamp', {}).get('commit', 'before rows were stamped')} |")
    return rows


def entity_answer_rows(data: dict[str, Any]) -> list[str]:
    """The who/where set answered without and with the entity graph's facts (entities.py)."""
    answers = data.get("answers")
    if not answers:
        return []
    lines = ["", f"### Entity questions answered (who/where set, {answers['questions']} "
             f"questions; {data['corpus']})", "",
             "| answer | recall | support | citations / answer | abstained | cutoff violations |",
             "|---|---|---|---|---|---|"]
    for name, m in answers["answers"].items():
        lines.append(f"| {name} | {fmt(m.get('recall'))} | {fmt(m.get('support'))} | "
                     f"{fmt(m.get('citations'), 1)} | {fmt(m.get('abstained'))} | "
                     f"{answers['cutoff_violations'][name]} |")
    return lines


def tables() -> str:
    lines = ["### Retrieval quality (nDCG@10 etc. from ranx; database p50 at depth 100)", "",
             "| benchmark | configuration | nDCG@10 | R@10 | R@100 | MRR@10 | pass rate |"
             " cutoff violations | database p50 ms |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in RETRIEVAL:
        path = RESULTS / name / "summary.json"
        if path.exists():
            lines += retrieval_rows(name, json.loads(path.read_text()))
    scifact = RESULTS / "scifact" / "summary.json"
    if scifact.exists():
        top10 = json.loads(scifact.read_text())["metadata"].get("latency_top10_database", {})
        if top10:
            lines += ["", "### SciFact, database part of a top-10 query (vector precomputed)", "",
                      "| mode | p50 ms | p95 ms |", "|---|---|---|"]
            lines += [f"| {m} | {v['p50_ms']} | {v['p95_ms']} |" for m, v in top10.items()]
    peers = RESULTS / "peers" / "summary.json"
    if peers.exists():
        latency = json.loads(peers.read_text())["metadata"].get("latency_top10", {})
        lines += ["", "### Peers on SciFact: top-10 hybrid latency, sequential (ms)", "",
                  "| what | p50 | p95 |", "|---|---|---|"]
        lines += [f"| {name} | {v['p50_ms']} | {v['p95_ms']} |" for name, v in latency.items()]
    entities = RESULTS / "entities" / "summary.json"
    if entities.exists():
        lines += entity_answer_rows(json.loads(entities.read_text()))
    scale = RESULTS / "scale_segments" / "summary.json"  # the newest run (segments)
    if scale.exists():
        lines += ["", "### Scale (synthetic chunks; top-5; p50 / p95 ms)", "", *SCALE_HEADER]
        lines += scale_rows(json.loads(scale.read_text()))
    lines += embedding_rows(RESULTS / "embedding")
    lines += ingest_rows(RESULTS / "ingest" / "summary.json")
    lines += search_latency_rows(RESULTS / "search_latency" / "summary.json")
    return "\n".join(lines)


def run_heading(title: str, data: dict[str, Any], header: str) -> list[str]:
    """A run's table heading: what ran, on what machine, at what load and commit."""
    end = (f", {data['load_average_at_end']} at the end" if "load_average_at_end" in data
           else "")
    return ["", f"### {title}; {data['machine']}, load average "
            f"{data['load_average_at_start']} at the start{end}; {data['commit']})", "",
            header, "|" + "---|" * (header.count("|") - 1)]


def search_latency_rows(path: Path) -> list[str]:
    """bench/search_latency.py: every variant of one interleaved run, and issue 38's targets."""
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    lines = run_heading(f"Search latency on SciFact ({data['queries']} claims, one interleaved "
                        "run", data, "| variant | p50 wall ms | p95 wall ms | p50 database ms |")
    lines += [f"| {name} | {r['wall_p50_ms']} | {r['wall_p95_ms']} | "
              f"{r.get('database_p50_ms', '–')} |" for name, r in data["sequential"].items()]
    c = data["concurrent"]
    lines += [f"| pgcite hybrid@10, {c['clients']} concurrent clients | {c['wall_p50_ms']} | "
              f"{c['wall_p95_ms']} | – |", "", "| target (issue 38) | measured | met |",
              "|---|---|---|"]
    lines += [f"| {name} ≤ {t['target']} | {t['measured']} | {'yes' if t['met'] else 'no'} |"
              for name, t in data["targets"].items()]
    return lines


def ingest_rows(path: Path) -> list[str]:
    """bench/ingest.py: chunks/s of a fresh SciFact collection per variant, and re-ingests."""
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    lines = run_heading(f"Ingest ({data['documents']} SciFact abstracts, fresh collection", data,
                        "| variant | chunks | chunks/s | chunks per CPU second | cores busy |")
    for variant, rows in data["runs"].items():
        first = rows[0]
        lines.append(f"| {variant} | {first['chunks']} | {first['chunks_per_s']} | "
                     f"{first['chunks_per_cpu_s']} | {first['cores_busy']} |")
    for variant, cases in data.get("reingest", {}).items():
        lines += [f"| {variant}, re-ingest: {case} | {r['new_versions']} new versions | "
                  f"{r['seconds']} s | {r['of_first_ingest']:.1%} of the first | |"
                  for case, r in cases.items()]
    return lines


def _newest(folder: Path, *parts: str) -> dict[str, Any] | None:
    """The summary of the first of bench/embedding.py's runs ``parts`` (``--out
    embedding/PART``) that exists, else of its full run in ``folder``."""
    for path in (*(folder / part / "summary.json" for part in parts), folder / "summary.json"):
        if path.exists():
            data: dict[str, Any] = json.loads(path.read_text())
            return data
    return None


def embedding_rows(folder: Path) -> list[str]:
    """bench/embedding.py: chunks/s per backend (ingest and raw) and dense nDCG@10 per
    backend, each from its newest run."""
    lines: list[str] = []
    speed = _newest(folder, "throughput", "backends")  # the quietest speed run
    if speed:
        stamp = f"; {speed['commit']}" if speed.get("commit") else ""
        lines += ["", f"### Embedding backends (MiniLM; {speed['machine']}{stamp})", "",
                  "| variant | chunks/s (median) |", "|---|---|"]
        lines += [f"| {name} | {v['median']} |" for name, v in speed["chunks_per_s"].items()]
    data = _newest(folder, "backends", "quality")  # every backend, one run
    if data and data.get("ndcg10_dense"):
        quality = data["ndcg10_dense"]
        stamp = f"; {data['commit']}" if data.get("commit") else ""
        lines += ["", f"Dense nDCG@10 ({data['machine']}{stamp}):", "",
                  "| data | docs | queries | torch | onnx | onnx-int8 |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {name} | {v['docs']} | {v['queries']} | {v.get('torch', '–')} | "
                  f"{v.get('onnx', '–')} | {v.get('onnx-int8', v.get('onnx int8', '–'))} |"
                  for name, v in quality.items()]
    return lines


def suites() -> str:
    """The suites table: bench/run.py's SUITES, one row a suite."""
    from run import SUITES

    lines = ["| suite | scripts (`python bench/run.py SUITE` runs them in this order) | what it "
             "measures | results (`bench/results/…`) | runtime |", "|---|---|---|---|---|"]
    for name, suite in SUITES.items():
        steps = "<br>".join(f"`{s.script}{' ' if s.args else ''}{' '.join(s.args)}`"
                            + (f" (smoke: `{' '.join(s.smoke)}`)" if s.smoke is not None else "")
                            for s in suite.steps)
        lines.append(f"| {name} | {steps} | {suite.measures} | {suite.results} | "
                     f"{suite.runtime} |")
    return "\n".join(lines)


def _cli_wall(code: str, state: str, command: str) -> Callable[[dict[str, Any]], float]:
    def read(d: dict[str, Any]) -> float:
        return float(next(r["wall_median_s"] for r in d["rows"] if (r["code"], r["state"],
                          r["command"]) == (code, state, command)))
    return read


def _ndcg(config: str) -> Callable[[dict[str, Any]], float]:
    return lambda d: float(d["configurations"][config]["overall"]["ndcg@10"])


def _loco(collection: str, rate: str) -> Callable[[dict[str, Any]], float]:
    """A rate of the shipped model, leave-one-collection-out (bench/abstention.py)."""
    return lambda d: float(d["leave-one-collection-out"][SHIPPED][collection][rate])


DEFAULT = "hybrid (default: convex + router)"
SHIPPED = "lexical: coverage, best_coverage, agreement, unknown_names, terms (shipped)"
DIARY, FEB1663 = "Pepys, full diary", "Pepys, 26 entries (Feb 1663)"
JOURNAL = "Pepys journal, 536 entries (blind)"  # written blind, in no fit
# The figures README.md quotes, each written there as <!-- fig:NAME -->VALUE<!-- /fig -->:
# NAME -> (results folder, what to read from its summary.json, how to write it). `main` rewrites
# them; tests/test_bench_summaries.py checks the committed README says what the summaries say,
# the commit each was measured at included ("*-commit").
FIGURES: dict[str, tuple[str, Callable[[dict[str, Any]], Any], str]] = {
    "scifact-keyword": ("scifact", _ndcg("keyword"), "{:.3f}"),
    "scifact-bm25s": ("scifact", _ndcg("bm25s (reference)"), "{:.3f}"),
    "scifact-vector": ("scifact", _ndcg("vector"), "{:.3f}"),
    "scifact-hybrid": ("scifact", _ndcg(DEFAULT), "{:.3f}"),
    "scifact-recall100": ("scifact", lambda d: d["configurations"][DEFAULT]["overall"]
                          ["recall@100"], "{:.3f}"),
    "scifact-commit": ("scifact", lambda d: d["metadata"]["git_commit"][:7], "{}"),
    "pepys-default": ("pepys", _ndcg(DEFAULT), "{:.3f}"),
    "pepys-keyword": ("pepys", _ndcg("keyword"), "{:.3f}"),
    "pepys-vector": ("pepys", _ndcg("vector"), "{:.3f}"),
    "pepys-violations": ("pepys", lambda d: d["configurations"][DEFAULT]["safety"]["total"]
                         ["cutoff_violations"], "{}"),
    "pepys-commit": ("pepys", lambda d: d["metadata"]["git_commit"][:7], "{}"),
    "xquad-ar-hybrid": ("xquad-ar", _ndcg(DEFAULT), "{:.3f}"),
    "xquad-ar-commit": ("xquad-ar", lambda d: d["metadata"]["git_commit"][:7], "{}"),
    "cli-help-base": ("cli", _cli_wall("base", "any", "help"), "{:.2f}"),
    "cli-help": ("cli", _cli_wall("head", "any", "help"), "{:.2f}"),
    "cli-warm-base": ("cli", _cli_wall("base", "warm (held)", "search"), "{:.2f}"),
    "cli-warm": ("cli", _cli_wall("head", "warm (held)", "search"), "{:.2f}"),
    "cli-cold-base": ("cli", _cli_wall("base", "cold", "search"), "{:.2f}"),
    "cli-cold": ("cli", _cli_wall("head", "cold", "search"), "{:.2f}"),
    "cli-commit": ("cli", lambda d: d["metadata"]["commit"][:7], "{}"),
    "abstain-diary-answered": ("abstention", _loco(DIARY, "answer_rate"), "{:.2f}"),
    "abstain-diary-abstained": ("abstention", _loco(DIARY, "abstain_rate"), "{:.2f}"),
    "abstain-26-answered": ("abstention", _loco(FEB1663, "answer_rate"), "{:.2f}"),
    "abstain-26-abstained": ("abstention", _loco(FEB1663, "abstain_rate"), "{:.2f}"),
    "abstain-journal-answered": ("abstention", _loco(JOURNAL, "answer_rate"), "{:.2f}"),
    "abstain-journal-abstained": ("abstention", _loco(JOURNAL, "abstain_rate"), "{:.2f}"),
    "abstain-diary-today": ("abstention", lambda d: d["today"][DIARY]["abstain_rate"], "{:.2f}"),
    "abstain-26-today": ("abstention", lambda d: d["today"][FEB1663]["abstain_rate"], "{:.2f}"),
    "abstain-xquad-answered": ("abstention", lambda d: d["xquad_full"][
        "XQuAD en, whole (answerable only)"]["answered, shipped model"], "{:.2f}"),
    "abstain-commit": ("abstention", lambda d: d["metadata"]["git_commit"][:7], "{}"),
}
_FIGURE = re.compile(r"<!-- fig:([a-z0-9-]+) -->(.*?)<!-- /fig -->")


def readme_figures(text: str) -> str:
    """``text`` (README.md) with every marked figure rewritten from its summary (each summary
    read once); a marker naming no figure is an error, not left as it was."""
    summaries: dict[str, Any] = {}

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in FIGURES:
            raise SystemExit(f"README.md marks an unknown figure {name!r}")
        folder, read, style = FIGURES[name]
        if folder not in summaries:
            summaries[folder] = json.loads((RESULTS / folder / "summary.json").read_text())
        return f"<!-- fig:{name} -->{style.format(read(summaries[folder]))}<!-- /fig -->"
    return _FIGURE.sub(one, text)


def _replace(text: str, start: str, end: str, body: str) -> str:
    block = f"{start}\n{body}\n{end}"
    return re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)


def main() -> None:
    text = _replace(README.read_text(), START, END, tables())
    README.write_text(_replace(text, SUITES_START, SUITES_END, suites()))
    PROJECT_README.write_text(readme_figures(PROJECT_README.read_text()))
    print(f"updated {README} and {PROJECT_README}")


if __name__ == "__main__":
    main()
