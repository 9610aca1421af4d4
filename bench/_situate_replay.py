"""The LLM situating sentences of ``contextual = "llm"``, generated in one batch elsewhere and
replayed into a normal ingest.

SmolLM2 writes one sentence per chunk: ~2 s a chunk with llama.cpp on this 2-core machine, hours
for SciFact and the Pepys diary. So the prompts are exported exactly as an ingest would send them
(the product's own chunking and ``situate_documents``, rendered by llama.cpp's chat template and
tokenised by llama.cpp), ``bench/situate_generate.py`` runs the same GGUF model greedily over all
of them on a GPU, and ``ReplayChat`` answers each prompt with its recorded reply during a real
ingest: chunking, cutting to the reserved tokens, storage and embedding are the product's own.

    python bench/_situate_replay.py export --out .gpu      # prompts for pepys, scifact, xquad/en
    python bench/_situate_replay.py decode .gpu/replies.npz .gpu/replies.json.gz
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from _common import DATA

import pgcite
from pgcite._types import Document
from pgcite.embed._registry import load_embedder
from pgcite.ingest._chunking import SITUATE_MAX_TOKENS, chunk_document
from pgcite.ingest._loaders import iter_documents
from pgcite.ingest._pipeline import chunk_budget
from pgcite.ingest._situate import situate_documents
from pgcite.llm import LLMError, packaged_gguf
from pgcite.llm._parse import clean_reply
from pgcite.store._collections import CollectionSettings

EMBEDDER = "all-MiniLM-L6-v2"
DATASETS: dict[str, tuple[Path, pgcite.Overrides | None]] = {
    "xquad/en": (DATA / "xquad" / "en" / "corpus.jsonl", None),
    "pepys": (DATA / "pepys-diary" / "entries.jsonl",
              pgcite.Overrides(author="Samuel Pepys", corpus="A")),
    "scifact": (DATA / "scifact" / "corpus.jsonl", None),
}


def prompt_key(system: str, user: str) -> str:
    return hashlib.sha256(f"{system}\x00{user}".encode()).hexdigest()[:24]


class _Recorder:
    """A chat model that records each prompt and fails, so situating falls straight through."""

    name = "recorder"
    timeout_s: float | None = None

    def __init__(self) -> None:
        self.prompts: dict[str, tuple[str, str]] = {}

    def chat(self, system: str, user: str, *, max_tokens: int = 256) -> str:
        self.prompts[prompt_key(system, user)] = (system, user)
        raise LLMError("recording only")


class ReplayChat:
    """Answers each situating prompt with the reply recorded for it; unknown prompts fail (and
    the ingest counts them as fallbacks, as it would a failed call)."""

    name = "replay"
    timeout_s: float | None = None

    def __init__(self, replies: dict[str, str]) -> None:
        self.replies = replies
        self.missing = 0

    @classmethod
    def load(cls, path: Path) -> ReplayChat:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return cls(json.load(fh))

    def chat(self, system: str, user: str, *, max_tokens: int = 256) -> str:
        reply = self.replies.get(prompt_key(system, user))
        if reply is None:
            self.missing += 1
            raise LLMError("no recorded reply for this prompt")
        return reply


def dataset_prompts(dataset: str) -> dict[str, tuple[str, str]]:
    """Every situating prompt an ingest of ``dataset`` into a new ``contextual="llm"`` collection
    would send (same loader, chunk budget and chunker as ``ingest``)."""
    path, overrides = DATASETS[dataset]
    embedder = load_embedder(EMBEDDER)
    budget = chunk_budget(CollectionSettings(contextual="llm"), embedder.spec)
    recorder = _Recorder()
    chunked = []
    for doc in iter_documents([path], overrides=overrides):
        if not isinstance(doc, Document):
            raise SystemExit(f"{path}: {doc}")
        chunked.append((doc, chunk_document(doc, count_tokens=embedder.count_tokens,
                                            max_tokens=budget, contextual="llm")))
    situate_documents(recorder, chunked, count_tokens=embedder.count_tokens, timeout_s=5,
                      workers=1)
    return recorder.prompts


def _llama(vocab_only: bool = True) -> Any:
    import llama_cpp

    return llama_cpp.Llama(model_path=str(packaged_gguf()), vocab_only=vocab_only, verbose=False)


class _Captured(Exception):
    pass


def render(llm: Any, system: str, user: str) -> list[int]:
    """The prompt tokens llama-cpp-python's ``create_chat_completion`` feeds the model (the GGUF's
    own chat template, tokenised with special tokens), caught at ``create_completion``."""
    captured: list[list[int]] = []

    def capture(prompt: list[int], **_: Any) -> None:
        captured.append(list(prompt))
        raise _Captured

    llm.create_completion = capture
    with contextlib.suppress(_Captured):
        llm.create_chat_completion(messages=[{"role": "system", "content": system},
                                             {"role": "user", "content": user}],
                                   max_tokens=SITUATE_MAX_TOKENS, temperature=0)
    return captured[0]


def export(out: Path, datasets: list[str]) -> None:
    """``prompts.npz``: keys, and every prompt's tokens as one flat uint16 array with offsets."""
    llm = _llama()
    keys: list[str] = []
    seqs: list[list[int]] = []
    for dataset in datasets:
        prompts = dataset_prompts(dataset)
        for key, (system, user) in prompts.items():
            keys.append(key)
            seqs.append(render(llm, system, user))
        print(f"{dataset}: {len(prompts)} prompts", file=sys.stderr)
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "prompts.npz", keys=np.array(keys),
                        tokens=np.concatenate([np.array(s, dtype=np.uint16) for s in seqs]),
                        offsets=np.concatenate([[0], np.cumsum(lengths)]))
    print(f"{len(keys)} prompts, {int(lengths.sum())} tokens (max {int(lengths.max())}) "
          f"-> {out / 'prompts.npz'}", file=sys.stderr)


def decode(replies_npz: Path, out: Path) -> None:
    """The generated token ids back to text, detokenised by llama.cpp as its completion does."""
    llm = _llama()
    data = np.load(replies_npz)
    offsets = data["offsets"]
    replies = {
        str(key): llm.detokenize([int(t) for t in data["tokens"][offsets[i]:offsets[i + 1]]])
        .decode("utf-8", errors="ignore")
        for i, key in enumerate(data["keys"])
    }
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        json.dump(replies, fh)
    print(f"{len(replies)} replies -> {out}", file=sys.stderr)


def compare(replies_path: Path, dataset: str, count: int) -> dict[str, Any]:
    """The recorded replies against llama.cpp's own on the first ``count`` prompts of ``dataset``:
    how many are identical, and how many give the same situating sentence once cleaned."""
    from pgcite.llm import LlamaCppChat

    replies = ReplayChat.load(replies_path).replies
    chat = LlamaCppChat(model_path=packaged_gguf(), timeout_s=None)
    same = same_first_line = 0
    prompts = list(dataset_prompts(dataset).items())[:count]
    for key, (system, user) in prompts:
        ours = replies[key]
        theirs = chat.chat(system, user, max_tokens=SITUATE_MAX_TOKENS)
        same += ours == theirs
        same_first_line += _first_line(ours) == _first_line(theirs)
    report = {"dataset": dataset, "prompts": len(prompts), "identical": same,
              "same_sentence": same_first_line}
    print(json.dumps(report), file=sys.stderr)
    return report


def _first_line(reply: str) -> str:
    lines = [line.strip() for line in clean_reply(reply).splitlines() if line.strip()]
    return " ".join(lines[0].split()) if lines else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="write the situating prompts as llama.cpp tokens")
    ex.add_argument("--out", type=Path, default=Path(".gpu"))
    ex.add_argument("--dataset", action="append", choices=sorted(DATASETS),
                    help="repeatable (default: all)")
    de = sub.add_parser("decode", help="generated tokens (replies.npz) -> replies.json.gz")
    de.add_argument("replies", type=Path)
    de.add_argument("out", type=Path)
    co = sub.add_parser("compare", help="recorded replies vs llama.cpp on the first N prompts")
    co.add_argument("replies", type=Path)
    co.add_argument("--dataset", default="xquad/en", choices=sorted(DATASETS))
    co.add_argument("--count", type=int, default=20)
    args = parser.parse_args()
    if args.command == "export":
        export(args.out, args.dataset or list(DATASETS))
    elif args.command == "decode":
        decode(args.replies, args.out)
    else:
        compare(args.replies, args.dataset, args.count)


if __name__ == "__main__":
    main()
