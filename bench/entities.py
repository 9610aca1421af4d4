"""Entities on the Pepys diary, side by side in one run:

1. The Pepys golden set (fact, keyword, paraphrase, cutoff, absent) per query kind: the search
   without the entity boost (the default before the router applied it), the router's default
   (entity boost "auto": entity questions only) and the boost on every question (several
   weights).
2. A judged who/where set (bench/entities/whowhere.jsonl, judgments checked with grep): the
   entity path (`near`, ranked entities with citations) against reading the default search's top
   10 passages (without the boost, with the router's default), the entity filter and the boost
   on every question: how many of the expected people/places each
   surfaces, whether each entity's citations really mention the anchor, and cutoff violations on
   every path (search, filter, boost, near, graph).
3. The same who/where set answered (``Collection.answer``, its defaults, the question's cutoff)
   without and with the entity graph's facts (``entity_facts``): answer recall (share of the
   expected people/places named in the answer), support (share of cited passages that mention
   the anchor and, for a fact's citation, the entity it states), citations per answer,
   abstentions and cutoff violations (cited or given passages after the cutoff).

4. With --xquad: the who/where/how-often questions of XQuAD en (factoid questions, mostly not
   about companions) answered the same two ways, scored against their gold answers
   (containment, first-sentence containment, citation precision): what the facts cost where
   they are not what was asked.

    python bench/entities.py                 # a subset of the diary (see --subset), all queries
    python bench/entities.py --answers-only  # only part 3 (the rest of summary.json is kept)
    python bench/entities.py --answers-only --xquad   # parts 3 and 4
    python bench/entities.py --full          # the whole diary (the full embedding, ~1 h on 2 cores)

Writes bench/results/entities/ (summary.json, report.md) and the golden-set report beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import re
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import (
    DATA,
    RESULTS,
    ROOT,
    client,
    ensure_collection,
    read_jsonl,
    run_stamp,
    stamp_line,
    write,
)

import pgcite
from pgcite.evaluate import Searcher, evaluate, load_golden
from pgcite.evaluate._collection import collection_searcher, embed_queries, run_metadata
from pgcite.retrieve._route import entity_question

DEPTH = 100
WEIGHTS = (0.25, 0.5, 1.0)
NO_BOOST = "no entity boost (default before)"
AUTO = "router default (entity boost auto)"
ALIASES = ROOT / "entities" / "pepys_aliases.yaml"
WHOWHERE = ROOT / "entities" / "whowhere.jsonl"
SUBSET_HEAD = 600  # the subset: the diary's first entries plus every entry the golden set judges


def subset_file(root: Path, out: Path) -> Path:
    """The first SUBSET_HEAD entries and every judged (relevant or must-not) entry."""
    judged: set[str] = set()
    for query in read_jsonl(root / "golden.jsonl"):
        judged |= set(query["relevant"]) | set(query.get("must_not") or [])
    rows = [e for i, e in enumerate(read_jsonl(root / "entries.jsonl"))
            if i < SUBSET_HEAD or e["_id"] in judged]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                   encoding="utf-8")
    return out


def golden_side_by_side(col: pgcite.Collection, golden_path: Path) -> dict[str, Any]:
    golden = load_golden(golden_path)
    view = col.view()
    vectors, _ = embed_queries(view, golden)
    configs: dict[str, Searcher] = {
        NO_BOOST: collection_searcher(view, mode="hybrid", depth=DEPTH, vectors=vectors,
                                      stages={"entity_boost": 0}),
        AUTO: collection_searcher(view, mode="hybrid", depth=DEPTH, vectors=vectors,
                                  stages={"entity_boost": "auto"})}
    for weight in WEIGHTS:
        configs[f"entity boost {weight:g}, every question"] = collection_searcher(
            view, mode="hybrid", depth=DEPTH, vectors=vectors,
            stages={"entity_boost": weight})
    result = evaluate(golden, configs, k=10, progress=sys.stderr.isatty(),
                      metadata=run_metadata(view, {"benchmark": "pepys-entities",
                                                   "depth": DEPTH}))
    write(result, "entities/golden")
    fact = _per_query(view, golden, result, "fact")
    out: dict[str, Any] = {"entity questions": {
        kind: f"{sum(entity_question(q.text) is not None for q in golden.queries if q.kind == kind)}"
              f"/{sum(q.kind == kind for q in golden.queries)}"
        for kind in sorted({q.kind for q in golden.queries})}}
    summary = json.loads((RESULTS / "entities" / "golden" / "summary.json").read_text())
    for name, config in summary["configurations"].items():
        out[name] = {"overall": config.get("overall", {}), "by_kind": config.get("by_kind", {})}
    out["fact questions"] = fact
    return out


def _per_query(view: Any, golden: Any, result: Any, kind: str) -> list[dict[str, Any]]:
    """Each question of ``kind``: the entities recognised in it and its nDCG@10 per
    configuration (why a kind moves)."""
    from pgcite.retrieve._entities import recognise
    from pgcite.retrieve._filters import Filters

    rows = []
    with view.connection() as conn:
        for q in golden.queries:
            if q.kind != kind:
                continue
            found = recognise(conn, view.info, view.snapshot, q.text, Filters(cutoff=q.cutoff))
            rows.append({"id": q.id, "query": q.text,
                         "entities": [f"{e.text} ({e.chunks})" for e in found],
                         "ndcg@10": {name: next(r.metrics.get("ndcg@10") for r in c.queries
                                                if r.id == q.id)
                                     for name, c in result.configurations.items()}})
    return rows


def _dates(col: pgcite.Collection, ids: set[str]) -> dict[str, tuple[dt.date | None, str]]:
    """Citation id -> (date_end, body) in the active snapshot."""
    from psycopg import sql

    if not ids:
        return {}
    snap = col.active_snapshot()
    with col.client.connection() as conn:
        rows = conn.execute(sql.SQL(
            "SELECT c.id, c.date_end, c.body FROM {s}.chunks c JOIN {s}.snapshot_members m"
            " USING (version_pk) WHERE m.snapshot_id = %s AND c.id = ANY(%s)").format(
                s=col.info.schema_id), (snap.snapshot_id, list(ids))).fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


def _violations(col: pgcite.Collection, ids: set[str], cutoff: str | None) -> int:
    if cutoff is None:
        return 0
    limit = dt.date.fromisoformat(cutoff)
    return sum(1 for d, _ in _dates(col, ids).values() if d is None or d > limit)


def _found(expected: dict[str, str], texts: list[str]) -> set[str]:
    return {name for name, pattern in expected.items()
            if any(re.search(pattern, t, re.IGNORECASE) for t in texts)}


def whowhere(col: pgcite.Collection) -> dict[str, Any]:
    """Per question and path: expected entities surfaced (recall), support, violations."""
    questions = read_jsonl(WHOWHERE)
    paths: dict[str, dict[str, list[float]]] = {}
    violations: dict[str, int] = {}
    per_question = []

    def add(path: str, metric: str, value: float) -> None:
        paths.setdefault(path, {}).setdefault(metric, []).append(value)

    for q in questions:
        expected, cutoff = q["expected"], q["cutoff"]
        filters: dict[str, Any] = {"cutoff": cutoff} if cutoff else {}
        row: dict[str, Any] = {"id": q["id"]}
        # the entity path: ranked entities near the anchor, with citations
        started = time.perf_counter()
        near = col.entities(near=q["near"], kind=q["kind"], filters=filters, limit=10)
        add("near (entity path)", "ms", (time.perf_counter() - started) * 1000)
        names = [f"{e.name} {e.key}" for e in near.entities]
        got = _found(expected, names)
        add("near (entity path)", "recall", len(got) / len(expected))
        cited = {c for e in near.entities for c in e.citations}
        bodies = _dates(col, cited)
        supported = [bool(re.search(q["anchor"], bodies[c][1])) for c in cited if c in bodies]
        add("near (entity path)", "support", sum(supported) / len(supported) if supported else 0)
        violations["near"] = violations.get("near", 0) + _violations(col, cited, cutoff)
        row["near"] = [e.name for e in near.entities[:5]]
        graph = col.entities(filters=filters, edges=50, limit=1)
        violations["graph"] = violations.get("graph", 0) + _violations(
            col, {c for e in graph.edges for c in e.citations}, cutoff)
        # reading the top 10 passages of a search: default, entity filter, entity boost
        for path, kwargs in (("search top 10 (no entity boost)",
                              {"stages": {"entity_boost": 0}}),
                             ("search top 10 (router default: entity boost auto)", {}),
                             ("search top 10 (entity filter, no boost)",
                              {"filters": {**filters, "entity": q["near"]},
                               "stages": {"entity_boost": 0}}),
                             ("search top 10 (entity boost 0.5, every question)",
                              {"stages": {"entity_boost": 0.5}}),
                             ("search top 10 (entity boost 1, every question)",
                              {"stages": {"entity_boost": 1.0}})):
            started = time.perf_counter()
            result = col.search(q["question"], top_k=10,
                                filters=kwargs.get("filters", filters),
                                stages=kwargs.get("stages"), snippets=False)
            add(path, "ms", (time.perf_counter() - started) * 1000)
            got = _found(expected, [h.body for h in result.hits])
            add(path, "recall", len(got) / len(expected))
            add(path, "support", sum(bool(re.search(q["anchor"], h.body)) for h in result.hits)
                / max(1, len(result.hits)))
            violations[path] = violations.get(path, 0) + _violations(
                col, {h.id for h in result.hits}, cutoff)
        per_question.append(row)
    table = {path: {m: round(statistics.fmean(v), 3) for m, v in metrics.items()}
             for path, metrics in paths.items()}
    return {"questions": len(questions), "paths": table, "cutoff_violations": violations,
            "per_question": per_question}


ANSWERS = {"answer (entity_facts=False)": False, "answer (entity facts, the default)": True,
           "answer (entity facts without their rules: every one stated)": True}
UNRULED = "answer (entity facts without their rules: every one stated)"


@contextlib.contextmanager
def facts_rules(name: str) -> Iterator[None]:
    """The answerer's rules for stating a fact (pgcite.answer._facts: MIN_TOP, MIN_EACH, the
    labels a count is stated for, the questions a count answers) switched off for the UNRULED
    row: the ablation."""
    from pgcite.answer import _facts
    from pgcite.retrieve._entities import KIND_LABELS

    kept = (_facts.MIN_TOP, _facts.MIN_EACH, _facts._COUNTED, _facts.asks_presence)
    if name == UNRULED:
        _facts.MIN_TOP, _facts.MIN_EACH = 1, 1
        _facts._COUNTED = frozenset(label for labels in KIND_LABELS.values()
                                    for label in labels) | {"EVENT", "WORK_OF_ART", "MISC"}
        _facts.asks_presence = lambda question: True
    try:
        yield
    finally:
        _facts.MIN_TOP, _facts.MIN_EACH, _facts._COUNTED, _facts.asks_presence = kept
# Leading initials and titles of a stated name ("W. Batten", "Sir G. Carteret"): the passage
# must name the rest.
_NAME_SKIP = re.compile(r"^(?:[A-Z]\.|sir|lord|lady|mr|mrs|dr|the)\.?$", re.IGNORECASE)


def _name_pattern(name: str) -> str:
    words = name.split()
    while len(words) > 1 and _NAME_SKIP.match(words[0]):
        words = words[1:]
    return r"\b" + r"\s+".join(re.escape(w) for w in words) + r"\b"


def whowhere_answers(col: pgcite.Collection) -> dict[str, Any]:
    """The who/where set answered without and with the entity facts (see the module doc)."""
    questions = read_jsonl(WHOWHERE)
    metrics: dict[str, dict[str, list[float]]] = {name: {} for name in ANSWERS}
    violations = dict.fromkeys(ANSWERS, 0)
    per_question = []
    for q in questions:
        row: dict[str, Any] = {"id": q["id"]}
        for name, facts in ANSWERS.items():
            started = time.perf_counter()
            with facts_rules(name):
                answer = col.answer(q["question"], filters={"cutoff": q["cutoff"]},
                                    options={"entity_facts": facts})
            took = (time.perf_counter() - started) * 1000
            bodies = _dates(col, {s.id for s in answer.sources})
            stated: dict[str, list[str]] = {}
            for fact in answer.entities:
                for citation in fact.citations:
                    stated.setdefault(citation, []).append(_name_pattern(fact.name))
            supported = [bool(re.search(q["anchor"], bodies[c][1])) and all(
                re.search(p, bodies[c][1], re.IGNORECASE) for p in stated.get(c, []))
                for c in answer.citations if c in bodies]
            m = metrics[name]
            for metric, value in (
                    ("recall", len(_found(q["expected"], [answer.answer])) / len(q["expected"])),
                    ("abstained", float(answer.abstained)), ("ms", took)):
                m.setdefault(metric, []).append(value)
            if not answer.abstained:
                m.setdefault("citations", []).append(len(answer.citations))
                m.setdefault("support", []).append(
                    sum(supported) / len(supported) if supported else 0.0)
            violations[name] += _violations(col, {s.id for s in answer.sources}, q["cutoff"])
            row[name] = {"abstained": answer.abstained, "citations": len(answer.citations),
                         "entities": [f"{e.name} ({e.passages})" for e in answer.entities]}
        per_question.append(row)
    table = {name: {metric: round(statistics.fmean(v), 3) for metric, v in m.items()}
             for name, m in metrics.items()}
    return {"questions": len(questions), "answers": table, "cutoff_violations": violations,
            "per_question": per_question}


def xquad_answers(c: pgcite.Client) -> dict[str, Any]:
    """XQuAD en's who/where/how-often questions answered without and with the entity facts
    (a collection of its own, with entities: ``xquad_en_entities``)."""
    from pgcite.evaluate._answers import collection_passages, score_answer, summarize
    from pgcite.retrieve._route import entity_ask

    root = DATA / "xquad" / "en"
    golden = load_golden(root)
    col = ensure_collection(c, "xquad_en_entities", [root / "corpus.jsonl"])
    passages = collection_passages(col.view())
    queries = [q for q in golden.queries if entity_ask(q.text) is not None]
    out: dict[str, Any] = {"questions": len(queries), "of": len(golden.queries), "answers": {}}
    for name, facts in ANSWERS.items():
        records, stated = [], 0
        for q in queries:
            started = time.perf_counter()
            with facts_rules(name):
                answer = col.answer(q.text, options={"entity_facts": facts})
            stated += bool(answer.entities)
            records.append(score_answer(
                q, answer=answer.answer, abstained=answer.abstained, cited=answer.citations,
                passages=passages, latency_ms=(time.perf_counter() - started) * 1000))
        out["answers"][name] = {**summarize(records), "with_facts": stated}
    return out


def _xquad_markdown(xquad: dict[str, Any]) -> list[str]:
    lines = ["", f"## XQuAD en: its {xquad['questions']} who/where/how-often questions (of "
             f"{xquad['of']}) answered", "",
             "Factoid questions, mostly not about who is named with whom: what the entity "
             "facts cost where they are not what was asked.", "",
             "| answer | with facts | containment | first-sentence containment | citation "
             "precision | only evidence cited |", "|---|---|---|---|---|---|"]
    for name, m in xquad["answers"].items():
        lines.append(f"| {name} | {m['with_facts']} | {m['containment']:.3f} | "
                     f"{m['first_sentence_containment']:.3f} | {m['citation_precision']:.3f} | "
                     f"{m['cites_only_evidence']:.3f} |")
    return lines


def _answers_markdown(answers: dict[str, Any]) -> list[str]:
    lines = ["", f"## Who/where set answered ({answers['questions']} questions, "
             "`Collection.answer` defaults, each question's cutoff)", "",
             "recall: share of the expected people/places named in the answer text; support: "
             "share of cited passages that mention the anchor and, for a fact's citation, the "
             "entity it states (over answered questions, as citations per answer).", "",
             "| answer | recall | support | citations / answer | abstained | cutoff violations "
             "| ms |", "|---|---|---|---|---|---|---|"]
    for name, m in answers["answers"].items():
        lines.append(f"| {name} | {m['recall']:.3f} | {m.get('support', 0):.3f} | "
                     f"{m.get('citations', 0):.1f} | {m['abstained']:.3f} | "
                     f"{answers['cutoff_violations'][name]} | {m['ms']:.0f} |")
    return lines


PARTS = ("golden", "whowhere", "answers", "xquad_answers")


def _runs(report: dict[str, Any]) -> dict[str, dict[str, Any] | None]:
    """The run each part of the report comes from (None: a run from before runs were stamped)."""
    return {p: report.get("runs", {}).get(p) for p in PARTS if p in report}


def markdown(report: dict[str, Any]) -> str:
    lines = ["# Entities on the Pepys diary", "",
             f"Collection `{report['collection']}` ({report['corpus']}); machine shared by "
             "several jobs: timings are indicative only. Each part's run:", "",
             *(f"- {part}: " + (stamp_line(stamp) if stamp else "an earlier run, not stamped")
               for part, stamp in _runs(report).items()), "",
             "## Golden set, nDCG@10 per query kind (without the boost, the router's default, "
             "the boost on every question)", "",
             "The router's default boosts only entity questions (asks who/where, or routed "
             "keyword-heavy); per kind, the golden questions it counts as such: "
             + ", ".join(f"{k} {v}" for k, v in report["golden"]["entity questions"].items())
             + ".", ""]
    golden = {k: v for k, v in report["golden"].items()
              if k not in ("entity questions", "fact questions")}
    kinds = sorted({k for c in golden.values() for k in c["by_kind"]})
    lines += ["| configuration | overall | " + " | ".join(kinds) + " |",
              "|---|---|" + "---|" * len(kinds)]
    for i, (name, config) in enumerate(golden.items()):
        cells = [f"{config['by_kind'].get(k, {}).get('ndcg@10', float('nan')):.3f}"
                 for k in kinds]
        lines.append(f"| ({i + 1}) {name} | {config['overall'].get('ndcg@10', float('nan')):.3f} | "
                     + " | ".join(cells) + " |")
    names = list(golden)
    lines += ["", "Fact questions one by one: the entities recognised (passages that mention "
              "them), nDCG@10 per configuration in the order above.", "",
              "| question | entities | " + " | ".join(f"({i + 1})" for i in range(len(names)))
              + " |", "|---|---|" + "---|" * len(names)]
    for row in report["golden"]["fact questions"]:
        lines.append(f"| {row['id']} {row['query']} | {', '.join(row['entities']) or '-'} | "
                     + " | ".join(f"{row['ndcg@10'][n]:.2f}" for n in names) + " |")
    ww = report["whowhere"]
    lines += ["", f"## Who/where set ({ww['questions']} judged questions)", "",
              "recall: share of the expected people/places surfaced (in the ranked entities, "
              "or in the text of the 10 passages); support: share of cited passages that "
              "mention the anchor entity.", "",
              "| path | recall | support | ms |", "|---|---|---|---|"]
    for path, metrics in ww["paths"].items():
        lines.append(f"| {path} | {metrics['recall']:.3f} | {metrics['support']:.3f} | "
                     f"{metrics['ms']:.0f} |")
    lines += ["", "Cutoff violations (passages dated after the question's cutoff, any path): "
              + ", ".join(f"{k} {v}" for k, v in ww["cutoff_violations"].items())]
    if "answers" in report:
        lines += _answers_markdown(report["answers"])
    if "xquad_answers" in report:
        lines += _xquad_markdown(report["xquad_answers"])
    return "\n".join([*lines, ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the whole diary, not the subset")
    parser.add_argument("--collection", default=None)
    parser.add_argument("--answers-only", action="store_true",
                        help="only the who/where answers; the rest of summary.json is kept")
    parser.add_argument("--xquad", action="store_true",
                        help="also XQuAD en's who/where/how-often questions answered")
    args = parser.parse_args()
    root = DATA / "pepys-diary"
    source = (root / "entries.jsonl" if args.full
              else subset_file(root, ROOT / ".data" / "pepys-entities-subset.jsonl"))
    name = args.collection or ("pepys" if args.full else "pepys_entities_subset")
    with client() as c:
        col = ensure_collection(c, name, [source], aliases=ALIASES,
                                overrides=pgcite.Overrides(author="Samuel Pepys", corpus="A"))
        out = RESULTS / "entities"
        report: dict[str, Any] = {
            "collection": name,
            "corpus": "whole diary" if args.full else
                      f"first {SUBSET_HEAD} entries + every golden-judged entry",
        }
        kept = (json.loads((out / "summary.json").read_text())
                if (out / "summary.json").exists() else {})
        runs = dict(kept.get("runs", {}))
        stamp = run_stamp()
        if args.answers_only:
            report.update(golden=kept["golden"], whowhere=kept["whowhere"])
        else:
            report.update(golden=golden_side_by_side(col, root / "golden.jsonl"),
                          whowhere=whowhere(col))
            runs.update(golden=stamp, whowhere=stamp)
        report["answers"] = whowhere_answers(col)
        runs["answers"] = stamp
        if args.xquad:
            report["xquad_answers"] = xquad_answers(c)
            runs["xquad_answers"] = stamp
        elif "xquad_answers" in kept:  # measured by an earlier run with --xquad
            report["xquad_answers"] = kept["xquad_answers"]
        report["runs"] = runs
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (out / "report.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
