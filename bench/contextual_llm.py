"""Contextual chunks with an LLM-written situating sentence (``contextual = "llm"``) against the
structural header and no context, side by side: XQuAD English (240 paragraphs, 1,190 questions),
the Pepys golden set and SciFact train.

The packaged SmolLM2 (llama.cpp) writes the sentences during the ingest: ~2 s a chunk on 2 cores,
fine for XQuAD's 309 chunks, hours for Pepys (11k) and SciFact (13k). For those, ``--replay``
answers each prompt with a reply the same model generated in one GPU batch
(bench/_situate_replay.py, bench/situate_generate.py); the ingest is otherwise the product's own.

    python bench/contextual_llm.py                                   # XQuAD en, live SmolLM2
    python bench/contextual_llm.py --dataset pepys --replay bench/results/contextual-llm/replies.json.gz
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from _common import DATA, client, write
from _situate_replay import ReplayChat
from contextual import contextual_collection

import pgcite
from pgcite._types import Contextual
from pgcite.evaluate import GoldenSet, Searcher, evaluate, load_golden
from pgcite.evaluate._collection import collection_searcher, embed_queries, run_metadata
from pgcite.llm import ChatModel, LLMConfig, make_chat_model

DEPTH = 100
MODES: dict[str, dict[str, Any]] = {
    "vector": {"mode": "vector", "stages": {"route": False}},
    "hybrid (convex)": {"mode": "hybrid", "fusion": "convex", "stages": {"route": False}},
}


PEPYS = DATA / "pepys-diary"
# dataset -> (corpus, overrides, the off / header collections other benchmarks already built)
DATASETS: dict[str, tuple[Any, pgcite.Overrides | None, dict[str, str]]] = {
    "xquad/en": (DATA / "xquad" / "en" / "corpus.jsonl", None, {}),
    "pepys": (PEPYS / "entries.jsonl", pgcite.Overrides(author="Samuel Pepys", corpus="A"),
              {"off": "pepys", "header": "pepys_ctx"}),
    "scifact": (DATA / "scifact" / "corpus.jsonl", None,
                {"off": "scifact", "header": "scifact_ctx"}),
}


def golden_set(dataset: str) -> GoldenSet:
    if dataset == "pepys":
        return load_golden(PEPYS / "golden.jsonl")
    if dataset == "scifact":
        return load_golden(DATA / "scifact", split="train")
    return load_golden(DATA / dataset, split="test", name=dataset)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="xquad/en", choices=sorted(DATASETS))
    parser.add_argument("--replay", type=Path, default=None,
                        help="recorded SmolLM2 replies (replies.json.gz) instead of live calls")
    parser.add_argument("--llm-collection", default=None,
                        help="name of the contextual=llm collection (default ctxllm_<dataset>_llm)")
    parser.add_argument("--out", default=None,
                        help="results folder under bench/results (default contextual-llm/<dataset>)")
    args = parser.parse_args()
    corpus, overrides, names = DATASETS[args.dataset]
    golden = golden_set(args.dataset)
    slug = args.dataset.replace("/", "_")
    chat: ChatModel
    if args.replay is None:
        chat, llm = make_chat_model(LLMConfig(kind="llama-cpp", timeout_s=120)), "llama-cpp"
    else:
        chat, llm = ReplayChat.load(args.replay), f"replayed from {args.replay.name}"
    with client() as plain, pgcite.Client(plain.settings, llm=chat) as c:
        cols: dict[str, pgcite.Collection] = {}
        costs: dict[str, Any] = {}
        modes: tuple[Contextual, ...] = ("off", "header", "llm")
        for mode in modes:
            name = names.get(mode, f"ctxllm_{slug}_{mode}")
            if mode == "llm" and args.llm_collection:
                name = args.llm_collection
            cols[mode], costs[mode] = contextual_collection(c, name, [corpus],
                                                            overrides=overrides, contextual=mode)
        vectors, _ = embed_queries(cols["off"].view(), golden)
        configs: dict[str, Searcher] = {
            f"{name} · {mode}": collection_searcher(col.view(), depth=DEPTH, vectors=vectors, **opts)
            for name, opts in MODES.items() for mode, col in cols.items()
        }
        result = evaluate(golden, configs, k=10, progress=sys.stderr.isatty(),
                          metadata=run_metadata(cols["llm"].view(), {
                              "benchmark": "contextual-llm", "dataset": args.dataset,
                              "llm": f"SmolLM2-135M-Instruct ({llm})", "ingest": costs}))
    write(result, args.out or f"contextual-llm/{slug}")


if __name__ == "__main__":
    main()
