"""Fit the precise answerer's sentence weights (PreciseOptions: bm25, embedding, rank,
answer_type) as a conditional logit over each answer's candidate sentences — the label: the
sentence holds a gold answer string — on XQuAD English questions 301..N, and check the
first-sentence hit rate (the top-scored sentence holds a gold string) on questions 1-300,
never fitted on, for the current defaults and the fitted weights, on the e5 and MiniLM
collections side by side.

    python bench/answer_weights.py [--fit-end 1190]   # bench/results/answer_weights/
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np
from _common import DATA, RESULTS, client, ensure_collection

from pgcite.answer._context import to_passage
from pgcite.answer._precise import PreciseGenerator, PreciseOptions, Sentence, terms
from pgcite.answer._sentences import split_sentences
from pgcite.embed._registry import embedder_for_key
from pgcite.evaluate import load_golden
from pgcite.evaluate._answers import contains_answer

NAMES = ("bm25", "embedding", "rank", "answer_type")
HELD_OUT = 300  # questions 1..300: the answer benchmark's (bench/answers.py --limit 300)
COLLECTIONS = [("xquad_en_e5", "multilingual-e5-small"), ("xquad_en", "all-MiniLM-L6-v2")]
OUT = RESULTS / "answer_weights"


def candidates(col: Any, generator: PreciseGenerator, queries: list[Any]) -> list[tuple[
        np.ndarray, np.ndarray]]:
    """Per question: its sentences' signal matrix (NAMES order) and gold labels."""
    rows = []
    for q in queries:
        result = col.search(q.text, top_k=5, filters={"cutoff": q.cutoff})
        sentences = [Sentence(p, i, s, tuple(terms(s, "english")))
                     for p in map(to_passage, result.hits) for i, s in enumerate(split_sentences(p.text))]
        if not sentences:
            continue
        sig = generator.signals(q.text, sentences)
        dense = sig.embedding or [0.0] * len(sentences)
        x = np.array([sig.bm25, dense, sig.rank, sig.answer_type], dtype=float).T
        y = np.array([contains_answer(s.text, q.answers) for s in sentences], dtype=float)
        rows.append((x, y))
    return rows


def fit(rows: list[tuple[np.ndarray, np.ndarray]], *, l2: float = 1.0,
        iterations: int = 400, rate: float = 0.5) -> np.ndarray:
    """Conditional logit (softmax over one question's sentences) by gradient descent, L2."""
    w = np.zeros(len(NAMES))
    useful = [(x, y / y.sum()) for x, y in rows if y.sum() > 0]
    for _ in range(iterations):
        grad = l2 * w
        for x, target in useful:
            z = x @ w
            p = np.exp(z - z.max())
            grad += x.T @ (p / p.sum() - target)
        w -= rate * grad / len(useful)
    return w


def first_hit(rows: list[tuple[np.ndarray, np.ndarray]], w: np.ndarray) -> float:
    return float(np.mean([y[int(np.argmax(x @ w))] for x, y in rows]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit-end", type=int, default=1190, help="fit on questions 301..N")
    args = parser.parse_args()
    golden = load_golden(DATA / "xquad" / "en")
    defaults = PreciseOptions()
    current = np.array([getattr(defaults, n) for n in NAMES])
    summary: dict[str, Any] = {"signals": NAMES, "held_out": f"questions 1-{HELD_OUT}",
                               "fitted_on": f"questions {HELD_OUT + 1}-{args.fit_end}",
                               "command": "python bench/answer_weights.py " + " ".join(sys.argv[1:]),
                               "collections": {}}
    fitted: np.ndarray | None = None
    with client() as c:
        for name, model in COLLECTIONS:
            col = ensure_collection(c, name, [DATA / "xquad" / "en" / "corpus.jsonl"],
                                    embedder=model)
            gen = PreciseGenerator(embedder=embedder_for_key(col.active_snapshot().embed_model,
                                                             c.settings))
            test = candidates(col, gen, list(golden.queries[:HELD_OUT]))
            if fitted is None:  # fitted on the first collection (e5), checked on both
                train = candidates(col, gen, list(golden.queries[HELD_OUT:args.fit_end]))
                raw = fit(train)
                fitted = raw / raw[0]  # bm25 = 1, as the defaults are written
                summary["fitted_weights"] = dict(zip(NAMES, np.round(fitted, 3).tolist(), strict=True))
                summary["fit_first_hit"] = round(first_hit(train, fitted), 3)
            summary["collections"][name] = {
                "model": model, "questions": len(test),
                "first_hit_current_defaults": round(first_hit(test, current), 3),
                "first_hit_fitted": round(first_hit(test, fitted), 3)}
            print(name, summary["collections"][name], file=sys.stderr)
    assert fitted is not None
    summary["current_defaults"] = dict(zip(NAMES, current.tolist(), strict=True))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    lines = ["# Sentence weights of the precise answerer", "",
             f"Fitted on XQuAD en {summary['fitted_on']} (e5 collection), checked on "
             f"{summary['held_out']}. First hit: the top-scored sentence holds a gold answer "
             f"string (the answer's first sentence). Command: `{summary['command']}`", "",
             "| weights | " + " | ".join(NAMES) + " |", "|---|" + "---|" * len(NAMES),
             "| current defaults | " + " | ".join(f"{v:g}" for v in current) + " |",
             "| fitted | " + " | ".join(f"{v:.2f}" for v in fitted) + " |", "",
             "| collection | questions | first hit, current defaults | first hit, fitted |",
             "|---|---|---|---|"]
    for name, row in summary["collections"].items():
        lines.append(f"| {name} ({row['model']}) | {row['questions']} | "
                     f"{row['first_hit_current_defaults']} | {row['first_hit_fitted']} |")
    (OUT / "report.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
