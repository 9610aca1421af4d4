"""The self-correcting answer stages (issue 8, item 5) on the Pepys golden set: every golden query
(with its cutoff) answered by the extractive generator under six configurations that differ only
in their checks — no self-check, relevance grading, grading + the corrective loop, the
sufficiency check, all three, and all three behind the retrieval router.

Per configuration and query kind: abstention rate (absent questions should abstain, the others
should not), "supported" rate (not abstained, and a cited passage belongs to a document judged
relevant), p50/p95 latency, LLM calls, attempts, and every fallback or skip in the trace.

    PGCITE_DATA_DIR=/tmp/pgcbench .venv/bin/python bench/selfcheck.py            # all 40 queries
    PGCITE_DATA_DIR=/tmp/pgcbench .venv/bin/python bench/selfcheck.py --quick    # 10 (2 per kind)
    ... --judge openai --llm-base-url http://127.0.0.1:8080/v1 --llm-model local

The judge (also the LLM router of ``+route+all``) is the packaged SmolLM2-135M-Instruct run by
llama-cpp-python unless ``--judge openai`` names an OpenAI-compatible endpoint (key from
PGCITE_LLM_API_KEY or OPENAI_API_KEY, if it needs one). The collection ``pepys`` must already
exist (bench/pepys.py builds it); this script never ingests. Writes summary.json and report.md
to bench/results/selfcheck/ (``--quick``: bench/results/selfcheck/quick/); runs/results.json
there, with every record (what ``--rebuild`` reads), is kept out of git.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from _common import DATA, RESULTS, ROOT, client
from psycopg import sql
from pydantic import SecretStr

import pgcite
from pgcite.evaluate import GoldenQuery, load_golden
from pgcite.llm import ChatModel, LLMConfig, LLMError, make_chat_model

KINDS = ("fact", "keyword", "paraphrase", "cutoff", "absent")
TOP_K = 5
STEP_TIMEOUT_S = 15.0
BUDGET_S = 60.0
MAX_REWRITES = 2
DRAIN_S = 120.0  # wait at most this long for a timed-out local call to finish between answers

_CHECKS = {"step_timeout_s": STEP_TIMEOUT_S, "budget_s": BUDGET_S, "max_rewrites": MAX_REWRITES}
# name → (self_check options, retrieval stage overrides)
CONFIGS: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    "plain": ({}, None),
    "+grade": ({"grade": True, **_CHECKS}, None),
    "+grade+corrective": ({"grade": True, "corrective": True, **_CHECKS}, None),
    "+sufficiency": ({"sufficiency": True, **_CHECKS}, None),
    "+all": ({"grade": True, "corrective": True, "sufficiency": True, **_CHECKS}, None),
    "+route+all": ({"grade": True, "corrective": True, "sufficiency": True, **_CHECKS},
                   {"route": True}),
}

# Which judgement a chat call is, from the first words of its system prompt.
_PROMPTS = (
    ("grade", "You grade whether passages"),
    ("sufficiency", "You decide whether the passages"),
    ("rewrite", "You rewrite a question"),
    ("route", "You choose how to search"),
    ("hyde", "Write one short passage"),
    ("decompose", "Split the question"),
)


def _call_kind(system: str) -> str:
    return next((name for name, start in _PROMPTS if system.startswith(start)), "other")


class CountingChat:
    """The judge, counting calls per judgement (a call is counted when it starts, so one that
    times out still counts) and able to wait until the model is idle again."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.name = inner.name
        self.timeout_s = inner.timeout_s
        self.calls: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.ms: dict[str, float] = {}
        self._inflight = 0
        self._mu = threading.Condition()

    def chat(self, system: str, user: str, *, max_tokens: int = 256) -> str:
        kind = _call_kind(system)
        with self._mu:
            self.calls[kind] += 1
            self._inflight += 1
        started = time.perf_counter()
        try:
            return self.inner.chat(system, user, max_tokens=max_tokens)
        except LLMError:
            with self._mu:
                self.errors[kind] += 1
            raise
        finally:
            with self._mu:
                self.ms[kind] = self.ms.get(kind, 0.0) + (time.perf_counter() - started) * 1000
                self._inflight -= 1
                self._mu.notify_all()

    def snapshot(self) -> tuple[Counter[str], Counter[str]]:
        with self._mu:
            return Counter(self.calls), Counter(self.errors)

    def drain(self, limit_s: float = DRAIN_S) -> float:
        """Wait until no call is running, including one a step timeout abandoned (llama.cpp
        finishes it in the background, holding its lock); the seconds waited."""
        started = time.perf_counter()
        deadline = time.monotonic() + limit_s
        with self._mu:
            while self._inflight and time.monotonic() < deadline:
                self._mu.wait(timeout=0.2)
        lock = getattr(self.inner, "_lock", None)  # LlamaCppChat: the model is busy while held
        if lock is not None and lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            try:
                # Forget the evaluated prompt: llama.cpp reuses the longest common prefix of the
                # previous prompt, so the same question's judgement under the next
                # configuration would otherwise run from cache (measured: 0.9 s instead of a
                # 15 s timeout). Every answer starts cold, as a new question would.
                llm = getattr(self.inner, "_llm", None)
                if llm is not None:
                    llm.reset()
            finally:
                lock.release()
        return time.perf_counter() - started


# --- running --------------------------------------------------------------------------------


def make_judge(args: argparse.Namespace) -> tuple[ChatModel, dict[str, Any]]:
    if args.judge == "smollm2":
        from pgcite.llm import packaged_gguf

        path = Path(args.llm_model_path) if args.llm_model_path else packaged_gguf()
        chat = make_chat_model(LLMConfig(kind="llama-cpp", model_path=path, timeout_s=30.0))
        import llama_cpp

        return chat, {"kind": "llama-cpp", "model": path.name,
                      "llama_cpp_python": llama_cpp.__version__, "timeout_s": 30.0}
    if not args.llm_model:
        raise SystemExit("--judge openai needs --llm-model (and usually --llm-base-url)")
    key = os.environ.get("PGCITE_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY")
    chat = make_chat_model(LLMConfig(kind="openai", base_url=args.llm_base_url,
                                     model=args.llm_model, api_key=SecretStr(key) if key else None,
                                     timeout_s=30.0))
    return chat, {"kind": "openai", "base_url": args.llm_base_url or "https://api.openai.com/v1",
                  "model": args.llm_model, "timeout_s": 30.0}


def chunk_documents(col: pgcite.Collection) -> dict[str, str]:
    """chunk id → document id, from the collection's own chunks table (as the harness collapses
    chunk hits to documents, :func:`pgcite.evaluate._runs.collapse_to_documents`)."""
    with col.client.connection() as conn:
        rows = conn.execute(sql.SQL("SELECT DISTINCT id, document_id FROM {s}.chunks")
                            .format(s=col.info.schema_id)).fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


_CHUNK_SUFFIX = re.compile(r"-[a-z]{1,3}$")


def _document(chunk_id: str, docs: dict[str, str]) -> str:
    return docs.get(chunk_id) or _CHUNK_SUFFIX.sub("", chunk_id)


_REASONS = (
    ("threshold", "is below the threshold"),
    ("year rule", "the question asks about"),
    ("grading", "was graded relevant after"),
    ("corrective threshold", "stayed below the similarity threshold after"),
    ("sufficiency", "judged the passages insufficient"),
    ("no passage", "retrieval found no passage"),
    ("generator", "the generator abstained"),
    ("no citation", "cites no given passage"),
    ("attribution", "attribution fallback"),
    ("token budget", "fits the token budget"),
)


def _reason(detail: str) -> str:
    return next((name for name, text in _REASONS if text in detail), "other")


def answer_one(col: pgcite.Collection, judge: CountingChat, query: GoldenQuery, config: str,
               docs: dict[str, str]) -> dict[str, Any]:
    checks, stages = CONFIGS[config]
    calls0, errors0 = judge.snapshot()
    started = time.perf_counter()
    error = None
    try:
        answer = col.answer(query.text, top_k=TOP_K, filters={"cutoff": query.cutoff},
                            options={"self_check": checks}, stages=stages, judge=judge)
    except Exception as exc:  # a crash is a finding: record it and go on
        answer, error = None, f"{type(exc).__name__}: {exc}"
    wall_ms = (time.perf_counter() - started) * 1000
    drained_s = judge.drain()
    calls1, errors1 = judge.snapshot()
    calls, errors = calls1 - calls0, errors1 - errors0
    record: dict[str, Any] = {
        "query": query.id, "kind": query.kind, "config": config,
        "cutoff": query.cutoff.isoformat() if query.cutoff else None,
        "wall_ms": round(wall_ms, 1), "drain_s": round(drained_s, 2),
        "llm_calls": dict(calls), "llm_errors": dict(errors), "error": error,
    }
    if answer is None:
        record.update(abstained=None, supported=False, latency_ms=wall_ms)
        return record
    relevant = query.relevant_ids
    cited_docs = sorted({_document(c, docs) for c in answer.citations})
    source_docs = [_document(s.id, docs) for s in answer.sources]
    abstain = [e.detail for e in answer.trace if e.step == "abstain"]
    skips = [(e.step, e.detail) for e in answer.trace
             if e.detail.startswith(("fallback", "skipped")) or e.step == "fallback"]
    skips += [(f"stage:{s.stage}", f"{s.outcome}: {s.detail}") for s in answer.stages
              if s.outcome in ("fallback", "skipped")]
    verdicts = [e.detail.split()[0] for e in answer.trace
                if e.step == "sufficiency" and not e.detail.startswith(("fallback", "skipped",
                                                                         "unsure: retrieved"))]
    cutoff_violations = [s.id for s in answer.sources
                         if query.cutoff and s.date and s.date > query.cutoff.isoformat()]
    record.update(
        abstained=answer.abstained,
        abstain_reason=_reason(abstain[-1]) if abstain else None,
        abstain_detail=abstain[-1] if abstain else None,
        supported=bool(not answer.abstained and relevant and set(cited_docs) & relevant),
        relevant_in_sources=bool(relevant and set(source_docs) & relevant),
        confidence=answer.confidence,
        latency_ms=round(answer.timings_ms.get("total", wall_ms), 1),
        timings_ms={k: round(v, 1) for k, v in answer.timings_ms.items()},
        attempts=len(answer.attempts),
        attempt_detail=[a.model_dump() for a in answer.attempts],
        rewrites=sum(1 for e in answer.trace if e.step == "rewrite"
                     and e.detail.startswith("retrieving again")),
        sufficiency=verdicts,
        wider=any(e.step == "sufficiency" and e.detail.startswith("unsure: retrieved")
                  for e in answer.trace),
        skips=skips,
        cited=answer.citations, cited_docs=cited_docs, sources=[s.id for s in answer.sources],
        cutoff_violations=cutoff_violations,
        trace=[(e.step, e.detail) for e in answer.trace],
        stages=[(s.stage, s.outcome, s.detail) for s in answer.stages],
        answer=answer.answer[:300],
    )
    return record


def pick_quick(queries: list[GoldenQuery], n: int = 10) -> list[GoldenQuery]:
    """The first n // 5 queries of each kind, in the set's order."""
    per, taken = n // len(KINDS), Counter[str]()
    chosen = []
    for q in queries:
        if taken[q.kind] < per:
            chosen.append(q)
            taken[q.kind] += 1
    return chosen


# --- summarising ------------------------------------------------------------------------------


def _pct(values: Iterable[float], p: float) -> float | None:
    vals = list(values)
    return round(float(np.percentile(vals, p)), 1) if vals else None


def _rate(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 3) if flags else None


_SKIP_KINDS = (
    ("budget spent", "budget is spent"),
    ("timeout", "no answer within"),
    ("unparseable", "unparseable"),
    ("no usable rewrite", "rewrite: "),
    ("invalid route", "is not one of"),
    ("no LLM", "no LLM configured"),
)


def _skip_kind(detail: str) -> str:
    """What kind of fallback or skip a trace / stage detail reports."""
    found = next((name for name, text in _SKIP_KINDS if text in detail), None)
    return found or ("skipped" if detail.startswith("skipped") else "fallback (other)")


def summarise(records: list[dict[str, Any]], configs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for config in configs:
        rows = [r for r in records if r["config"] == config]
        groups: dict[str, list[dict[str, Any]]] = {
            "all": rows, "answerable": [r for r in rows if r["kind"] != "absent"],
            **{k: [r for r in rows if r["kind"] == k] for k in KINDS}}
        per: dict[str, Any] = {}
        for name, group in groups.items():
            if not group:
                continue
            answerable = [r for r in group if r["kind"] != "absent"]
            correct = [bool(r["abstained"]) if r["kind"] == "absent" else r["supported"]
                       for r in group]
            per[name] = {
                "n": len(group),
                "abstention": _rate([bool(r["abstained"]) for r in group]),
                "supported": _rate([r["supported"] for r in answerable]),
                "correct": _rate(correct),
                "relevant_in_sources": _rate([bool(r.get("relevant_in_sources"))
                                              for r in answerable]),
                "p50_ms": _pct((r["latency_ms"] for r in group), 50),
                "p95_ms": _pct((r["latency_ms"] for r in group), 95),
                "mean_llm_calls": round(float(np.mean(
                    [sum(r["llm_calls"].values()) for r in group])), 2),
                "mean_attempts": round(float(np.mean([r.get("attempts", 0) for r in group])), 2),
                "mean_rewrites": round(float(np.mean([r.get("rewrites", 0) for r in group])), 2),
            }
        skips: Counter[str] = Counter()
        for r in rows:
            for step, detail in r.get("skips", []):
                skips[f"{step} {_skip_kind(detail)}"] += 1
        out[config] = {
            "by_kind": per,
            "llm_calls": dict(sum((Counter(r["llm_calls"]) for r in rows), Counter())),
            "llm_errors": dict(sum((Counter(r["llm_errors"]) for r in rows), Counter())),
            "skips": dict(sorted(skips.items())),
            "abstain_reasons": dict(Counter(r["abstain_reason"] for r in rows
                                            if r.get("abstained")).most_common()),
            "sufficiency_verdicts": dict(Counter(v for r in rows
                                                 for v in r.get("sufficiency", []))),
            "sufficiency_unparseable": sum(1 for r in rows for step, detail in r.get("trace", [])
                                           if step == "sufficiency" and "unparseable" in detail),
            "sufficiency_by_kind": {k: dict(Counter(v for r in rows if r["kind"] == k
                                                    for v in r.get("sufficiency", [])))
                                    for k in KINDS},
            "route_outcomes": dict(Counter(
                f"{outcome} {detail.split(' (')[0]} ({'LLM' if '(LLM)' in detail else 'heuristic'})"
                for r in rows for stage, outcome, detail in r.get("stages", [])
                if stage == "route")),
            "route_events": sum(1 for r in rows for st in r.get("stages", []) if st[0] == "route"),
            "wider_retrievals": sum(1 for r in rows if r.get("wider")),
            "crashes": [f"{r['query']}: {r['error']}" for r in rows if r["error"]],
            "cutoff_violations": sum(len(r.get("cutoff_violations", [])) for r in rows),
            "drain_s_total": round(sum(r["drain_s"] for r in rows), 1),
        }
    return out


def changes_vs_plain(records: list[dict[str, Any]], configs: list[str]) -> dict[str, Any]:
    """Per configuration, the queries whose outcome changed against ``plain``."""
    plain = {r["query"]: r for r in records if r["config"] == "plain"}
    out: dict[str, Any] = {}
    for config in configs[1:]:
        lost, gained, new_abstain, new_answer = [], [], [], []
        for r in records:
            p = plain.get(r["query"])
            if r["config"] != config or p is None:
                continue
            if r["kind"] == "absent":
                if r["abstained"] and not p["abstained"]:
                    new_abstain.append(r["query"])
                elif p["abstained"] and not r["abstained"]:
                    new_answer.append(r["query"])
            elif p["supported"] and not r["supported"]:
                lost.append(r["query"])
            elif r["supported"] and not p["supported"]:
                gained.append(r["query"])
        out[config] = {"answerable_lost": lost, "answerable_gained": gained,
                       "absent_now_abstain": new_abstain, "absent_now_answer": new_answer}
    return out


# --- report -----------------------------------------------------------------------------------


def _f(value: float | None, pct: bool = True) -> str:
    if value is None:
        return "—"
    return f"{value * 100:.0f}%" if pct else f"{value:.0f}"


def _s(ms: float | None) -> str:
    if ms is None:
        return "—"
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def report(result: dict[str, Any]) -> str:
    meta, summary, configs = result["metadata"], result["summary"], result["metadata"]["configs"]
    kinds = [k for k in KINDS if any(k in summary[c]["by_kind"] for c in configs)]
    dirty = (" (uncommitted changes in src/: " + ", ".join(meta.get("dirty_src", [])) + ")"
             if meta["dirty"] else "")
    lines = [
        "# Self-correcting answer stages on the Pepys golden set",
        "",
        f"{meta['queries']} queries ({', '.join(f'{k} {n}' for k, n in meta['kinds'].items())}), "
        f"judge **{meta['judge']['model']}** ({meta['judge']['kind']}), extractive generator, "
        f"top_k {meta['settings']['top_k']}, hybrid search, step timeout "
        f"{meta['settings']['step_timeout_s']:g} s, budget {meta['settings']['budget_s']:g} s, "
        f"max {meta['settings']['max_rewrites']} rewrites. Commit `{meta['commit'][:12]}`"
        f"{dirty}, {meta['date']}, {meta['machine']}. "
        f"Run time {meta['wall_s'] / 60:.1f} min; load average {meta['loadavg_start']} at the "
        f"start, {meta['loadavg_end']} at the end (other benchmarks shared the 2 cores).",
        "",
        "**Abstention** = share of questions answered with the abstention text (absent "
        "questions should abstain, the others should not). **Supported** = not abstained and at "
        "least one cited passage belongs to a document judged relevant (chunk → document as "
        "the harness collapses hits). **Correct** = absent → abstained, else supported.",
        "",
        "## Abstention rate",
        "",
        "| configuration | " + " | ".join(kinds) + " | all answerable |",
        "|---|" + "---:|" * (len(kinds) + 1),
    ]
    for c in configs:
        per = summary[c]["by_kind"]
        lines.append(f"| {c} | " + " | ".join(_f(per.get(k, {}).get("abstention"))
                                               for k in kinds)
                     + f" | {_f(per.get('answerable', {}).get('abstention'))} |")
    ans = [k for k in kinds if k != "absent"]
    lines += ["", "## Supported rate (answerable kinds) and correct rate", "",
              "| configuration | " + " | ".join(ans) + " | all answerable | correct (all) |",
              "|---|" + "---:|" * (len(ans) + 2)]
    for c in configs:
        per = summary[c]["by_kind"]
        lines.append(f"| {c} | " + " | ".join(_f(per.get(k, {}).get("supported")) for k in ans)
                     + f" | {_f(per.get('answerable', {}).get('supported'))}"
                     f" | {_f(per['all']['correct'])} |")
    lines += ["", "## Latency and model use (all queries)", "",
              "| configuration | p50 | p95 | mean LLM calls | mean attempts | mean rewrites "
              "| LLM calls by judgement | LLM errors |",
              "|---|---:|---:|---:|---:|---:|---|---|"]
    for c in configs:
        a = summary[c]["by_kind"]["all"]
        calls = ", ".join(f"{k} {v}" for k, v in sorted(summary[c]["llm_calls"].items())) or "—"
        errs = ", ".join(f"{k} {v}" for k, v in sorted(summary[c]["llm_errors"].items())) or "—"
        lines.append(f"| {c} | {_s(a['p50_ms'])} | {_s(a['p95_ms'])} | {a['mean_llm_calls']} | "
                     f"{a['mean_attempts']} | {a['mean_rewrites']} | {calls} | {errs} |")
    lines += ["", "### p50 / p95 latency per kind", "",
              "| configuration | " + " | ".join(kinds) + " |", "|---|" + "---:|" * len(kinds)]
    for c in configs:
        per = summary[c]["by_kind"]
        lines.append(f"| {c} | " + " | ".join(
            f"{_s(per[k]['p50_ms'])} / {_s(per[k]['p95_ms'])}" if k in per else "—"
            for k in kinds) + " |")
    lines += ["", "## Fallbacks and skips (trace, stage events, attempts)", "",
              "| configuration | fallbacks / skips | sufficiency verdicts | wider retrievals "
              "| abstention reasons |", "|---|---|---|---:|---|"]
    for c in configs:
        s = summary[c]
        lines.append(
            f"| {c} | {', '.join(f'{k}: {v}' for k, v in s['skips'].items()) or '—'} | "
            f"{', '.join(f'{k} {v}' for k, v in s['sufficiency_verdicts'].items()) or '—'} | "
            f"{s['wider_retrievals']} | "
            f"{', '.join(f'{k} {v}' for k, v in s['abstain_reasons'].items()) or '—'} |")
    lines += ["", "Sufficiency replies the parser could not read (the library then says "
              "\"unsure\" and retrieves wider once): "
              + ", ".join(f"{c} {summary[c]['sufficiency_unparseable']}" for c in configs
                          if summary[c]["sufficiency_verdicts"]) + ".", "",
              "### Sufficiency verdicts per kind", "",
              "| configuration | " + " | ".join(kinds) + " |", "|---|" + "---|" * len(kinds)]
    for c in configs:
        if summary[c]["sufficiency_verdicts"]:
            byk = summary[c]["sufficiency_by_kind"]
            lines.append(f"| {c} | " + " | ".join(
                ", ".join(f"{v} {n}" for v, n in sorted(byk.get(k, {}).items())) or "—"
                for k in kinds) + " |")
    for c in configs:
        if summary[c]["route_outcomes"]:
            calls = summary[c]["llm_calls"].get("route", 0)
            lines += ["", f"Router ({c}): "
                      + ", ".join(f"{k}: {v}" for k, v in sorted(summary[c]["route_outcomes"]
                                                              .items()))
                      + f". {calls} router LLM calls, {summary[c]['route_events']} route events "
                      "in `Answer.stages` (the stage events of the sufficiency check's wider "
                      "search and of rewrite searches do not reach the answer)."]
    crashes = [x for c in configs for x in summary[c]["crashes"]]
    violations = sum(summary[c]["cutoff_violations"] for c in configs)
    lines += ["", f"Crashes: {len(crashes)}" + (": " + "; ".join(crashes) if crashes else "")
              + f". Sources dated after a cutoff: {violations}.", "",
              "## Changes against `plain`", "",
              "| configuration | answerable lost | answerable gained | absent now abstain "
              "| absent now answered |", "|---|---|---|---|---|"]
    for c, ch in result["changes_vs_plain"].items():
        lines.append(f"| {c} | " + " | ".join(", ".join(ch[k]) or "—" for k in (
            "answerable_lost", "answerable_gained", "absent_now_abstain",
            "absent_now_answer")) + " |")
    lines += ["", "## Per query (A = abstained, S = supported, · = answered, unsupported)", "",
              "| query | kind | " + " | ".join(configs) + " |", "|---|---|" + "---|" * len(configs)]
    by = {(r["query"], r["config"]): r for r in result["records"]}
    for qid, kind in result["metadata"]["query_ids"]:
        cells = []
        for c in configs:
            r = by.get((qid, c))
            cells.append("" if r is None else "ERR" if r["error"] else
                         "A" if r["abstained"] else "S" if r["supported"] else "·")
        lines.append(f"| {qid} | {kind} | " + " | ".join(cells) + " |")
    lines += ["", "Latency is `Answer.timings_ms.total` (search + checks + generation) of "
              "sequential answers; between answers the script waits until the judge is idle "
              "(a step timeout abandons a llama.cpp call, which finishes in the background), so "
              "that wait is not in the figures (total: "
              + ", ".join(f"{c} {summary[c]['drain_s_total']} s" for c in configs) + ").", ""]
    return "\n".join(lines)


# --- main -------------------------------------------------------------------------------------


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=False).stdout.strip()


def _machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text()
                .splitlines() if line.startswith("model name")), platform.processor())
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({cpu})"


def write_result(result: dict[str, Any], out: Path) -> None:
    """summary.json (all but the per-query records: committed) in ``out``; results.json (with
    the records: what --rebuild reads) in ``out/runs/``, which git ignores."""
    (out / "runs").mkdir(parents=True, exist_ok=True)
    (out / "runs" / "results.json").write_text(json.dumps(result, indent=1, default=str) + "\n",
                                               encoding="utf-8")
    summary = {k: v for k, v in result.items() if k != "records"}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n",
                                      encoding="utf-8")


def rebuild(path: Path) -> None:
    """Summary, changes and report.md again from the records in ``path`` (a results.json)."""
    result = json.loads(path.read_text(encoding="utf-8"))
    configs = result["metadata"]["configs"]
    result["summary"] = summarise(result["records"], configs)
    result["changes_vs_plain"] = (changes_vs_plain(result["records"], configs)
                                  if "plain" in configs else {})
    out = path.parent.parent if path.parent.name == "runs" else path.parent
    write_result(result, out)
    (out / "report.md").write_text(report(result), encoding="utf-8")
    print(f"rebuilt {path}, {out / 'summary.json'} and {out / 'report.md'}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10 queries (2 per kind)")
    parser.add_argument("--limit", type=int, help="only the first N queries (in set order)")
    parser.add_argument("--configs", help="comma-separated subset of: " + ", ".join(CONFIGS))
    parser.add_argument("--judge", choices=("smollm2", "openai"), default="smollm2",
                        help="the packaged SmolLM2 (llama.cpp) or an OpenAI-compatible server")
    parser.add_argument("--llm-base-url", help="OpenAI-compatible endpoint (--judge openai)")
    parser.add_argument("--llm-model", help="model name at that endpoint (--judge openai)")
    parser.add_argument("--llm-model-path", help="another .gguf for --judge smollm2")
    parser.add_argument("--out", type=Path, help="output folder (default bench/results/"
                        "selfcheck, or .../selfcheck/quick with --quick)")
    parser.add_argument("--rebuild", type=Path, metavar="RESULTS_JSON",
                        help="recompute the summary and report.md of an earlier run, no queries")
    args = parser.parse_args()
    if args.rebuild:
        rebuild(args.rebuild)
        return

    configs = args.configs.split(",") if args.configs else list(CONFIGS)
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown configuration(s) {unknown}; choose from {list(CONFIGS)}")
    golden = load_golden(DATA / "pepys-diary" / "golden.jsonl")
    queries = pick_quick(golden.queries) if args.quick else list(golden.queries)
    if args.limit:
        queries = queries[: args.limit]
    out = args.out or (RESULTS / "selfcheck" / ("quick" if args.quick else ""))
    out.mkdir(parents=True, exist_ok=True)

    commit, dirty = _git("rev-parse", "HEAD"), _git("status", "--porcelain", "--", "src")
    inner, judge_meta = make_judge(args)
    judge = CountingChat(inner)
    # The judge is also the client's LLM, so the router of +route+all uses the same model.
    with client(llm=judge) as c:
        try:
            col = c.collection("pepys")
        except pgcite.CollectionNotFound:
            raise SystemExit("collection 'pepys' not found in this database: run bench/pepys.py "
                             "first (with the same PGCITE_DATA_DIR / PGCITE_DATABASE_URL)") from None
        snapshot = col.active_snapshot()
        docs = chunk_documents(col)
        print(f"pepys: snapshot {snapshot.snapshot_id}, {len(docs)} chunks; "
              f"{len(queries)} queries × {len(configs)} configurations", file=sys.stderr)
        # Warm up: embedder, database, and the judge (model load is not an answer's latency).
        col.search(queries[0].text, top_k=TOP_K)
        warm = time.perf_counter()
        try:
            judge.chat("You are terse.", "Say hi.", max_tokens=4)
        except LLMError as exc:
            raise SystemExit(f"the judge does not answer: {exc}") from None
        warm_s = time.perf_counter() - warm
        judge.calls.clear()
        judge.errors.clear()
        judge.ms.clear()

        loadavg_start = os.getloadavg()
        started = time.perf_counter()
        records: list[dict[str, Any]] = []
        progress = out / "progress.jsonl"
        with progress.open("w", encoding="utf-8") as log:
            for n, query in enumerate(queries):
                # Rotate the order so no configuration always runs first (load drifts).
                order = configs[n % len(configs):] + configs[: n % len(configs)]
                for config in order:
                    record = answer_one(col, judge, query, config, docs)
                    records.append(record)
                    log.write(json.dumps(record, default=str) + "\n")
                    log.flush()
                    state = ("ERR" if record["error"] else "A" if record["abstained"]
                             else "S" if record["supported"] else ".")
                    print(f"  {query.id} {query.kind:<10} {config:<18} {state} "
                          f"{record['latency_ms'] / 1000:6.1f} s  "
                          f"llm {sum(record['llm_calls'].values())}", file=sys.stderr)
                elapsed = time.perf_counter() - started
                eta = elapsed / (n + 1) * (len(queries) - n - 1)
                print(f"[{n + 1}/{len(queries)}] {elapsed / 60:.1f} min elapsed, "
                      f"~{eta / 60:.1f} min left", file=sys.stderr, flush=True)
        wall_s = time.perf_counter() - started

    configs_run = [c for c in CONFIGS if c in configs]
    result = {
        "metadata": {
            "benchmark": "selfcheck-pepys", "golden": golden.path, "golden_sha256": golden.sha256,
            "queries": len(queries), "kinds": dict(Counter(q.kind for q in queries)),
            "query_ids": [(q.id, q.kind) for q in queries],
            "configs": configs_run,
            "config_options": {c: {"self_check": CONFIGS[c][0], "stages": CONFIGS[c][1]}
                               for c in configs_run},
            "judge": {**judge_meta, "warmup_s": round(warm_s, 1)},
            "settings": {"top_k": TOP_K, "mode": "hybrid", "generator": "extractive",
                         "step_timeout_s": STEP_TIMEOUT_S, "budget_s": BUDGET_S,
                         "max_rewrites": MAX_REWRITES, "route_llm_timeout_s": 1.5,
                         "threshold": "library default for the embedder",
                         "temporal_check": True, "quick": args.quick},
            "collection": {"name": "pepys", "snapshot_id": snapshot.snapshot_id,
                           "chunks": len(docs)},
            "commit": commit, "dirty": bool(dirty),
            "dirty_src": [line[3:] for line in dirty.splitlines()],
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": _machine(), "python": platform.python_version(),
            "pgcite": getattr(pgcite, "__version__", None),
            "loadavg_start": [round(x, 2) for x in loadavg_start],
            "loadavg_end": [round(x, 2) for x in os.getloadavg()],
            "wall_s": round(wall_s, 1),
        },
        "summary": summarise(records, configs_run),
        "changes_vs_plain": (changes_vs_plain(records, configs_run)
                             if "plain" in configs_run else {}),
        "records": records,
    }
    write_result(result, out)
    (out / "report.md").write_text(report(result), encoding="utf-8")
    progress.unlink()
    print(f"wrote {out}/summary.json, report.md, runs/results.json ({wall_s / 60:.1f} min)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
