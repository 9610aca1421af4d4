"""Abstention side by side: today's single cosine threshold, each answerability signal alone, and
the combined logistic score — every rule cross-validated (leave-one-out), never self-calibrated.

    python bench/abstention.py [--collection pepys] [--xquad 1190] [--fit-sample 300]

Pepys: the 40-query golden set, the golden set plus bench/abstention/pepys-extra.jsonl
(61 further hand-judged queries, see bench/abstention/README.md), the golden 40 each decided by
a fit on the other 100 of those 101, and a held-out check: the score fitted on the extra queries
only, applied to the 40 golden ones. XQuAD (English, answerable
only) over a MiniLM collection of its 240 paragraphs: the answer rate under the default
threshold, under the Pepys-fitted score, and under a score fitted on XQuAD itself with SciFact
claims as the absent queries. Also the latency of the hybrid statement with and without the
signal columns, interleaved. Writes bench/results/abstention/summary.json + report.md.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from _common import DATA, RESULTS, ROOT, client, ensure_collection, read_jsonl
from psycopg import sql

import pgcite
from pgcite.answer._pipeline import _asks_after_sources, default_threshold
from pgcite.answer._sentences import split_sentences
from pgcite.embed._registry import embedder_for_key
from pgcite.evaluate import GoldenQuery, load_golden
from pgcite.evaluate._collection import run_metadata
from pgcite.evaluate._fit_abstention import (
    TOP_K,
    Observation,
    Rates,
    features,
    loo_logistic,
    loo_threshold,
    rates,
    wilson,
)
from pgcite.index import with_ctes
from pgcite.retrieve import _sql
from pgcite.retrieve._answerability import FEATURES, SIGNALS, AnswerabilityModel, fit_model
from pgcite.retrieve._filters import Filters
from pgcite.retrieve._search import SearchOptions, prepare_search

OUT = RESULTS / "abstention"


def observe(col: pgcite.Collection,
            queries: Sequence[GoldenQuery]) -> tuple[list[Observation], list[bool]]:
    """Each query searched as an answer searches it; plus whether the temporal rule fires."""
    observations, late = [], []
    for q in queries:
        result = col.search(q.text, top_k=TOP_K, filters={"cutoff": q.cutoff})
        fires = bool(result.hits) and _asks_after_sources(q.text, result.hits) is not None
        observations.append(Observation(id=q.id, kind=q.kind, answerable=q.answerable,
                                        has_hits=bool(result.hits), signals=result.signals,
                                        late=fires))
        late.append(fires)
    return observations, late


def best_sentence_cosine(col: pgcite.Collection, queries: Sequence[GoldenQuery]) -> list[float]:
    """Per query: the highest cosine between the question and any sentence of the answer's
    passages (top 5, its cutoff). An answer-level signal the product does not compute yet:
    measured here to see whether sentence-level evidence helps abstention."""
    embedder = embedder_for_key(col.active_snapshot().embed_model)
    out = []
    for q in queries:
        hits = col.search(q.text, top_k=TOP_K, filters={"cutoff": q.cutoff}).hits
        sentences = [s for hit in hits for s in split_sentences(hit.body)]
        if not sentences:
            out.append(0.0)
            continue
        cosines = embedder.embed_documents(sentences) @ embedder.embed_query(q.text).reshape(-1)
        out.append(float(cosines.max()))
    return out


# The combined score before the query's length (``terms``) joined it, kept as a row so the
# gain of that signal stays visible.
BEFORE_TERMS = tuple(name for name in FEATURES if name != "terms")


def side_by_side(obs: list[Observation], late: list[bool], fixed: float | None,
                 sentence: list[float] | None = None,
                 report_on: slice = slice(None)) -> dict[str, Any]:
    """Every rule's leave-one-out rates on a set of judged queries. Each query is decided by a
    rule fitted on all the others; ``report_on`` picks the queries whose decisions are counted
    (e.g. the golden 40, decided by fits on the other 100 of the 101)."""
    x, y, mask = features(obs, SIGNALS)
    combined_x, _, _ = features(obs, FEATURES)
    rows: dict[str, Rates] = {}
    on = np.arange(len(obs))[report_on]

    def counted(decided: Sequence[bool]) -> Rates:
        return rates([bool(decided[i]) for i in on], y[on])

    if fixed is not None:
        cosine = x[:, SIGNALS.index("cosine")]
        rows[f"today: abstain below cosine {fixed:.2f} (fixed; chosen earlier on the 40 golden queries)"] = \
            counted([not m or c < fixed for c, m in zip(cosine, mask, strict=True)])
    single = {name: loo_threshold(x[:, j], y, mask, name) for j, name in enumerate(SIGNALS)}
    for name, decided in single.items():
        label = "today's rule: cosine threshold" if name == "cosine" else f"{name} threshold"
        rows[f"{label} (calibrated, LOO)"] = counted(decided)
    combined = loo_logistic(combined_x, y, mask)
    rows[f"combined score ({', '.join(FEATURES)}; logistic, LOO)"] = counted(combined)
    before = loo_logistic(features(obs, BEFORE_TERMS)[0], y, mask, names=BEFORE_TERMS)
    rows["previous combined score (without terms; logistic, LOO)"] = counted(before)
    rows["cosine threshold + temporal rule (LOO)"] = counted(
        [a or t for a, t in zip(single["cosine"], late, strict=True)])
    rows["previous combined score + temporal rule (LOO)"] = counted(
        [a or t for a, t in zip(before, late, strict=True)])
    rows["**combined score + temporal rule (LOO; what an answer does)**"] = counted(
        [a or t for a, t in zip(combined, late, strict=True)])
    if sentence is not None:
        with_sentence = loo_logistic(np.hstack([combined_x, np.c_[sentence]]), y, mask,
                                     names=[*FEATURES, "best_sentence_cosine"])
        rows["combined score + best sentence cosine + temporal rule (LOO; bench only, not in "
             "the product)"] = counted([a or t for a, t in zip(with_sentence, late,
                                                              strict=True)])
    return {"answerable": int(y[on].sum()), "absent": int((1 - y[on]).sum()),
            "rules": {k: v.model_dump(mode="json") for k, v in rows.items()}}


def fitted(obs: list[Observation], key: str, name: str) -> AnswerabilityModel:
    x, y, mask = features(obs, FEATURES)
    return fit_model(x[mask], y[mask], model_key=key, fitted_on=name)


def held_out(train: list[Observation], test: list[Observation], key: str) -> dict[str, Any]:
    """The score fitted on ``train`` only, decided on ``test`` (plus the year rule): a figure
    from queries the fit never saw, with no leave-one-out involved."""
    model = fitted(train, key, "held-out fit")
    x, y, mask = features(test, FEATURES)
    decided = ~mask | (model.predict(x) < model.cut)
    rows = {"combined score": rates(decided.tolist(), y),
            "combined score + temporal rule": rates(
                [bool(a) or o.late for a, o in zip(decided, test, strict=True)], y)}
    return {"answerable": int(y.sum()), "absent": int((1 - y).sum()),
            "rules": {k: v.model_dump(mode="json") for k, v in rows.items()}}


def answer_rate(model: AnswerabilityModel | None, obs: list[Observation],
                threshold: float | None) -> dict[str, Any]:
    """Share of (answerable) queries answered under a model, or a bare threshold."""
    x, _, mask = features(obs, FEATURES)
    if model is not None:
        answered = mask & (model.predict(x) >= model.cut)
    elif threshold is not None:
        cosine = features(obs, ["cosine"])[0][:, 0]
        answered = mask & (cosine >= threshold)
    else:
        answered = mask
    n, k = len(obs), int(answered.sum())
    return {"queries": n, "answered": k, "answer_rate": k / n, "ci95": wilson(k, n)}


def latency(col: pgcite.Collection, queries: Sequence[GoldenQuery],
            repeats: int) -> dict[str, Any]:
    """The hybrid statement with and without the signal columns, interleaved, same vectors."""
    snap = col.active_snapshot()
    embedder = embedder_for_key(snap.embed_model)
    options = SearchOptions(top_k=TOP_K, fusion=col.info.settings.fusion)
    times: dict[str, list[float]] = {"with signals": [], "without signals": []}
    with col.client.connection() as conn:
        plans = []
        for q in queries:
            vector = embedder.embed_query(q.text)
            statement, params = prepare_search(col.info, snap, q.text, filters=Filters(),
                                               options=options, query_vector=vector)
            plans.append(("with signals", statement, params))
            plans.append(("without signals", _without_signals(col, snap, options), params))
        for _ in range(repeats):
            for variant, statement, params in plans:
                times[variant].append(_run(conn, statement, params, options.hnsw_ef_search))
    return {k: {"p50_ms": round(statistics.median(v), 3),
                "mean_ms": round(statistics.fmean(v), 3), "runs": len(v)}
            for k, v in times.items()}


def _without_signals(col: pgcite.Collection, snap: Any, options: SearchOptions) -> sql.Composed:
    """The same statement composed without the signals' parts and columns (NULL instead)."""
    s = col.info.schema_id
    parts = [c for c in _sql.search_ctes(
        schema=s, ts_config=col.info.ts_config, model_key=snap.embed_model, dim=snap.embed_dim,
        halfvec=col.info.settings.halfvec, mode="hybrid", filters=sql.SQL("true"),
        constraint=False, filtered=False, fetch=options.fetch, term_depth=None)
        if c.name not in ("kw_mass", "evidence")]
    signals = {name: sql.SQL("NULL") for name in _sql.SIGNAL_COLUMNS}
    return sql.SQL("WITH {}\n{}").format(
        with_ctes([*parts, _sql.EMPTY_EVIDENCE]),
        _sql.fuse(s, options.fusion or "convex", options.top_k, signals))


def _run(conn: psycopg.Connection, statement: Any, params: dict[str, Any], ef: int) -> float:
    started = time.perf_counter()
    with conn.transaction():
        conn.execute("SELECT set_config('hnsw.ef_search', %s, true),"
                     " set_config('hnsw.iterative_scan', 'strict_order', true)", (str(ef),))
        conn.execute(statement, params).fetchall()
    return (time.perf_counter() - started) * 1000


def scifact_claims(n: int, seed: int) -> list[GoldenQuery]:
    rows = read_jsonl(DATA / "scifact" / "queries.jsonl")
    picked = random.Random(seed).sample(rows, min(n, len(rows)))
    return [GoldenQuery(id=f"scifact-{r['_id']}", text=r["text"], kind="absent") for r in picked]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collection", default="pepys")
    parser.add_argument("--xquad", type=int, default=1190,
                        help="XQuAD questions for the answer rate (all 1190 by default)")
    parser.add_argument("--fit-sample", type=int, default=300,
                        help="XQuAD questions and SciFact claims each in the XQuAD fit")
    parser.add_argument("--repeats", type=int, default=3, help="latency passes")
    args = parser.parse_args()
    summary: dict[str, Any] = {}
    with client() as c:
        pepys = ensure_collection(c, args.collection,
                                  [DATA / "pepys-diary" / "entries.jsonl"],
                                  overrides=pgcite.Overrides(author="Samuel Pepys", corpus="A"))
        key = pepys.active_snapshot().embed_model
        fixed = default_threshold(key)
        golden = load_golden(DATA / "pepys-diary" / "golden.jsonl")
        extra = load_golden(ROOT / "abstention" / "pepys-extra.jsonl")
        obs_g, late_g = observe(pepys, golden.queries)
        obs_e, late_e = observe(pepys, extra.queries)
        sent_g = best_sentence_cosine(pepys, golden.queries)
        sent_e = best_sentence_cosine(pepys, extra.queries)
        summary["pepys"] = {
            "metadata": run_metadata(pepys.view(), {"top_k": TOP_K, "mode": "hybrid"}),
            f"golden ({len(obs_g)})": side_by_side(obs_g, late_g, fixed, sent_g),
            f"golden + extra ({len(obs_g) + len(obs_e)})": side_by_side(
                obs_g + obs_e, late_g + late_e, fixed, sent_g + sent_e),
            f"golden ({len(obs_g)}), each decided by a fit on the other "
            f"{len(obs_g) + len(obs_e) - 1} judged queries": side_by_side(
                obs_g + obs_e, late_g + late_e, fixed, sent_g + sent_e,
                report_on=slice(0, len(obs_g))),
            f"golden ({len(obs_g)}), held out: scored by a fit on the {len(obs_e)} extra "
            "queries only": held_out(obs_e, obs_g, key),
        }
        pepys_model = fitted(obs_g + obs_e, key, "pepys golden + extra")
        summary["pepys"]["latency"] = latency(pepys, golden.queries + extra.queries,
                                              args.repeats)
        print("pepys done", file=sys.stderr)

        xq = ensure_collection(c, "xquad_en_minilm", [DATA / "xquad" / "en" / "corpus.jsonl"])
        xgold = load_golden(DATA / "xquad" / "en", split="test")
        questions = random.Random(0).sample(list(xgold.queries),
                                            min(args.xquad, len(xgold.queries)))
        obs_x, late_x = observe(xq, questions)
        fit_ids = {q.id for q in questions[: args.fit_sample]}
        obs_s, late_s = observe(xq, scifact_claims(args.fit_sample, 0))
        fit_x = [o for o in obs_x if o.id in fit_ids]
        fit_late = [t for o, t in zip(obs_x, late_x, strict=True) if o.id in fit_ids]
        rest_x = [o for o in obs_x if o.id not in fit_ids] or obs_x
        own = fitted(fit_x + obs_s, xq.active_snapshot().embed_model, "xquad + scifact")
        summary["xquad_en"] = {
            "metadata": run_metadata(xq.view(), {"top_k": TOP_K, "mode": "hybrid"}),
            "answer rate, default threshold": answer_rate(None, obs_x, fixed),
            "answer rate, no threshold": answer_rate(None, obs_x, None),
            "answer rate, Pepys-fitted score": answer_rate(pepys_model, obs_x, None),
            "SciFact claims abstained, Pepys-fitted score": 1 - answer_rate(
                pepys_model, obs_s, None)["answer_rate"],
            "per-collection fit (XQuAD answerable + SciFact claims as absent), LOO":
                side_by_side(fit_x + obs_s, fit_late + late_s, None),
            "answer rate on the XQuAD questions outside the fit, own score":
                answer_rate(own, rest_x, None),
        }
    summary["signals"] = list(SIGNALS)
    summary["features"] = list(FEATURES)
    summary["pepys_model"] = pepys_model.model_dump(mode="json")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (OUT / "report.md").write_text(report(summary), encoding="utf-8")
    print(f"wrote {OUT}/summary.json, report.md", file=sys.stderr)


def _cell(r: dict[str, Any], rate: str, ci: str) -> str:
    return f"{r[rate]:.3f} [{r[ci][0]:.2f}, {r[ci][1]:.2f}]"


def report(summary: dict[str, Any]) -> str:
    lines = ["# Abstention: one threshold vs several signals", "",
             "Leave-one-out: every decision comes from a rule fitted without that query. "
             "95% intervals: Wilson for the rates, stratified bootstrap for balanced accuracy. "
             "Made by `python bench/abstention.py`.", ""]
    for name, block in summary["pepys"].items():
        if not isinstance(block, dict) or "rules" not in block:
            continue
        lines += [f"## Pepys, {name}: {block['answerable']} answerable, {block['absent']} absent",
                  "", *_table(block["rules"]), ""]
    lat = summary["pepys"]["latency"]
    lines += ["## Cost of the signals (Pepys, hybrid statement, interleaved)", "",
              "| variant | p50 ms | mean ms | runs |", "|---|---|---|---|"]
    lines += [f"| {k} | {v['p50_ms']} | {v['mean_ms']} | {v['runs']} |" for k, v in lat.items()]
    x = summary["xquad_en"]
    lines += ["", "## XQuAD English (answerable only, MiniLM collection)", "",
              "| rule | answered | answer rate [95%] |", "|---|---|---|"]
    for k, v in x.items():
        if isinstance(v, dict) and "answer_rate" in v:
            lines.append(f"| {k} | {v['answered']}/{v['queries']} | "
                         f"{_cell(v, 'answer_rate', 'ci95')} |")
    lines.append(f"\nSciFact claims abstained under the Pepys-fitted score: "
                 f"{x['SciFact claims abstained, Pepys-fitted score']:.3f}\n")
    fit = x["per-collection fit (XQuAD answerable + SciFact claims as absent), LOO"]
    lines += [f"### Per-collection fit on XQuAD: {fit['answerable']} XQuAD questions, "
              f"{fit['absent']} SciFact claims as absent", "", *_table(fit["rules"]), ""]
    return "\n".join(lines)


def _table(rules: dict[str, Any]) -> list[str]:
    out = ["| rule | answerable answered | absent abstained | balanced accuracy |",
           "|---|---|---|---|"]
    for label, r in rules.items():
        out.append(f"| {label} | {_cell(r, 'answer_rate', 'answer_ci')} | "
                   f"{_cell(r, 'abstain_rate', 'abstain_ci')} | "
                   f"{_cell(r, 'balanced_accuracy', 'balanced_ci')} |")
    return out


if __name__ == "__main__":
    main()
