"""Fact and paraphrase questions on narrative text: retrieval variants side by side (issue 34).

    python bench/narrative.py                      # writes bench/results/narrative/
    python bench/narrative.py --datasets pepys --variants default rm3

Every variant answers the same questions over the same collections, in one run, and is scored
two ways: retrieval (nDCG@10 by document, per query kind) and the answer it leads to (the
default extractive answerer over that variant's top 5; abstention off, so that every variant
answers every answerable question and the figures compare retrieval and sentence choice, not
the abstention rule): does the answer cite a judged-relevant passage, citation precision, first
sentences that are frames (heading, date line, signature), cited passages after a cutoff.

Variants (docs/answers.md, "Fact and paraphrase questions on narrative text"):

- ``default``: what a search does out of the box (hybrid, convex, the router, the entity boost
  where entities were stored at ingest).
- ``rm3``: pseudo-relevance feedback on the keyword leg: the question's words plus the ten
  terms RM3 weighs highest in the default's top 10 passages (term frequency in each passage,
  weighted by the passage's fused score), as a second keyword text; the vector leg keeps the
  question's own vector. (The keyword leg counts each distinct lexeme once, so the expansion
  terms weigh as much as the question's words: RM3's interpolation is its number of terms.)
- ``e5``: the same texts in a collection embedded with multilingual-e5-small (`*_e5`).
- ``chunks128``, ``chunks64``: the same texts chunked to at most 128 / 64 tokens instead of the
  default 350 (MiniLM's 254 cap), in collections of their own (`*_c128`, `*_c64`), searched as
  the default: a fact sits in one sentence of a long entry, and a shorter passage's vector is
  less diluted by the entry's other topics (MiniLM was trained on 128-token pairs).
- ``neighbours``: the default's top 5, each followed by the passages before and after it in
  its document (same snapshot, same filters), given to the answerer as context it may quote
  and cite; retrieval figures are the default's.
- ``docfusion``: an entry's passages scored together: the default's top 50 passages grouped by
  document, a document scored by the sum of its passages' fused scores (CombSUM), and each
  document's best passage kept, in that order.
- ``bridge``: each question word the collection never writes (no keyword hit) read also as
  its nearest words, by the collection's embedding model, among the words of the vector leg's
  top 20 passages (at most 2 a word, cosine >= 0.5), added to the keyword text; the vector leg
  keeps the question's own vector. Paraphrase questions ask in words the diary lacks
  ("blaze", "monarch", "hairpiece"); the vector leg's passages hold the diary's ("fire",
  "king", "periwig"), and unlike RM3 only words close to one of the question's are taken.
- ``vector_lean``: the router's fallback before 2026-12-06 for long questions without names
  when no LLM can write HyDE's passage: the legs weighed 0.2 / 0.8 (the default now searches
  them with the collection's own weights).
- ``aliases``: the names the question mentions expanded, on the keyword leg, with every
  spelling the entity graph stores for them (aliases and mentions: "Sir W. Pen", "Sir William
  Penn"); collections without entities search as the default.

Guards: SciFact (809 claims, nDCG@10) and XQuAD English (the first 300 questions: nDCG@10 and
the answer's gold-string containment, first sentence, citation precision).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import (
    DATA,
    RESULTS,
    ROOT,
    cell,
    client,
    ensure_collection,
    read_jsonl,
    run_stamp,
    stamp_line,
)
from psycopg import sql

import pgcite
from pgcite._types import Mode
from pgcite.answer import AnswerOptions, AnswerSettings, answer_question
from pgcite.evaluate import GoldenQuery, GoldenSet, ScoredHit, SearchOutcome, evaluate, load_golden
from pgcite.evaluate._answers import collection_passages, score_answer, summarize_by_kind
from pgcite.evaluate._collection import run_metadata
from pgcite.retrieve import SearchResult
from pgcite.retrieve._entities import recognise
from pgcite.retrieve._filters import Filters
from pgcite.retrieve._hits import Hit
from pgcite.retrieve._passages import passage_window
from pgcite.retrieve._route import heuristic_route
from pgcite.retrieve._view import SearchView

OUT = RESULTS / "narrative"
ABSTENTION = ROOT / "abstention"
EXPANSION_TERMS = 10
FEEDBACK_PASSAGES = 10
FUSION_DEPTH = 50
SIBLING_WEIGHT = 0.5
SCIFACT_SAMPLE_CLAIMS = 300
_WORD = re.compile(r"[^\W\d_]{3,}")


@dataclass(frozen=True)
class Dataset:
    name: str
    collection: str  # the default (MiniLM) collection; e5 variant: collection + "_e5"
    sets: tuple[Path, ...]
    source: Path  # what the collection is built from
    overrides: pgcite.Overrides | None = None
    answers: bool = True  # answer metrics as well as retrieval
    limit: int | None = None  # the first N questions (XQuAD)
    split: str | None = None
    e5: bool = False  # an e5 twin of the collection can be built here (see pepys_sample)


PEPYS_OVERRIDES = pgcite.Overrides(author="Samuel Pepys", corpus="A")
PEPYS_SETS = (DATA / "pepys-diary" / "golden.jsonl", ABSTENTION / "pepys-extra.jsonl")


def pepys_sample() -> Path:
    """Every entry the Pepys sets judge (relevant or must_not) plus 800 others drawn with
    random.Random(0): 1,086 of the 3,415 entries. The e5 variant is measured here, against
    MiniLM on the same entries: multilingual-e5-small embeds about 36 passages a minute on
    these shared cores, so the whole diary (8,298 passages) was out of reach."""
    entries = read_jsonl(DATA / "pepys-diary" / "entries.jsonl")
    keep = {i for path in PEPYS_SETS for row in read_jsonl(path)
            for i in [*row["relevant"], *(row.get("must_not") or [])]}
    rest = [e["_id"] for e in entries if e["_id"] not in keep]
    random.Random(0).shuffle(rest)
    keep.update(rest[:800])
    return _write_sample("pepys-sample.jsonl", [e for e in entries if e["_id"] in keep])


def scifact_sample() -> Path:
    """The abstracts the first 300 SciFact claims cite plus 700 others drawn with
    random.Random(0), for the e5 variant (as :func:`pepys_sample`)."""
    corpus = read_jsonl(DATA / "scifact" / "corpus.jsonl")
    golden = load_golden(DATA / "scifact", split="train")
    keep = {d for q in golden.queries[:SCIFACT_SAMPLE_CLAIMS] for d in q.relevant_ids}
    rest = [str(d["_id"]) for d in corpus if str(d["_id"]) not in keep]
    random.Random(0).shuffle(rest)
    keep.update(rest[:700])
    return _write_sample("scifact-sample.jsonl", [d for d in corpus if str(d["_id"]) in keep])


def _write_sample(name: str, rows: list[dict[str, Any]]) -> Path:
    path = OUT / "runs" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


DATASETS = {
    "pepys": Dataset("pepys", "pepys", PEPYS_SETS, DATA / "pepys-diary" / "entries.jsonl",
                     PEPYS_OVERRIDES),
    "pepys-sample": Dataset("pepys-sample", "pepys_sample", PEPYS_SETS,
                            OUT / "runs" / "pepys-sample.jsonl", PEPYS_OVERRIDES, e5=True),
    "scifact-sample": Dataset("scifact-sample", "scifact_sample", (DATA / "scifact",),
                              OUT / "runs" / "scifact-sample.jsonl", answers=False,
                              limit=SCIFACT_SAMPLE_CLAIMS, split="train", e5=True),
    "xquad-en": Dataset("xquad-en", "xquad_en", (DATA / "xquad" / "en",),
                        DATA / "xquad" / "en" / "corpus.jsonl", limit=300, split="test",
                        e5=True),
    "scifact": Dataset("scifact", "scifact", (DATA / "scifact",),
                       DATA / "scifact" / "corpus.jsonl", answers=False, split="train"),
}
# Judged sets no choice was made on: read only after the default was chosen (--held-out).
HELD_OUT = {
    "pepys-held-out": Dataset("pepys-held-out", "pepys", (
        ABSTENTION / "pepys-new.jsonl", ABSTENTION / "pepys-1664.jsonl"),
        DATA / "pepys-diary" / "entries.jsonl", PEPYS_OVERRIDES),
}

Search = Callable[[SearchView, GoldenQuery, int], SearchResult]


def default(view: SearchView, query: GoldenQuery, top_k: int) -> SearchResult:
    return view.search(query.text, filters=Filters(cutoff=query.cutoff),
                       options=pgcite.SearchOptions(top_k=top_k))


def rm3_terms(question: str, hits: Sequence[Hit], n_terms: int = EXPANSION_TERMS) -> list[str]:
    """RM3's expansion terms: P(w|R) = sum over feedback passages of P(w|d) * P(d|q), with
    P(d|q) the passage's fused score normalised over the feedback set; the question's own
    words and stop words left out (the collection's stop words are the keyword leg's, so a
    generic English list stands in here)."""
    from pgcite.answer._extractive import _STOPWORDS

    asked = {w.casefold() for w in _WORD.findall(question)}
    total = sum(max(h.score, 0.0) for h in hits) or 1.0
    weights: defaultdict[str, float] = defaultdict(float)
    for hit in hits:
        words = [w.casefold() for w in _WORD.findall(hit.body)]
        counts = Counter(w for w in words if w not in _STOPWORDS and w not in asked)
        for word, tf in counts.items():
            weights[word] += tf / max(len(words), 1) * max(hit.score, 0.0) / total
    return sorted(weights, key=lambda w: -weights[w])[:n_terms]


def rm3(view: SearchView, query: GoldenQuery, top_k: int) -> SearchResult:
    first = default(view, query, FEEDBACK_PASSAGES)
    terms = rm3_terms(query.text, first.hits)
    assert view.embedder is not None
    vector = view.embedder.embed_query(query.text).reshape(-1)
    return view.search(f"{query.text} {' '.join(terms)}", filters=Filters(cutoff=query.cutoff),
                       options=pgcite.SearchOptions(top_k=top_k), query_vector=vector)


BRIDGE_POOL = 20
BRIDGE_WORDS = 2
BRIDGE_SIMILARITY = 0.5
_word_vectors: dict[str, Any] = {}


def _words_embedded(view: SearchView, words: list[str]) -> Any:
    import numpy as np

    assert view.embedder is not None
    missing = [w for w in words if w not in _word_vectors]
    if missing:
        _word_vectors.update(zip(missing, np.asarray(view.embedder.embed_documents(missing)),
                                 strict=True))
    return np.stack([_word_vectors[w] for w in words])


def bridge_terms(view: SearchView, query: GoldenQuery, pool: Sequence[Hit]) -> list[str]:
    """The collection's words nearest each question word it never writes (see ``bridge``)."""
    from pgcite.answer._extractive import _STOPWORDS, _stem

    filters = Filters(cutoff=query.cutoff)
    asked = list(dict.fromkeys(w.casefold() for w in _WORD.findall(query.text)
                               if len(w) >= 4 and w.casefold() not in _STOPWORDS))
    unknown = [w for w in asked if not view.search(
        w, filters=filters, options=pgcite.SearchOptions(top_k=1, mode="keyword")).hits]
    stems = {_stem(w) for w in asked}
    found = sorted({w.casefold() for h in pool for w in _WORD.findall(h.body)
                    if len(w) >= 4 and w.casefold() not in _STOPWORDS
                    and _stem(w.casefold()) not in stems})
    if not unknown or not found:
        return []
    similar = _words_embedded(view, unknown) @ _words_embedded(view, found).T
    out: list[str] = []
    for row in similar:
        out += [found[j] for j in row.argsort()[::-1][:BRIDGE_WORDS]
                if row[j] >= BRIDGE_SIMILARITY and found[j] not in out]
    return out


def bridge(view: SearchView, query: GoldenQuery, top_k: int) -> SearchResult:
    assert view.embedder is not None
    vector = view.embedder.embed_query(query.text).reshape(-1)
    filters = Filters(cutoff=query.cutoff)
    pool = view.search(query.text, filters=filters, query_vector=vector,
                       options=pgcite.SearchOptions(top_k=BRIDGE_POOL, mode="vector"))
    terms = bridge_terms(view, query, pool.hits)
    if not terms:
        return default(view, query, top_k)
    if query.kind in ("paraphrase", "fact"):
        print(f"    bridge {query.id}: {' '.join(terms)}", file=sys.stderr)
    return view.search(f"{query.text} {' '.join(terms)}", filters=filters,
                       options=pgcite.SearchOptions(top_k=top_k), query_vector=vector)


def docfusion(view: SearchView, query: GoldenQuery, top_k: int) -> SearchResult:
    deep = default(view, query, max(FUSION_DEPTH, top_k))
    scores: dict[str, float] = defaultdict(float)
    best: dict[str, Hit] = {}
    for hit in deep.hits:
        scores[hit.document_id] += hit.score
        best.setdefault(hit.document_id, hit)
    order = sorted(best, key=lambda d: -scores[d])[:top_k]
    hits = [best[d].model_copy(update={"rank": i + 1, "score": scores[d]})
            for i, d in enumerate(order)]
    return deep.model_copy(update={"hits": hits})


_SPELLINGS = """
SELECT DISTINCT ce.mention FROM {s}.chunk_entities ce
WHERE ce.key IN (SELECT {c} UNION SELECT a.alias FROM {s}.entity_aliases a WHERE a.canonical = {c})
"""


def aliases(view: SearchView, query: GoldenQuery, top_k: int) -> SearchResult:
    filters = Filters(cutoff=query.cutoff)
    with view.connection() as conn:
        found = recognise(conn, view.info, view.snapshot, query.text, filters)
        spellings: list[str] = []
        for entity in found:
            statement = sql.SQL(_SPELLINGS).format(
                s=view.info.schema_id,
                c=sql.SQL("coalesce((SELECT a.canonical FROM {s}.entity_aliases a "
                          "WHERE a.alias = %(k)s), %(k)s)").format(s=view.info.schema_id))
            spellings += [r[0] for r in conn.execute(statement, {"k": entity.key}).fetchall()]
    if not spellings:
        return default(view, query, top_k)
    assert view.embedder is not None
    vector = view.embedder.embed_query(query.text).reshape(-1)
    return view.search(f"{query.text} {' '.join(spellings)}", filters=filters,
                       options=pgcite.SearchOptions(top_k=top_k), query_vector=vector)


def with_neighbours(view: SearchView, query: GoldenQuery, result: SearchResult) -> SearchResult:
    """The result's passages, each followed by its neighbours in its document (not already
    there), ranked after it: context the answerer may quote and cite."""
    seen = {h.id for h in result.hits}
    hits: list[Hit] = []
    with view.connection() as conn:
        for hit in result.hits:
            hits.append(hit)
            window = passage_window(conn, view.info, view.snapshot, hit.id,
                                    filters=Filters(cutoff=query.cutoff))
            for p in [*window.before, *window.after]:
                if p.id in seen:
                    continue
                seen.add(p.id)
                hits.append(Hit(id=p.id, document_id=p.document_id, citation=p.citation,
                                author=p.author, corpus=p.corpus, date_start=p.date_start,
                                date_end=p.date_end, source=p.source, locator=p.locator,
                                title=p.title, body=p.body, metadata=p.metadata,
                                score=hit.score, rank=0))
    ranked = [h.model_copy(update={"rank": i + 1}) for i, h in enumerate(hits)]
    return result.model_copy(update={"hits": ranked})


def siblings(view: SearchView, query: GoldenQuery, top_k: int) -> SearchResult:
    """The default's top 50 passages re-scored, then cut to ``top_k``: each passage's fused
    score plus SIBLING_WEIGHT times its document's other passages' scores (passages stay
    apart: two of one entry may both be kept)."""
    deep = default(view, query, max(FUSION_DEPTH, top_k))
    total: dict[str, float] = defaultdict(float)
    for hit in deep.hits:
        total[hit.document_id] += hit.score
    ranked = sorted(deep.hits, key=lambda h: -(h.score + SIBLING_WEIGHT * (
        total[h.document_id] - h.score)))[:top_k]
    return deep.model_copy(update={"hits": [h.model_copy(update={"rank": i + 1})
                                            for i, h in enumerate(ranked)]})


def before(view: SearchView, query: GoldenQuery, top_k: int) -> SearchResult:
    """The previous release's default: no date boost."""
    return view.search(query.text, filters=Filters(cutoff=query.cutoff),
                       options=pgcite.SearchOptions(top_k=top_k), stages={"date_boost": 0})


def vector_lean(view: SearchView, query: GoldenQuery, top_k: int) -> SearchResult:
    """The router's former fallback for its hyde route without an LLM (long questions without
    names): the legs weighed 0.2 / 0.8 instead of the collection's own."""
    lean = (0.2, 0.8) if heuristic_route(query.text).name == "hyde" else None
    return view.search(query.text, filters=Filters(cutoff=query.cutoff),
                       options=pgcite.SearchOptions(top_k=top_k, weights=lean))


VARIANTS: dict[str, Search] = {"before": before, "default": default, "rm3": rm3, "e5": default,
                               "neighbours": default, "docfusion": docfusion, "aliases": aliases,
                               "siblings": siblings, "bridge": bridge, "chunks128": default,
                               "chunks64": default, "vector_lean": vector_lean}
CHUNK_VARIANTS = {"chunks128": 128, "chunks64": 64}  # variant -> the collection's chunk_tokens


def load_sets(dataset: Dataset) -> GoldenSet:
    sets = [load_golden(p, split=dataset.split) for p in dataset.sets]
    queries = [q for s in sets for q in s.queries]
    queries = queries[: dataset.limit] if dataset.limit else queries
    return sets[0].model_copy(update={"name": dataset.name, "queries": queries})


def searcher(view: SearchView, search: Search, depth: int) -> Callable[[GoldenQuery],
                                                                      SearchOutcome]:
    def run(query: GoldenQuery) -> SearchOutcome:
        result = search(view, query, depth)
        return SearchOutcome(hits=[ScoredHit(h.id, h.document_id, h.score, h.date_end)
                                   for h in result.hits], confidence=result.confidence)
    return run


def answer_records(view: SearchView, golden: GoldenSet, search: Search, *,
                   neighbours: bool, language: str) -> list[Any]:
    passages = collection_passages(view)
    settings = AnswerSettings(language=language)
    records = []
    for q in golden.queries:
        started = time.perf_counter()
        result = search(view, q, 5)
        if neighbours:
            result = with_neighbours(view, q, result)

        def fixed(query: str, *, top_k: int, mode: Mode, filters: Filters,
                  stages: Mapping[str, Any] | None, result: SearchResult = result
                  ) -> SearchResult:
            return result

        answer = answer_question(fixed, q.text, settings=settings, embedder=view.embedder,
                                 options=AnswerOptions(threshold=-1.0, temporal_check=False))
        records.append(score_answer(q, answer=answer.answer, abstained=answer.abstained,
                                    cited=answer.citations, passages=passages,
                                    latency_ms=(time.perf_counter() - started) * 1000))
    return records


def collection_for(c: pgcite.Client, dataset: Dataset, variant: str) -> pgcite.Collection:
    if variant in CHUNK_VARIANTS:
        tokens = CHUNK_VARIANTS[variant]
        return ensure_collection(c, f"{dataset.collection}_c{tokens}", [dataset.source],
                                 overrides=dataset.overrides,
                                 settings=pgcite.CollectionSettings(chunk_tokens=tokens))
    if variant != "e5":
        return ensure_collection(c, dataset.collection, [dataset.source],
                                 overrides=dataset.overrides)
    return ensure_collection(c, dataset.collection + "_e5", [dataset.source],
                             embedder="multilingual-e5-small", overrides=dataset.overrides)


def run(c: pgcite.Client, dataset: Dataset, variants: Sequence[str]) -> dict[str, Any]:
    samples = {"pepys-sample": pepys_sample, "scifact-sample": scifact_sample}
    if dataset.name in samples:
        samples[dataset.name]()
    golden = load_sets(dataset)
    out: dict[str, Any] = {"queries": len(golden.queries), "sets": [str(p.relative_to(
        p.parents[2])) for p in dataset.sets], "variants": {}}
    for variant in variants:
        if variant == "e5" and not dataset.e5:
            continue  # the whole diary / SciFact in e5 is out of reach here: see the samples
        col = collection_for(c, dataset, variant)
        view = col.view()
        started = time.perf_counter()
        result = evaluate(golden, {variant: searcher(view, VARIANTS[variant], 20)}, k=10,
                          progress=False)
        config = result.configurations[variant]
        row: dict[str, Any] = {
            "collection": col.name, "embedding_model": view.snapshot.embed_model,
            "ndcg@10": round(config.overall["ndcg@10"], 4),
            "ndcg@10_by_kind": {k: round(v["ndcg@10"], 4) for k, v in config.by_kind.items()
                                if "ndcg@10" in v},
        }
        if dataset.answers:
            records = answer_records(view, golden, VARIANTS[variant],
                                     neighbours=variant == "neighbours",
                                     language=col.info.ts_config)
            row["answers"] = summarize_by_kind(records)
        row["seconds"] = round(time.perf_counter() - started, 1)
        out["variants"][variant] = row
        out.setdefault("metadata", run_metadata(view, {"benchmark": "narrative"}))
        print(f"  {dataset.name} {variant}: nDCG@10 {row['ndcg@10']}", file=sys.stderr)
    return out


STAMP = ("command", "commit", "date", "machine")


def merge_runs(previous: dict[str, Any], ran: dict[str, Any]) -> dict[str, Any]:
    """The summary's datasets after this run: datasets and variants not run this time keep
    their last figures, in their place, each kept variant with the stamp of the run that
    measured it (``run``), so that re-running two variants loses none of the others'."""
    out = dict(previous)
    for name, data in ran.items():
        old = previous.get(name)
        if old is not None:
            stamp = {k: old[k] for k in STAMP if k in old}
            variants = {v: data["variants"].get(v, row) for v, row in old["variants"].items()}
            for v, row in variants.items():
                if v not in data["variants"]:
                    row.setdefault("run", stamp)
            data["variants"] = {**variants, **data["variants"]}
        out[name] = data
    return out


def report(summary: dict[str, Any]) -> str:
    lines = ["# Narrative questions: retrieval variants side by side", "",
             "nDCG@10 by document; answers: the default extractive answerer over each "
             "variant's top 5, abstention off (every answerable question answered). cites "
             "relevant: answered questions citing a judged-relevant passage; frames first: "
             "answers whose first quoted sentence is a heading, date line or signature; late "
             "cit.: cited passages after the question's cutoff.", ""]
    for name, data in summary["datasets"].items():
        kinds = sorted({k for v in data["variants"].values() for k in v["ndcg@10_by_kind"]})
        lines += [f"## {name}", "", f"{data['queries']} questions ({', '.join(data['sets'])}). "
                  + stamp_line(data), "", "| variant | collection | nDCG@10 | " + " | ".join(kinds) + " |",
                  "|---|---|---|" + "---|" * len(kinds)]
        for variant, row in data["variants"].items():
            lines.append(f"| {variant} | {row['collection']} | {cell(row['ndcg@10'])} | "
                         + " | ".join(cell(row["ndcg@10_by_kind"].get(k)) for k in kinds)
                         + " |")
        earlier = defaultdict(list)  # variants kept from an earlier run, by that run's stamp
        for variant, row in data["variants"].items():
            if "run" in row:
                earlier[stamp_line(row["run"])].append(variant)
        lines += [f"\nFrom an earlier run: {', '.join(v)}, {line}" for line, v in earlier.items()]
        answered = {v: r["answers"] for v, r in data["variants"].items() if "answers" in r}
        if answered:
            akinds = [k for k in next(iter(answered.values())) if k != "absent"]
            lines += ["", "Answers (all / per kind: cites relevant, citation precision"
                      + (", contains, first sentence" if name.startswith("xquad") else "")
                      + "):", "",
                      "| variant | " + " | ".join(akinds) + " | frames first | late cit. |",
                      "|---|" + "---|" * (len(akinds) + 2)]
            keys = ["cites_relevant", "citation_precision"] + (
                ["containment", "first_sentence_containment"] if name.startswith("xquad")
                else [])
            for variant, kinds_ in answered.items():
                cells = [" / ".join(cell(kinds_[k].get(m)) for m in keys) for k in akinds]
                lines.append(f"| {variant} | " + " | ".join(cells) + f" | "
                             f"{kinds_['all']['first_sentence_frames']} | "
                             f"{kinds_['all']['cutoff_violations']} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="*", default=list(DATASETS))
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS))
    parser.add_argument("--held-out", action="store_true",
                        help="also the judged Pepys sets no choice was made on "
                             "(bench/abstention/pepys-new.jsonl, pepys-1664.jsonl)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    chosen = {n: d for n, d in DATASETS.items() if n in args.datasets}
    if args.held_out:
        chosen.update(HELD_OUT)
    with client() as c:
        ran = {name: run(c, dataset, args.variants) for name, dataset in chosen.items()}
    command = "python bench/narrative.py " + " ".join(sys.argv[1:])
    for data in ran.values():
        data.pop("metadata")
        data.update(run_stamp(command))
    previous = args.out / "summary.json"
    summary = json.loads(previous.read_text()) if previous.exists() else {"datasets": {}}
    summary["datasets"] = merge_runs(summary["datasets"], ran)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (args.out / "report.md").write_text(report(summary) + "\n")
    print(f"wrote {args.out}/summary.json, report.md", file=sys.stderr)


if __name__ == "__main__":
    main()
