"""Write the judged sets that are made by removing documents (bench/abstention/README.md).

    python bench/abstention/make_sets.py

- ``xquad-en-removed``: one paragraph of every XQuAD article is removed from the English
  collection (seeded choice); a question of a removed paragraph is *absent* unless one of its
  gold answer strings occurs in a paragraph of the same article that stays (then it might still
  be answered there, and it is left out); a sample of the questions of the paragraphs that stay
  is *answerable* (their judged paragraph is in the collection).
- ``scifact-removed``: the cited abstracts of a seeded sample of claims are removed from the
  SciFact corpus; those claims are *absent*; claims none of whose cited abstracts was removed
  are *answerable* (a seeded sample of them).

Each set is a golden file (``*.jsonl``, the format of ../shared/data/pepys-diary/golden.jsonl)
and the list of removed document ids (``*.removed``, one a line). Re-running writes the same
files: every choice is seeded.
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from _common import DATA, read_jsonl  # noqa: E402

SEED = 34
XQUAD_ANSWERABLE = 240
SCIFACT_ABSENT = 120
SCIFACT_ANSWERABLE = 240


def _qrels(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        query, doc, score = line.split("\t")
        if int(score) > 0:
            out[query].append(doc)
    return out


def _row(qid: str, text: str, kind: str, relevant: list[str], note: str) -> dict[str, object]:
    return {"id": qid, "query": text, "kind": kind, "relevant": relevant, "cutoff": None,
            "must_not": [], "note": note}


def xquad(rng: random.Random) -> tuple[list[dict[str, object]], list[str]]:
    base = DATA / "xquad" / "en"
    corpus = {d["_id"]: d for d in read_jsonl(base / "corpus.jsonl")}
    queries = read_jsonl(base / "queries.jsonl")
    qrels = _qrels(base / "qrels" / "test.tsv")
    articles: dict[str, list[str]] = defaultdict(list)
    for pid in sorted(corpus):
        articles[pid.rsplit("-", 1)[0]].append(pid)
    removed = sorted(rng.choice(pids) for pids in articles.values())
    gone = set(removed)
    absent, answerable = [], []
    for q in queries:
        (pid,) = qrels[q["_id"]]
        if pid not in gone:
            answerable.append(_row(q["_id"], q["text"], "fact", [pid], "its paragraph stays"))
            continue
        siblings = [corpus[p]["text"] for p in articles[pid.rsplit("-", 1)[0]] if p != pid]
        answers = q["metadata"]["answers"]
        if any(_contains(text, a) for text in siblings for a in answers):
            continue  # the answer string is in a paragraph that stays: not surely absent
        absent.append(_row(q["_id"], q["text"], "absent", [],
                           f"paragraph {pid} removed; no answer string in its article's others"))
    rng.shuffle(answerable)
    return absent + sorted(answerable[:XQUAD_ANSWERABLE], key=lambda r: str(r["id"])), removed


def _contains(text: str, answer: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(answer.strip()) + r"(?!\w)", text,
                     re.IGNORECASE) is not None


def scifact(rng: random.Random) -> tuple[list[dict[str, object]], list[str]]:
    base = DATA / "scifact"
    claims = {q["_id"]: q["text"] for q in read_jsonl(base / "queries.jsonl")}
    qrels = {q: docs for q, docs in _qrels(base / "qrels" / "train.tsv").items() if q in claims}
    chosen = rng.sample(sorted(qrels, key=int), SCIFACT_ABSENT)
    removed = sorted({doc for q in chosen for doc in qrels[q]}, key=int)
    gone = set(removed)
    absent = [_row(q, claims[q], "absent", [], "its cited abstracts removed: "
                   + ", ".join(qrels[q])) for q in sorted(chosen, key=int)]
    kept = [q for q in sorted(qrels, key=int) if q not in chosen and not gone & set(qrels[q])]
    picked = sorted(rng.sample(kept, SCIFACT_ANSWERABLE), key=int)
    answerable = [_row(q, claims[q], "fact", qrels[q], "its cited abstracts stay")
                  for q in picked]
    return absent + answerable, removed


def write(name: str, rows: list[dict[str, object]], removed: list[str]) -> None:
    (HERE / f"{name}.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    (HERE / f"{name}.removed").write_text("".join(f"{r}\n" for r in removed), encoding="utf-8")
    absent = sum(1 for r in rows if r["kind"] == "absent")
    print(f"{name}: {absent} absent, {len(rows) - absent} answerable, {len(removed)} removed",
          file=sys.stderr)


def main() -> None:
    write("xquad-en-removed", *xquad(random.Random(SEED)))
    write("scifact-removed", *scifact(random.Random(SEED)))


if __name__ == "__main__":
    main()
