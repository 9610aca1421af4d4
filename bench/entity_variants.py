"""Ways to use a query's entities, side by side over the same candidates (the evidence behind
the router's entity boost, docs/retrieval.md "Entities"):

- none: the search without the entity boost;
- share W: the library's boost on every question, x(1 + W x idf share of the query's entities);
- selective W: each entity weighted by its own selectivity (its idf over the idf of a name in
  one passage), so a name in many passages boosts little whatever else the query names;
- router 0.5: the library's default, share 0.5 on entity questions only (who/where, or
  routed keyword-heavy); and that plus selective 0.5 on the other questions;
- third leg: the passages that name the entities (ranked by the idf of those they name, then
  by mentions), fused with the search's list by RRF (k=60).

Every variant reorders the default search's candidates (200 chunks deep; the boosts the first
50, as the library does; the third leg may add passages), read once per question, so the
differences are the variants' alone. Needs the collection bench/entities.py builds.

    PYTHONPATH=src python bench/entity_variants.py
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable
from typing import Any

from _common import DATA, RESULTS, ROOT, client, read_jsonl
from psycopg import sql

from pgcite.evaluate import SearchOutcome, evaluate, load_golden
from pgcite.evaluate._collection import embed_queries
from pgcite.retrieve._entities import QueryEntity, recognise
from pgcite.retrieve._filters import Filters
from pgcite.retrieve._hits import Hit
from pgcite.retrieve._route import entity_question
from pgcite.retrieve._search import SearchOptions
from pgcite.store._entities import canonical_sql

HEAD = 50
COLLECTION = "pepys_entities_subset"
Candidates = tuple[list[Hit], list[QueryEntity], dict[str, set[str]], int]
Variant = Callable[[str, Any, Any, int], list[Hit]]


def main() -> None:
    with client() as c:
        view = c.collection(COLLECTION).view()
        golden = load_golden(DATA / "pepys-diary" / "golden.jsonl")
        vectors, _ = embed_queries(view, golden)
        cache: dict[tuple[str, str, int], Candidates] = {}

        def candidates(text: str, cutoff: Any, vector: Any, top_k: int) -> Candidates:
            key = (text, str(cutoff), top_k)
            if key not in cache:
                filters = Filters(cutoff=cutoff)
                hits = view.search(text, filters=filters, query_vector=vector,
                                   options=SearchOptions(top_k=top_k, mode="hybrid"),
                                   stages={"entity_boost": 0}).hits
                with c.connection() as conn:
                    found = recognise(conn, view.info, view.snapshot, text, filters)
                    cache[key] = (hits, found, _named(conn, view, [h.id for h in hits[:HEAD]]),
                                  _visible(conn, view, cutoff))
            return cache[key]

        def leg(text: str, cutoff: Any, found: list[QueryEntity]) -> list[Hit]:
            with c.connection() as conn:
                return _third_leg(conn, view, cutoff, found)

        variants = _variants(candidates, leg)
        result = evaluate(golden, {name: _searcher(fn, vectors) for name, fn in variants.items()},
                          k=10, progress=False)
        kinds = ["fact", "keyword", "paraphrase", "cutoff"]
        lines = ["# Ways to use a query's entities (Pepys subset)", "",
                 "`PYTHONPATH=src python bench/entity_variants.py`; see its docstring.", "",
                 "| variant | overall | " + " | ".join(kinds) + " | who/where recall | support |",
                 "|---|---|" + "---|" * len(kinds) + "---|---|"]
        whowhere = read_jsonl(ROOT / "entities" / "whowhere.jsonl")
        for name, conf in result.configurations.items():
            recall, support = _whowhere(variants[name], whowhere, name == "none")
            lines.append(f"| {name} | {conf.overall['ndcg@10']:.3f} | " + " | ".join(
                f"{conf.by_kind[k]['ndcg@10']:.3f}" for k in kinds)
                + f" | {recall:.3f} | {support:.3f} |")
        lines += ["", "Fact questions, nDCG@10 per variant (same order):", ""]
        for q in golden.queries:
            if q.kind == "fact":
                cells = [next(r.metrics["ndcg@10"] for r in conf.queries if r.id == q.id)
                         for conf in result.configurations.values()]
                lines.append(f"- {q.id}: " + " ".join(f"{v:.2f}" for v in cells))
    out = RESULTS / "entities" / "variants.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _variants(candidates: Callable[..., Candidates],
              leg: Callable[[str, Any, list[QueryEntity]], list[Hit]]) -> dict[str, Variant]:
    def boost(weigh: Callable[[list[QueryEntity], set[str], int], float],
              gate: Callable[[str], bool] = lambda _: True) -> Variant:
        def run(text: str, cutoff: Any, vector: Any, top_k: int) -> list[Hit]:
            hits, found, named, total = candidates(text, cutoff, vector, top_k)
            if not found or not gate(text):
                return hits
            head = sorted(((h.score * (1 + weigh(found, named.get(h.id, set()), total)), h)
                           for h in hits[:HEAD]), key=lambda p: -p[0])
            return [h.model_copy(update={"score": s}) for s, h in head] + hits[HEAD:]
        return run

    def share(w: float) -> Callable[[list[QueryEntity], set[str], int], float]:
        return lambda found, named, total: w * sum(
            e.idf for e in found if e.key in named) / (sum(e.idf for e in found) or 1.0)

    def selective(w: float) -> Callable[[list[QueryEntity], set[str], int], float]:
        def weigh(found: list[QueryEntity], named: set[str], total: int) -> float:
            top = math.log(1 + (total - 0.5) / 1.5)  # the idf of a name in one passage
            return w * sum(min(1.0, e.idf / top) for e in found if e.key in named) / len(found)
        return weigh

    def fused(text: str, cutoff: Any, vector: Any, top_k: int) -> list[Hit]:
        hits, found, _, _ = candidates(text, cutoff, vector, top_k)
        if not found:
            return hits
        scores: dict[str, float] = {}
        pool = {h.id: h for h in hits}
        for ranked in (hits, leg(text, cutoff, found)):
            for rank, hit in enumerate(ranked, start=1):
                scores[hit.id] = scores.get(hit.id, 0.0) + 1 / (60 + rank)
                pool.setdefault(hit.id, hit)
        return [pool[i].model_copy(update={"score": scores[i]})
                for i in sorted(scores, key=lambda i: -scores[i])]

    return {
        "none": boost(lambda *_: 0.0, lambda _: False),
        "share 0.5 (every question)": boost(share(0.5)),
        "share 1 (every question)": boost(share(1.0)),
        "selective 0.5 (every question)": boost(selective(0.5)),
        "selective 1 (every question)": boost(selective(1.0)),
        "router: share 0.5 on entity questions": boost(
            share(0.5), lambda text: entity_question(text) is not None),
        "router + selective 0.5 on other questions": _either(
            boost(share(0.5)), boost(selective(0.5))),
        "third leg, RRF (every question)": fused,
    }


def _either(entity: Variant, other: Variant) -> Variant:
    """``entity`` on entity questions, ``other`` on the rest."""
    return lambda text, cutoff, vector, top_k: (
        entity if entity_question(text) is not None else other)(text, cutoff, vector, top_k)


def _searcher(fn: Variant, vectors: dict[str, Any]) -> Callable[[Any], SearchOutcome]:
    return lambda q: SearchOutcome(hits=fn(q.text, q.cutoff, vectors.get(q.id), 200))


def _whowhere(fn: Variant, questions: list[dict[str, Any]], plain: bool) -> tuple[float, float]:
    recall, support = [], []
    for q in questions:
        # as the library: the default search 10 deep, a boosted one 50 deep, cut to 10
        texts = [h.body for h in fn(q["question"], q["cutoff"], None, 10 if plain else HEAD)[:10]]
        got = {n for n, p in q["expected"].items() if any(re.search(p, t, re.I) for t in texts)}
        recall.append(len(got) / len(q["expected"]))
        support.append(sum(bool(re.search(q["anchor"], t)) for t in texts) / max(1, len(texts)))
    return statistics.fmean(recall), statistics.fmean(support)


def _members(view: Any) -> sql.Composed:
    return sql.SQL("c.version_pk IN (SELECT version_pk FROM {s}.snapshot_members"
                   " WHERE snapshot_id = %s)").format(s=view.info.schema_id)


def _named(conn: Any, view: Any, ids: list[str]) -> dict[str, set[str]]:
    """Chunk id -> the canonical keys of the entities it names."""
    rows = conn.execute(sql.SQL(
        "SELECT c.id, array_agg(DISTINCT {k}) FROM {s}.chunks c JOIN {s}.chunk_entities ce"
        " USING (chunk_pk) WHERE c.id = ANY(%s) AND {m} GROUP BY c.id").format(
            s=view.info.schema_id, k=canonical_sql(view.info.schema_id, sql.SQL("ce.key")),
            m=_members(view)),
        (ids, view.snapshot.snapshot_id)).fetchall()
    return {r[0]: set(r[1]) for r in rows}


def _visible(conn: Any, view: Any, cutoff: Any) -> int:
    return int(conn.execute(sql.SQL(
        "SELECT count(*) FROM {s}.chunks c WHERE {m}"
        " AND (%s::date IS NULL OR c.date_end <= %s::date)").format(s=view.info.schema_id,
                                                                    m=_members(view)),
        (view.snapshot.snapshot_id, cutoff, cutoff)).fetchone()[0])


def _third_leg(conn: Any, view: Any, cutoff: Any, found: list[QueryEntity]) -> list[Hit]:
    """The visible passages naming the query's entities, by idf named, then mentions; 50."""
    idf = {e.key: e.idf for e in found}
    key = canonical_sql(view.info.schema_id, sql.SQL("ce.key"))
    rows = conn.execute(sql.SQL(
        "SELECT c.id, c.document_id, c.date_end, c.citation, c.body, {k}, sum(ce.mentions)"
        " FROM {s}.chunks c JOIN {s}.chunk_entities ce USING (chunk_pk) WHERE {m}"
        " AND (%s::date IS NULL OR c.date_end <= %s::date) AND {k} = ANY(%s)"
        " GROUP BY 1, 2, 3, 4, 5, 6").format(s=view.info.schema_id, k=key, m=_members(view)),
        (view.snapshot.snapshot_id, cutoff, cutoff, list(idf))).fetchall()
    score: dict[str, tuple[float, int]] = {}
    meta: dict[str, tuple[Any, ...]] = {}
    for cid, doc, end, citation, body, entity, mentions in rows:
        got, n = score.get(cid, (0.0, 0))
        score[cid] = (got + idf[entity], n + int(mentions))
        meta[cid] = (doc, end, citation, body)
    ranked = sorted(score, key=lambda i: (-score[i][0], -score[i][1], i))[:HEAD]
    return [Hit(id=i, document_id=meta[i][0], citation=meta[i][2], author=None, corpus=None,
                date_start=meta[i][1], date_end=meta[i][1], source=None, locator=None,
                title=None, body=meta[i][3], score=0.0, rank=n + 1)
            for n, i in enumerate(ranked)]


if __name__ == "__main__":
    main()
