"""Greedy replies of a GGUF chat model to pre-tokenised prompts, batched on a GPU (or the CPU).

The batch half of bench/_situate_replay.py: it needs only numpy, torch, transformers, accelerate
and gguf (no pgcite), so it runs on a machine with an accelerator. Decoding mirrors
llama-cpp-python's ``create_chat_completion(temperature=0)``: greedy, stop at an end-of-generation
token, at most ``--max-new`` tokens. The weights are the GGUF's, dequantised by transformers, so
the arithmetic (float32 here, quantised dot products in llama.cpp) differs slightly:
``bench/_situate_replay.py compare`` reports how often the replies match llama.cpp's.

    python bench/situate_generate.py .gpu/prompts.npz MODEL.gguf OUT/replies.npz
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM

END_TOKENS = [0, 2]  # SmolLM2's <|endoftext|> and <|im_end|>: llama.cpp stops at either
PAD = 2


def batches(lengths: np.ndarray, max_batch: int, max_tokens: int) -> list[np.ndarray]:
    """Prompt indices grouped by similar length (little padding), within a token budget."""
    order = np.argsort(lengths, kind="stable")
    out: list[np.ndarray] = []
    start = 0
    while start < len(order):
        end = start + 1
        while (end < len(order) and end - start < max_batch
               and (end - start + 1) * int(lengths[order[end]]) <= max_tokens):
            end += 1
        out.append(order[start:end])
        start = end
    return out


def generate(model: torch.nn.Module, prompts: list[np.ndarray], max_new: int,
             device: str) -> list[list[int]]:
    """Left-padded greedy decoding of one batch; each reply cut at its first end token."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), PAD, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, p in enumerate(prompts):
        ids[row, width - len(p):] = torch.from_numpy(p.astype(np.int64))
        mask[row, width - len(p):] = 1
    with torch.inference_mode():
        out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),  # type: ignore[operator]
                             do_sample=False, max_new_tokens=max_new, eos_token_id=END_TOKENS,
                             pad_token_id=PAD)
    replies: list[list[int]] = []
    for row in out[:, width:].tolist():
        cut = next((i for i, t in enumerate(row) if t in END_TOKENS), len(row))
        replies.append(row[:cut])
    return replies


def save(path: Path, keys: np.ndarray, replies: dict[int, list[int]]) -> None:
    done = sorted(replies)
    lengths = np.array([len(replies[i]) for i in done], dtype=np.int64)
    flat = [t for i in done for t in replies[i]]
    np.savez_compressed(path, keys=keys[done], tokens=np.array(flat, dtype=np.uint16),
                        offsets=np.concatenate([[0], np.cumsum(lengths)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prompts", type=Path)
    parser.add_argument("gguf", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--max-new", type=int, default=64)
    parser.add_argument("--max-batch", type=int, default=384)
    parser.add_argument("--max-tokens", type=int, default=262_144, help="prompt tokens a batch")
    parser.add_argument("--limit", type=int, default=None, help="only the first N prompts")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    data = np.load(args.prompts)
    keys, tokens, offsets = data["keys"], data["tokens"], data["offsets"]
    count = len(keys) if args.limit is None else min(args.limit, len(keys))
    prompts = [tokens[offsets[i]:offsets[i + 1]] for i in range(count)]
    started = time.monotonic()
    model = AutoModelForCausalLM.from_pretrained(args.gguf.parent, gguf_file=args.gguf.name,
                                                 dtype=torch.float32)
    # transformers' decorated .to reads to mypy as unbound (self = the device): it is bound here
    model = model.to(device).eval()  # type: ignore[arg-type]
    print(f"model on {device} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    replies: dict[int, list[int]] = {}
    groups = batches(np.array([len(p) for p in prompts]), args.max_batch, args.max_tokens)
    for n, group in enumerate(groups, 1):
        for index, reply in zip(group, generate(model, [prompts[i] for i in group], args.max_new,
                                                device), strict=True):
            replies[int(index)] = reply
        if n % 10 == 0 or n == len(groups):
            save(args.out, keys, replies)  # partial results survive a time limit
            print(f"{len(replies)}/{count} replies, {time.monotonic() - started:.0f} s",
                  file=sys.stderr)


if __name__ == "__main__":
    main()
