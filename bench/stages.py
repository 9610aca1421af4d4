"""The optional retrieval stages (route, decompose, HyDE, rerank, boost) one at a time, per
query kind, against plain hybrid search: on the Pepys golden set (40 queries, kinds fact /
keyword / paraphrase / cutoff / absent) and on the first SciFact train claims.

All configurations are hybrid search with the collection's fusion (convex by default), top 10
documents (20 chunks, collapsed to documents, as the other benchmarks do). The model-backed stages
use the packaged SmolLM2-135M GGUF through llama-cpp-python: a weak model, so this measures what
the stages do with a small local model, and how often they fall back.

    PGCITE_DATA_DIR=/tmp/pgcbench python bench/stages.py             # → results/stages/
    PGCITE_DATA_DIR=/tmp/pgcbench python bench/stages.py --quick     # smoke run → results/stages/quick/

Needs the ``pepys`` and ``scifact`` collections already ingested (bench/pepys.py, bench/scifact.py):
this script never ingests. Writes ``pepys/`` and ``scifact/`` (summary.json and report.md; in
their ``runs/``, kept out of git: results.json, report.html, and stage_events.json -- what each
stage did for each query), ``pepys-rerank/`` and
``scifact-rerank/`` when the reranker ran on fewer queries than the rest (with plain hybrid on the
same queries), and ``summary.md``. Stage outcome counts (applied / skipped / fallback, per stage
and configuration) are in each summary.json under ``metadata.stage_outcomes``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import DATA, RESULTS, client, write

import pgcite
from pgcite.evaluate import EvalResult, GoldenQuery, GoldenSet, SearchOutcome, evaluate, load_golden
from pgcite.evaluate._collection import CHUNKS_PER_DOCUMENT, embed_queries, run_metadata

K = 10  # documents scored
TOP_K = K * CHUNKS_PER_DOCUMENT  # chunks asked for (collection_searcher's depth convention)
# Every configuration starts from "all stages off" so a collection's own stage settings cannot
# leak into the baseline.
OFF: dict[str, Any] = {"route": False, "decompose": False, "hyde": False, "rerank": False,
                       "boosts": []}
LLM_STAGE_TIMEOUT_S = 10.0  # route / decompose / hyde, for the SmolLM2 runs (default 1.5-2.5 s)
RERANK_DEPTH = 20
RECENCY = {"kind": "recency", "half_life_days": 365}
PEPYS_KINDS = ("fact", "keyword", "paraphrase", "cutoff", "absent")


@dataclass(frozen=True)
class Spec:
    name: str
    stages: dict[str, Any]
    llm: bool  # run on the client that has SmolLM2 (and the LLM reranker)
    only: str | None = None  # dataset name, when the stage makes sense on one only
    subset: bool = False  # the reranker: --rerank-queries queries only


def specs(rerank_timeout: float) -> list[Spec]:
    llm_timeouts = {"route": LLM_STAGE_TIMEOUT_S, "decompose": LLM_STAGE_TIMEOUT_S,
                    "hyde": LLM_STAGE_TIMEOUT_S, "rerank": rerank_timeout}
    return [
        Spec("hybrid", {}, llm=False),
        Spec("+route (heuristic)", {"route": True}, llm=False),
        Spec("+route (LLM when unsure)", {"route": True, "timeouts": llm_timeouts}, llm=True),
        Spec("+decompose (heuristic)", {"decompose": True}, llm=False),
        Spec("+decompose (LLM)", {"decompose": True, "timeouts": llm_timeouts}, llm=True),
        Spec("+hyde (SmolLM2)", {"hyde": True, "timeouts": llm_timeouts}, llm=True),
        Spec("+boost (recency, half-life 365 d)", {"boosts": [RECENCY]}, llm=False,
             only="pepys"),
        Spec("+all (route+decompose+hyde, LLM)",
             {"route": True, "decompose": True, "hyde": True, "timeouts": llm_timeouts},
             llm=True),
        Spec(f"+rerank (LLM reranker, SmolLM2, depth {RERANK_DEPTH})",
             {"rerank": True, "rerank_depth": RERANK_DEPTH, "timeouts": llm_timeouts},
             llm=True, subset=True),
    ]


# --- recording what the stages did ---------------------------------------------------------------


@dataclass
class StageLog:
    """Per configuration: outcome counts per stage (overall and per query kind), the routes
    chosen, and each query's stage events."""

    outcomes: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    by_kind: dict[str, dict[str, Counter[str]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(Counter)))
    routes: Counter[str] = field(default_factory=Counter)
    events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def add(self, query: GoldenQuery, stages: list[Any]) -> None:
        self.events[query.id] = [{"stage": e.stage, "outcome": e.outcome,
                                  "detail": e.detail[:200], "ms": round(e.ms, 1)}
                                 for e in stages]
        for event in stages:
            self.outcomes[event.stage][event.outcome] += 1
            self.by_kind[query.kind][event.stage][event.outcome] += 1
            if event.stage == "route":
                # detail: "<route> (<how>): <reason>", how = heuristic | LLM | heuristic (LLM
                # router failed: …)
                route = event.detail.split(" ", 1)[0]
                how = ("heuristic, LLM failed" if "LLM router failed" in event.detail
                       else "LLM" if event.detail.startswith(f"{route} (LLM)") else "heuristic")
                self.routes[f"{route} ({how})"] += 1

    def fallbacks(self) -> int:
        return sum(c.get("fallback", 0) for c in self.outcomes.values())

    def dump(self) -> dict[str, Any]:
        return {
            "outcomes": {s: dict(c) for s, c in sorted(self.outcomes.items())},
            "by_kind": {k: {s: dict(c) for s, c in sorted(v.items())}
                        for k, v in self.by_kind.items()},
            "routes": dict(self.routes.most_common()),
        }


def staged_searcher(col: pgcite.Collection, vectors: Mapping[str, Any], stages: dict[str, Any],
                    log: StageLog, progress: Callable[[GoldenQuery, float, list[Any]], None]
                    ) -> Callable[[GoldenQuery], SearchOutcome]:
    """collection_searcher's conventions (hybrid, 20 chunks, cutoff as a filter, shared query
    vectors) with ``stages=`` passed through and ``result.stages`` recorded.

    ``total`` is the wall time of ``col.search`` (the stages included); the library's own
    ``total`` under stages covers one retrieval only, so it is kept as ``search_total``."""
    plan = {**OFF, **stages}

    def search(query: GoldenQuery) -> SearchOutcome:
        started = time.perf_counter()
        result = col.search(query.text, top_k=TOP_K, mode="hybrid", filters={"cutoff": query.cutoff},
                            query_vector=vectors[query.id], stages=plan)
        wall_ms = (time.perf_counter() - started) * 1000
        timings = dict(result.timings_ms)
        if "total" in timings:
            timings["search_total"] = timings.pop("total")
        timings["total"] = wall_ms
        log.add(query, list(result.stages))
        progress(query, wall_ms, list(result.stages))
        return SearchOutcome(hits=result.hits, confidence=result.confidence, timings_ms=timings)

    return search


# --- keeping configurations independent ------------------------------------------------------------


def clear_hyde_cache() -> None:
    """HyDE caches passages and vectors per question: without this the second HyDE
    configuration would get the first one's passages for free (same quality, false latency)."""
    from pgcite.retrieve import _hyde

    for cache in (_hyde._PASSAGES, _hyde._VECTORS):
        with cache._lock:
            cache._data.clear()


def drain(chat: Any) -> float:
    """Wait until no LLM call is left running: a call that timed out keeps computing in the
    background (llama.cpp cannot be interrupted) and would slow the next configuration down.
    Returns the seconds waited."""
    lock = getattr(chat, "_lock", None)
    started = time.perf_counter()
    quiet = 0
    while quiet < 3 and time.perf_counter() - started < 900:
        # call_bounded runs each call on a thread of its own, named so that it can be seen here
        busy = ((lock is not None and lock.locked())
                or any(t.name == "pgcite-bounded" for t in threading.enumerate()))
        quiet = 0 if busy else quiet + 1
        time.sleep(0.3)
    return max(0.0, time.perf_counter() - started - 0.9)


# --- running ---------------------------------------------------------------------------------------


def subset(golden: GoldenSet, queries: list[GoldenQuery]) -> GoldenSet:
    return golden.model_copy(update={"queries": queries})


def balanced(golden: GoldenSet, n: int) -> GoldenSet:
    """``n`` queries taken round-robin over the kinds (each kind's in file order), kept in file
    order: the first ``n`` queries when there is one kind (SciFact)."""
    pools = {kind: [q for q in golden.queries if q.kind == kind] for kind in golden.kinds()}
    picked: set[str] = set()
    while len(picked) < n and any(pools.values()):
        for pool in pools.values():
            if pool and len(picked) < n:
                picked.add(pool.pop(0).id)
    return subset(golden, [q for q in golden.queries if q.id in picked])


def pepys_queries(golden: GoldenSet, quick: bool) -> GoldenSet:
    if not quick:
        return golden
    picked: list[GoldenQuery] = []
    for kind in PEPYS_KINDS:  # two of each kind, in file order
        picked += [q for q in golden.queries if q.kind == kind][:2]
    return subset(golden, picked)


# The script that builds each collection this benchmark reads (the rest: bench/NAME.py).
BUILT_BY = {"pepys_ctx": "contextual.py", "scifact_ctx": "contextual.py"}


def open_collection(c: pgcite.Client, name: str) -> pgcite.Collection:
    try:
        return c.collection(name)
    except pgcite.CollectionNotFound:
        where = (os.environ.get("PGCITE_DATA_DIR") or
                 ("PGCITE_DATABASE_URL" if "PGCITE_DATABASE_URL" in os.environ else "bench/.data"))
        builder = BUILT_BY.get(name, f"{name}.py")
        raise SystemExit(
            f"stages.py: no collection {name!r} in {where}. This benchmark never ingests: run "
            f"bench/{builder} first with the same PGCITE_DATA_DIR / PGCITE_DATABASE_URL "
            "(e.g. PGCITE_DATA_DIR=/tmp/pgcbench).") from None


@dataclass
class Dataset:
    name: str
    golden: GoldenSet
    plain: pgcite.Collection  # client without models
    llm: pgcite.Collection  # client with SmolLM2 and the LLM reranker


Events = dict[str, dict[str, list[dict[str, Any]]]]  # configuration -> query id -> events


def run_dataset(ds: Dataset, chosen: list[Spec], *, rerank_queries: int, chat: Any,
                extra: dict[str, Any]) -> list[tuple[str, EvalResult, Events]]:
    """Every configuration over the dataset, each in its own harness call (so the LLM backlog
    and the HyDE cache can be reset between them), merged into one result; the reranker on a
    prefix of the queries gets its own result (with the baseline on the same prefix) unless
    that prefix is the whole set."""
    vectors, embed_ms = embed_queries(ds.plain.view(), ds.golden)
    warm = ds.golden.queries[0]
    for col in (ds.plain, ds.llm):  # connection pools and caches, not measured
        for plan in ({**OFF, "route": True}, OFF, OFF, OFF):
            col.search(warm.text, top_k=TOP_K, query_vector=vectors[warm.id], stages=plan)
    n = len(ds.golden.queries)
    rerank_n = min(rerank_queries, n)
    logs: dict[str, StageLog] = {}
    seconds: dict[str, float] = {}
    drained: dict[str, float] = {}
    results: dict[str, EvalResult] = {}
    extra_results: dict[str, EvalResult] = {}

    def one(spec: Spec, golden: GoldenSet, label: str) -> EvalResult:
        col = ds.llm if spec.llm else ds.plain
        log = logs[label] = StageLog()
        total = len(golden.queries)
        if spec.llm:
            clear_hyde_cache()
            drained[label] = round(drain(chat), 1)
        done = [0]

        def progress(query: GoldenQuery, ms: float, events: list[Any]) -> None:
            done[0] += 1
            what = ", ".join(f"{e.stage}:{e.outcome}" for e in events) or "-"
            print(f"  [{ds.name}] {label} {done[0]}/{total} {query.id} ({query.kind}) "
                  f"{ms / 1000:.1f} s  {what}", file=sys.stderr, flush=True)

        started = time.perf_counter()
        result = evaluate(golden, {label: staged_searcher(col, vectors, spec.stages, log,
                                                          progress)},
                          k=K, progress=False)
        seconds[label] = round(time.perf_counter() - started, 1)
        print(f"[{ds.name}] {label}: {seconds[label]:.0f} s, nDCG@10 "
              f"{result.configurations[label].overall.get('ndcg@10', float('nan')):.3f}, "
              f"stages {log.dump()['outcomes']}", file=sys.stderr, flush=True)
        return result

    for spec in chosen:
        if spec.only and spec.only != ds.name:
            continue
        if not spec.subset or rerank_n >= n:
            results[spec.name] = one(spec, ds.golden, spec.name)
        elif rerank_n > 0:
            prefix = balanced(ds.golden, rerank_n)
            base = Spec(f"hybrid (subset of {rerank_n})", {}, llm=False)
            label = f"{spec.name} (subset of {rerank_n})"
            extra_results[base.name] = one(base, prefix, base.name)
            extra_results[label] = one(spec, prefix, label)

    def merged(parts: dict[str, EvalResult], note: str | None) -> tuple[EvalResult, Events]:
        first = next(iter(parts.values()))
        meta = {
            **extra,
            "queries": first.golden.queries,
            "query_ids": [row.id for row in next(iter(first.configurations.values())).queries],
            "stage_outcomes": {k: logs[k].dump()["outcomes"] for k in parts},
            "stage_outcomes_by_kind": {k: logs[k].dump()["by_kind"] for k in parts},
            "route_choices": {k: logs[k].dump()["routes"] for k in parts if logs[k].routes},
            "fallbacks": {k: logs[k].fallbacks() for k in parts},
            "config_seconds": {k: seconds[k] for k in parts},
            "llm_backlog_drained_s": {k: drained[k] for k in parts if k in drained},
            "query_embed_ms_p50": round(statistics.median(embed_ms), 2) if embed_ms else None,
            "stage_events_file": "stage_events.json",
        }
        notes = list(first.notes)
        if note:
            notes.append(note)
        result = first.model_copy(update={
            "configurations": {k: r.configurations[k] for k, r in parts.items()},
            "metadata": run_metadata(ds.plain.view(), meta), "notes": notes})
        return result, {k: logs[k].events for k in parts}

    out = [(ds.name, *merged(results, None))]
    if extra_results:
        out.append((f"{ds.name}-rerank", *merged(
            extra_results,
            f"The LLM reranker ran on {rerank_n} of the {n} queries only ("
            + ("the first of each kind, round-robin" if len(ds.golden.kinds()) > 1
               else "the first ones")
            + f": {RERANK_DEPTH} passages per call is slow with SmolLM2 on this machine); the "
            "baseline here is plain hybrid on the same queries.")))
    return out


# --- summary ---------------------------------------------------------------------------------------


def _ndcg_cell(conf: Any, found_in: EvalResult | None, subset: EvalResult | None) -> str:
    """nDCG@10; for a configuration run on a query subset, the hybrid baseline on it too."""
    text = _fmt(conf.overall.get("ndcg@10"))
    if subset is not None and found_in is subset:
        base = next(c for n, c in subset.configurations.items() if n.startswith("hybrid"))
        text += (f" ({len(conf.queries)} queries; hybrid on them "
                 f"{_fmt(base.overall.get('ndcg@10'))})")
    return text


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def summary(results: dict[str, EvalResult], chosen: list[Spec], meta: dict[str, Any]) -> str:
    pepys, scifact = results.get("pepys"), results.get("scifact")
    pr, sr = results.get("pepys-rerank"), results.get("scifact-rerank")

    def config(result: EvalResult | None, name: str) -> Any:
        if result is None:
            return None
        return result.configurations.get(name) or next(
            (c for n, c in result.configurations.items() if n.startswith(name + " (subset of")), None)

    def where(name: str, base: EvalResult | None, extra: EvalResult | None
              ) -> tuple[Any, EvalResult | None]:
        found = config(base, name)
        if found is not None:
            return found, base
        found = config(extra, name)
        return (found, extra) if found is not None else (None, None)

    lines = [
        "# Optional retrieval stages, per query kind",
        "",
        f"{meta['when']}; wall time {meta['wall_minutes']:.1f} min; {meta['llm_note']}; "
        f"hybrid convex, top {K} documents ({TOP_K} chunks).",
        f"Pepys: {meta['pepys_queries']} queries (collection `{meta['pepys_collection']}`); "
        f"SciFact train: first {meta['scifact_queries']} "
        f"claims; reranker: {meta['rerank_note']}.",
        f"Timeouts for the LLM runs: route/decompose/hyde {LLM_STAGE_TIMEOUT_S:g} s, rerank "
        f"{meta['rerank_timeout']:g} s. p50 = median wall time of `col.search` per query "
        "(query embedding precomputed, excluded for every configuration).",
        "",
        "| configuration | Pepys nDCG@10 | fact | keyword | paraphrase | cutoff | absent pass "
        "| SciFact nDCG@10 | p50 ms Pepys | p50 ms SciFact | fallbacks (P / S) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for spec in chosen:
        pc, p_res = where(spec.name, pepys, pr)
        sc, s_res = where(spec.name, scifact, sr)
        if pc is None and sc is None:
            continue
        label = spec.name
        cells = [label]
        if pc is not None:
            cells.append(_ndcg_cell(pc, p_res, pr))
            for kind in PEPYS_KINDS[:4]:
                cells.append(_fmt(pc.by_kind.get(kind, {}).get("ndcg@10")))
            cells.append(_fmt(pc.by_kind.get("absent", {}).get("pass_rate"), 2))
        else:
            cells += ["n/a"] * 6
        if sc is not None:
            cells.append(_ndcg_cell(sc, s_res, sr))
        else:
            cells.append("n/a")
        for c in (pc, sc):
            lat = c.latency.get("total") if c is not None else None
            cells.append(_fmt(lat.p50, 0) if lat is not None else "n/a")
        falls = []
        for c, res in ((pc, p_res), (sc, s_res)):
            falls.append("–" if c is None or res is None
                         else str(res.metadata["fallbacks"].get(c.name, 0)))
        cells.append(" / ".join(falls))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Stage outcomes (applied / skipped / fallback, per stage)", "",
              "| configuration | dataset | outcomes | routes chosen |", "|---|---|---|---|"]
    for key, res in results.items():
        for name in res.configurations:
            outcomes = res.metadata["stage_outcomes"].get(name) or {}
            text = "; ".join(f"{s}: " + ", ".join(f"{o} {n}" for o, n in sorted(c.items()))
                             for s, c in outcomes.items()) or "no stage ran"
            routes = res.metadata.get("route_choices", {}).get(name) or {}
            rtext = ", ".join(f"{r} {n}" for r, n in routes.items()) or "–"
            lines.append(f"| {name} | {key} | {text} | {rtext} |")
    lines += ["", "Per-configuration reports: `pepys/report.md`, `scifact/report.md`"
              + (", `scifact-rerank/report.md`" if sr is not None else "")
              + (", `pepys-rerank/report.md`" if pr is not None else "")
              + " (nDCG, Recall, MRR per kind; latency percentiles; per-query stage events in "
              "`runs/stage_events.json` of each, written by a run, not kept in git).", ""]
    return "\n".join(lines)


# --- main ------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Measure each optional retrieval stage (route, decompose, HyDE, rerank, "
        "recency boost) against plain hybrid search, per query kind, on the Pepys golden set "
        "and a SciFact train subset. LLM stages use the packaged SmolLM2-135M (llama-cpp). "
        "Needs the pepys and scifact collections already ingested; select the database with "
        "PGCITE_DATA_DIR (e.g. /tmp/pgcbench) or PGCITE_DATABASE_URL.")
    parser.add_argument("--scifact-queries", type=int, default=100, metavar="N",
                        help="the first N SciFact train claims (default 100)")
    parser.add_argument("--rerank-queries", type=int, default=None, metavar="N",
                        help="run the LLM reranker on N queries of each set only: SciFact's "
                        "first N, Pepys' first of each kind round-robin (default 40; 2 with "
                        "--quick; 0 skips it)")
    parser.add_argument("--rerank-timeout", type=float, default=120.0, metavar="S",
                        help="rerank stage timeout in seconds (default 120: one SmolLM2 call "
                        "over 20 passages takes ~40 s here, so the library default of 5 s "
                        "would always fall back)")
    parser.add_argument("--no-llm", action="store_true",
                        help="only the model-free configurations (router, decomposition, "
                        "boost heuristics), e.g. with --scifact-queries 809; written to "
                        "results/stages/no-llm/")
    parser.add_argument("--pepys-collection", default="pepys", metavar="NAME",
                        help="the Pepys collection to search (default pepys; pepys_ctx is the "
                        "one bench/contextual.py builds with contextual headers)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 10 Pepys queries (2 per kind) + 10 SciFact claims, "
                        "written to results/stages/quick/")
    args = parser.parse_args()
    if args.rerank_timeout <= 0 or args.rerank_timeout > 120:
        parser.error("--rerank-timeout must be in (0, 120] (the Stages model's limit)")
    rerank_queries = args.rerank_queries if args.rerank_queries is not None else (
        2 if args.quick else 40)
    scifact_n = 10 if args.quick else args.scifact_queries
    out_name = "stages/quick" if args.quick else "stages/no-llm" if args.no_llm else "stages"

    from pgcite.llm import LLMConfig, make_chat_model
    from pgcite.retrieve._rerank import LLMReranker

    wall = time.perf_counter()
    pepys_golden = pepys_queries(load_golden(DATA / "pepys-diary" / "golden.jsonl"), args.quick)
    sci_full = load_golden(DATA / "scifact", split="train")
    sci_golden = subset(sci_full, sci_full.queries[:scifact_n])
    # The chat model's own deadline is generous: the stage timeouts are what is measured.
    chosen = [s for s in specs(args.rerank_timeout) if not (args.no_llm and s.llm)]
    chat = None if args.no_llm else make_chat_model(LLMConfig(kind="llama-cpp", timeout_s=300))
    if chat is not None:
        chat.chat("You are terse.", "Say hi.", max_tokens=4)  # load the model before timing
    results: dict[str, EvalResult] = {}
    with client() as plain_client:
        if plain_client.llm() is not None or plain_client.reranker() is not None:
            raise SystemExit("stages.py: PGCITE_LLM / PGCITE_RERANKER are set; unset them so "
                             "the model-free configurations really have no model")
        with pgcite.Client(plain_client.settings, llm=chat,
                           reranker=LLMReranker(chat) if chat else None) as llm_client:
            extra = {
                "benchmark": "stages", "k": K, "top_k_chunks": TOP_K, "mode": "hybrid",
                "quick": args.quick,
                "llm": f"llama-cpp {Path(getattr(chat, 'model_path', '')).name}" if chat
                else "none (--no-llm)", "pepys_collection": args.pepys_collection,
                "llm_timeouts_s": {"route": LLM_STAGE_TIMEOUT_S,
                                   "decompose": LLM_STAGE_TIMEOUT_S,
                                   "hyde": LLM_STAGE_TIMEOUT_S, "rerank": args.rerank_timeout},
                "rerank_depth": RERANK_DEPTH, "rerank_queries": rerank_queries,
                "configurations": {s.name: {**OFF, **s.stages} for s in chosen},
                "latency_note": "total = wall time of col.search with its stages; the query "
                "embedding is precomputed and excluded for every configuration; HyDE's cache "
                "is cleared and the LLM backlog drained before each LLM configuration",
            }
            for name, golden in (("pepys", pepys_golden), ("scifact", sci_golden)):
                col_name = args.pepys_collection if name == "pepys" else name
                ds = Dataset(name, golden, open_collection(plain_client, col_name),
                             open_collection(llm_client, col_name))
                for key, result, events in run_dataset(
                        ds, chosen, rerank_queries=rerank_queries, chat=chat, extra=extra):
                    results[key] = result
                    folder = write(result, f"{out_name}/{key}")
                    (folder / "runs" / "stage_events.json").write_text(
                        json.dumps(events, indent=1, ensure_ascii=False), encoding="utf-8")
    minutes = (time.perf_counter() - wall) / 60
    meta = {
        "when": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_minutes": minutes,
        "pepys_queries": len(pepys_golden.queries),
        "scifact_queries": len(sci_golden.queries),
        "rerank_timeout": args.rerank_timeout,
        "llm_note": ("no LLM (--no-llm: model-free configurations only)" if args.no_llm
                     else "SmolLM2-135M (llama-cpp) for every LLM stage"),
        "pepys_collection": args.pepys_collection,
        "rerank_note": ("not run" if rerank_queries == 0 or args.no_llm else
                        f"{rerank_queries} queries of each set (SciFact: the first; Pepys: "
                        f"round-robin over kinds), depth {RERANK_DEPTH}"),
    }
    path = RESULTS / out_name / "summary.md"
    path.write_text(summary(results, chosen, meta), encoding="utf-8")
    print(f"wrote {path}; total {minutes:.1f} min", file=sys.stderr)


if __name__ == "__main__":
    main()
