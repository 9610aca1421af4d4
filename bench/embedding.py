"""Embedding backends side by side in one run: torch (sentence-transformers) against ONNX
Runtime fp32 and its int8 graph (the default for new collections since issue 38: auto; fp32 is
PGCITE_EMBED_BACKEND=onnx), each as it runs now (one text per run, a worker per core) and as it
ran before (padded length buckets of 32 on an all-core session).

    python bench/embedding.py                      # writes bench/results/embedding/
    python bench/embedding.py --docs 100 --rounds 3 --skip latency --scifact-full \
        --out embedding/backends                   # issue 38's rows: speed and quality

Sections, every variant interleaved round by round (the machine is shared: medians of rounds):
- ingest: the whole pipeline (load, chunk, embed through the cache, entities, store, snapshot)
  on the first ``--docs`` SciFact abstracts, cold cache, per backend; chunks/s. The int8
  backend runs once more with ``entities = off`` (what entity recognition costs). The whole
  corpus's ingest, stage by stage, is bench/ingest.py's.
- raw: the embedder alone on the same chunk texts in batches of 32 (torch in document order;
  torch given all texts at once, which sentence-transformers sorts by length; onnx and int8
  now, and batched as before).
- query latency: one query at a time, back to back and 20 ms apart (quiet), and 16 threads
  calling at once (per-call latency); with a variant not kept, a lone query on every core.
- quality: dense-leg nDCG@10 (exact cosine, numpy; int8 also batched as before) on a SciFact subset (the first
  ``--quality-queries`` train queries, their relevant abstracts plus as many distractors), on
  XQuAD en (whole corpus and queries) and with ``--scifact-full`` on all 5,183 SciFact abstracts
  and 809 train claims, every backend; the hybrid leg's other half (BM25) does not change with
  the backend.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _common import DATA, RESULTS, client, commit_stamp

from pgcite._types import Contextual, Document
from pgcite.embed import Embedder
from pgcite.embed._base import Vectors, text_sha256
from pgcite.embed._onnx import OnnxEmbedder, _session
from pgcite.embed._registry import load_embedder
from pgcite.ingest._chunking import chunk_document
from pgcite.ingest._entities import recognizer_for
from pgcite.ingest._loaders import iter_documents
from pgcite.ingest._pipeline import chunk_budget, embedding_text, ingest
from pgcite.store._collections import CollectionSettings, create_collection

MODEL = "all-MiniLM-L6-v2"
BACKENDS = ("torch", "onnx", "onnx-int8")


class Batched:
    """The onnx embedder as it ran before one text per run: padded batches of 32 texts of
    similar length (longest first, results back in order) on one session with an intra-op
    thread per core."""

    def __init__(self, inner: OnnxEmbedder, batch_size: int = 32) -> None:
        import onnxruntime

        self.inner = inner
        self.batch_size = batch_size
        self.session = _session(onnxruntime, inner._path, 0)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), self.inner.spec.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            batch = order[start: start + self.batch_size]
            out[batch] = self.inner._run(self.session, [texts[i] for i in batch])
        return out


def _chunk_texts(docs: list[Document], embedder: Embedder, budget: int,
                 contextual: Contextual) -> list[str]:
    return [embedding_text(ch, contextual) for d in docs
            for ch in chunk_document(d, count_tokens=embedder.count_tokens, max_tokens=budget,
                                     contextual=contextual)]


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


# Between the queries of a quiet run: on a quiet machine a query arrives at idle cores, and one
# right after another finds the last one's weights in cache and its core awake (fp32 MiniLM
# 6.5 ms back to back against 7.6-8.6 ms 20 ms apart on one core, int8 1.8 against 4.0).
QUIET_GAP_S = 0.02


def _latencies(embed: Callable[[str], Any], queries: Sequence[str], threads: int,
               gap_s: float = 0.0) -> list[float]:
    out: list[float] = []
    lock = threading.Lock()

    def work(part: Sequence[str]) -> None:
        for query in part:
            time.sleep(gap_s)
            started = time.perf_counter()
            embed(query)
            with lock:
                out.append((time.perf_counter() - started) * 1000)

    workers = [threading.Thread(target=work, args=(queries[i::threads],)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return out


def _ndcg10(scores: Vectors, doc_ids: list[str], qrels: list[dict[str, int]]) -> float:
    total = 0.0
    for row, rel in zip(scores, qrels, strict=True):
        top = np.argsort(-row)[:10]
        dcg = sum(rel.get(doc_ids[j], 0) / math.log2(rank + 2) for rank, j in enumerate(top))
        ideal = sorted(rel.values(), reverse=True)[:10]
        idcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(ideal))
        total += dcg / idcg if idcg else 0.0
    return total / len(qrels)


def _scifact(n_queries: int | None) -> tuple[list[str], list[str], list[str],
                                             list[dict[str, int]]]:
    """The first ``n_queries`` train claims with their relevant abstracts and as many
    distractors; ``None``: every train claim over the whole corpus."""
    rows = [json.loads(line) for line in (DATA / "scifact" / "corpus.jsonl").open()]
    queries = {q["_id"]: q["text"] for q in map(json.loads, (DATA / "scifact" / "queries.jsonl")
                                                 .open())}
    qrels: dict[str, dict[str, int]] = {}
    for line in (DATA / "scifact" / "qrels" / "train.tsv").read_text().splitlines()[1:]:
        qid, did, score = line.split("\t")
        qrels.setdefault(qid, {})[did] = int(score)
    chosen = [q for q in qrels if q in queries][:n_queries]
    if n_queries is None:
        return ([r["_id"] for r in rows], [f"{r['title']}\n{r['text']}" for r in rows],
                [queries[q] for q in chosen], [qrels[q] for q in chosen])
    relevant = {d for q in chosen for d in qrels[q]}
    distract = [r for r in rows if r["_id"] not in relevant][: len(relevant)]
    docs = [r for r in rows if r["_id"] in relevant] + distract
    return ([r["_id"] for r in docs], [f"{r['title']}\n{r['text']}" for r in docs],
            [queries[q] for q in chosen], [qrels[q] for q in chosen])


def _xquad() -> tuple[list[str], list[str], list[str], list[dict[str, int]]]:
    base = DATA / "xquad" / "en"
    docs = [json.loads(line) for line in (base / "corpus.jsonl").open()]
    queries = {q["_id"]: q["text"] for q in map(json.loads, (base / "queries.jsonl").open())}
    qrels: dict[str, dict[str, int]] = {}
    for line in (base / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, did, score = line.split("\t")
        qrels.setdefault(qid, {})[did] = int(score)
    chosen = [q for q in qrels if q in queries]
    return ([d["_id"] for d in docs], [f"{d['title']}\n{d['text']}" for d in docs],
            [queries[q] for q in chosen], [qrels[q] for q in chosen])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--queries", type=int, default=100, help="latency queries per variant")
    parser.add_argument("--quality-queries", type=int, default=150)
    parser.add_argument("--out", default="embedding",
                        help="results folder under bench/results (e.g. embedding/throughput)")
    parser.add_argument("--scifact-full", action="store_true",
                        help="also nDCG@10 on the whole SciFact corpus (onnx fp32 vs int8)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["ingest", "raw", "latency",
                                                                  "quality"])
    args = parser.parse_args()
    result: dict[str, Any] = {
        "commit": commit_stamp(), "command": "python bench/embedding.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, shared with other work "
                   f"(load average at start {os.getloadavg()[0]:.1f})",
        "rounds": args.rounds}
    with client() as c:
        base = c.settings
        embedders: dict[str, Embedder] = {
            b: load_embedder(MODEL, base.model_copy(update={"embed_backend": b}))
            for b in BACKENDS}
        onnx, int8 = embedders["onnx"], embedders["onnx-int8"]
        assert isinstance(onnx, OnnxEmbedder) and isinstance(int8, OnnxEmbedder)
        result["models"] = {b: e.spec.model_key for b, e in embedders.items()}
        lines = (DATA / "scifact" / "corpus.jsonl").read_text().splitlines()[: args.docs]
        with tempfile.TemporaryDirectory() as tmp:
            source = Path(tmp) / "sample.jsonl"
            source.write_text("\n".join(lines) + "\n")
            docs = [d for d in iter_documents([source]) if isinstance(d, Document)]
            c.drop_collection("bench_embedding", missing_ok=True)
            col = c.create_collection("bench_embedding", embedder=MODEL)
            texts = _chunk_texts(docs, onnx, chunk_budget(col.info.settings, onnx.spec),
                                 col.info.settings.contextual)
            c.drop_collection("bench_embedding")
            for e in embedders.values():  # warm-up: every side benefits
                e.embed_documents(texts[:8])
            # spaCy loads once per process: not inside the first variant's ingest
            recognizer = recognizer_for("english")
            if recognizer is not None:
                recognizer.entities(texts[:8])
            batched = {"onnx": Batched(onnx), "onnx-int8": Batched(int8)}
            raw: dict[str, Callable[[list[str]], Any]] = {
                "torch (document order)": lambda t: [embedders["torch"].embed_documents(
                    t[i: i + 32]) for i in range(0, len(t), 32)],
                # sentence-transformers sorts one call's texts by length itself: the fair
                # comparison for batched onnx (and what an ingest gives torch)
                "torch (length-sorted)": embedders["torch"].embed_documents,
                "onnx batched (before)": batched["onnx"].embed_documents,
                "onnx one text per run": onnx.embed_documents,
                "onnx-int8 batched (before)": batched["onnx-int8"].embed_documents,
                "onnx-int8 one text per run": int8.embed_documents,
            }
            timings: dict[str, list[float]] = {}
            for _ in range(args.rounds):
                if "ingest" not in args.skip:
                    for backend, entities in INGEST_VARIANTS:
                        rate = _ingest_rate(c, source, texts, backend, entities)
                        name = f"ingest {backend}" + ("" if entities == "auto" else
                                                      f" (entities {entities})")
                        timings.setdefault(name, []).append(rate)
                if "raw" not in args.skip:
                    for name, fn in raw.items():
                        started = time.perf_counter()
                        fn(texts)
                        timings.setdefault(f"raw {name}", []).append(
                            len(texts) / (time.perf_counter() - started))
            result["chunks"] = len(texts)
            result["chunks_per_s"] = {k: {"median": round(statistics.median(v), 2),
                                          "rounds": [round(x, 2) for x in v]}
                                      for k, v in timings.items()}
        if "latency" not in args.skip:
            result["query_latency_ms"] = _latency_section(embedders, args.queries, args.rounds)
        if "quality" not in args.skip:
            result["ndcg10_dense"] = _quality(
                {**embedders, "onnx-int8 batched (before)": Batched(int8)},
                args.quality_queries, args.scifact_full)
    result["load_average_at_end"] = round(os.getloadavg()[0], 1)
    _write(result, RESULTS / args.out)


# (backend, the collection's entities setting): the default pipeline per backend, and int8
# without entity recognition (its cost).
INGEST_VARIANTS = (("torch", "auto"), ("onnx", "auto"), ("onnx-int8", "auto"),
                   ("onnx-int8", "off"))


def _ingest_rate(c: Any, source: Path, texts: list[str], backend: str, entities: str) -> float:
    """The whole pipeline on a cold cache, on this backend: chunks/s. The collection is created
    under the backend's settings, so it records that backend's model (the int8 key for int8)."""
    name = f"bench_embedding_{backend.replace('-', '_')}_{entities}"
    settings = c.settings.model_copy(update={"embed_backend": backend})
    c.drop_collection(name, missing_ok=True)
    spec = load_embedder(MODEL, settings).spec
    with c.db.transaction() as conn:
        create_collection(conn, name, language="english", embedder=spec,
                          settings=CollectionSettings.model_validate({"entities": entities}))
    started = time.perf_counter()
    report = ingest(c.db, name, [source], progress=False, settings=settings)
    seconds = time.perf_counter() - started
    assert report.embedded == len(texts) == report.chunks_added, report
    assert c.collection(name).active_snapshot().embed_model == spec.model_key
    with c.db.transaction() as conn:  # cold again for the next round (per collection anyway)
        conn.execute("DELETE FROM pgcite.embedding_cache WHERE collection = %s"
                     " AND text_sha256 = ANY(%s)", (name, [text_sha256(t) for t in texts]))
    c.drop_collection(name)
    return report.chunks_added / seconds


class QueryBatcher:
    """A variant measured against one run per call (OnnxEmbedder.embed_query, the default):
    queries that arrive while every lane is busy go in ONE run together.

    Up to ``lanes`` runs (default: one per core; each uses one core) go at once; a caller that
    finds every lane busy queues up, and when a run ends the first waiter runs everything
    queued (up to ``max_batch``) as one batch and hands each caller its row. pgcite shipped
    this with one lane until this benchmark showed the second core idling; with a lane per
    core it is still no faster than one run per call (a batch pads and costs about as many
    runs as it has rows), so the product does not batch queries.
    """

    def __init__(self, run: Callable[[list[str]], Vectors], max_batch: int = 32,
                 lanes: int | None = None) -> None:
        self._run = run
        self._max_batch = max_batch
        self._lanes = max(1, lanes if lanes is not None else (os.cpu_count() or 1))
        self._lock = threading.Lock()
        self._running = 0
        self._waiting: list[_Pending] = []

    def embed(self, text: str) -> Vectors:
        mine = _Pending(text)
        with self._lock:
            if self._running >= self._lanes:
                self._waiting.append(mine)
            else:
                self._running += 1
                mine.batch = [mine]
        if mine.batch is None:
            mine.wake.wait()  # served by a batch, or handed the next batch to run
        if mine.batch is not None:
            self._lead(mine.batch)
        if mine.error is not None:
            raise mine.error
        assert mine.vector is not None
        return mine.vector

    def _lead(self, batch: list[_Pending]) -> None:
        try:
            vectors = self._run([p.text for p in batch])
            for pending, vector in zip(batch, vectors, strict=True):
                pending.vector = vector
        except Exception as exc:  # every caller of the batch sees the error
            for pending in batch:
                pending.error = exc
        finally:
            self._hand_on(batch)

    def _hand_on(self, batch: list[_Pending]) -> None:
        with self._lock:
            following = self._waiting[: self._max_batch]
            del self._waiting[: self._max_batch]
            if following:
                following[0].batch = following  # the first waiter runs the next batch
            else:
                self._running -= 1  # this lane is free
        for pending in batch:
            pending.wake.set()
        if following:
            following[0].wake.set()


class _Pending:
    def __init__(self, text: str) -> None:
        self.text = text
        self.wake = threading.Event()
        self.batch: list[_Pending] | None = None
        self.vector: Vectors | None = None
        self.error: Exception | None = None



class LoneQuery:
    """A variant measured against one run per call on one core (OnnxEmbedder.embed_query, the
    default) and not kept: a query that finds no other query running runs on an all-core
    session whose threads spin between kernels (and stop spinning when the run ends; left on,
    they spun ~30 ms of a core after every run). Back to back it takes about half the time on
    2 cores; with the machine idle between queries it was slower than one core, and in a
    loaded HTTP server it cost throughput (docs/ingest.md, "Backends")."""

    def __init__(self, embedder: OnnxEmbedder) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = os.cpu_count() or 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "1")
        options.add_session_config_entry("session.force_spinning_stop", "1")
        self._embedder = embedder
        self._solo = onnxruntime.InferenceSession(str(embedder._path), options,
                                                  providers=["CPUExecutionProvider"])
        self._lock = threading.Lock()
        self._running = 0

    def embed(self, text: str) -> Vectors:
        ids = self._embedder._tokenizer.encode(self._embedder.spec.query_prefix + text).ids
        with self._lock:
            alone = self._running == 0
            self._running += 1
        try:
            if not alone:
                return self._embedder._run_one(ids)
            feed = np.asarray([ids], dtype=np.int64)
            out: Vectors = self._solo.run(
                None, {"input_ids": feed, "attention_mask": np.ones_like(feed)})[0]
            row: Vectors = out[0]
            return row
        finally:
            with self._lock:
                self._running -= 1


def _latency_section(embedders: dict[str, Embedder], n: int, rounds: int) -> dict[str, Any]:
    rows = [json.loads(line)["text"] for line in (DATA / "scifact" / "queries.jsonl").open()]
    queries = rows[:n]
    onnx = embedders["onnx"]
    assert isinstance(onnx, OnnxEmbedder)
    int8 = embedders["onnx-int8"]
    assert isinstance(int8, OnnxEmbedder)
    variants: dict[str, Callable[[str], Any]] = {
        "torch": embedders["torch"].embed_query,
        "onnx, one run per call (default)": onnx.embed_query,
        "onnx, a lone query on every core (not kept)": LoneQuery(onnx).embed,
        "onnx-int8, one run per call": int8.embed_query,
        "onnx-int8, a lone query on every core (not kept)": LoneQuery(int8).embed,
        "onnx micro-batched, one lane (before)": QueryBatcher(
            lambda texts: onnx._run(onnx._session, texts), lanes=1).embed,
        "onnx micro-batched, a lane per core": QueryBatcher(
            lambda texts: onnx._run(onnx._session, texts)).embed,
    }
    lat: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, embed in variants.items():
            lat.setdefault(f"{name} back to back", []).extend(_latencies(embed, queries, 1))
            lat.setdefault(f"{name} quiet", []).extend(
                _latencies(embed, queries, 1, QUIET_GAP_S))
            lat.setdefault(f"{name} 16 callers", []).extend(_latencies(embed, queries * 2, 16))
    return {k: {"p50": round(_pct(v, 50), 1), "p95": round(_pct(v, 95), 1), "n": len(v)}
            for k, v in lat.items()}


def _quality(embedders: dict[str, Any], n_queries: int, full: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    data = {"scifact_subset": _scifact(n_queries), "xquad_en": _xquad()}
    if full:
        data["scifact_full"] = _scifact(None)
    for name, (doc_ids, docs, queries, qrels) in data.items():
        row: dict[str, Any] = {"docs": len(docs), "queries": len(queries)}
        for variant, embedder in embedders.items():
            if name == "scifact_full" and "before" in variant:
                continue  # measured before (bench/results/embedding/quality); the slowest
            d = embedder.embed_documents(docs)
            # queries ran one at a time before too: a batched variant's are its embedder's
            query = getattr(embedder, "inner", embedder).embed_query
            q = np.stack([query(text) for text in queries])
            row[variant] = round(_ndcg10(q @ d.T, doc_ids, qrels), 4)
        out[name] = row
    return out


def _write(result: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = ["# Embedding backends (all-MiniLM-L6-v2)", "",
             f"`{result.get('command', 'python bench/embedding.py')}` at "
             f"{result.get('commit', '?')}.", "", f"Machine: {result['machine']}, "
             f"{result.get('load_average_at_end', '?')} at the end; "
             f"{result['rounds']} interleaved rounds, medians.", ""]
    if result.get("chunks_per_s"):  # empty when --skip ingest raw
        lines += [f"Chunks/s on {result.get('chunks')} SciFact chunks:", "",
                  "| variant | chunks/s (median) | rounds |", "|---|---|---|"]
        lines += [f"| {k} | {v['median']} | {v['rounds']} |"
                  for k, v in result["chunks_per_s"].items()]
    if "query_latency_ms" in result:
        lines += ["", "Query embedding latency (in-process; 16 callers = 16 threads at once):",
                  "", "| variant | p50 ms | p95 ms | n |", "|---|---|---|---|"]
        lines += [f"| {k} | {v['p50']} | {v['p95']} | {v['n']} |"
                  for k, v in result["query_latency_ms"].items()]
    if "ndcg10_dense" in result:
        lines += ["", "Dense-leg nDCG@10 (exact cosine):", "",
                  "| data | docs | queries | torch | onnx | onnx-int8 | onnx-int8 batched (before)"
                  " |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {k} | {v['docs']} | {v['queries']} | {v.get('torch', '–')} | {v['onnx']} | "
                  f"{v['onnx-int8']} | {v.get('onnx-int8 batched (before)', '–')} |"
                  for k, v in result["ndcg10_dense"].items()]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
