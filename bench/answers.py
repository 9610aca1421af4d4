"""The answer benchmark: what the answerers say, scored without a model against gold answer
strings and gold evidence (evaluate/_answers.py) — XQuAD en and ar (first N questions each)
and the Pepys golden set — with baselines, the previous answerer, the precise one and its
ablations (and an OpenAI-compatible model, if given) side by side over the same retrievals.

    python bench/answers.py --limit 300                      # writes bench/results/answers/
    python bench/answers.py --llm-base-url http://localhost:8080/v1 --llm-model my-model

Every variant answers from the same SearchResult per question (one retrieval, hybrid, top 5,
the answer defaults) through the real pipeline (abstention, citation and attribution checks).
Sentence embeddings are memoised per text, so only the first embedding variant pays for them:
its generate latency is the one reported as the precise answerer's.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from _common import (
    DATA,
    PEPYS_1664,
    PEPYS_FEB_1663,
    PEPYS_JOURNAL,
    RESULTS,
    ROOT,
    cell,
    client,
    dated_in,
    ensure_collection,
    read_jsonl,
    run_stamp,
    stamp_line,
)

import pgcite
from pgcite.answer import (
    AnswerSettings,
    ExtractiveGenerator,
    GenerationRequest,
    Generator,
    LlamaCppGenerator,
    OpenAIChatGenerator,
    answer_question,
)
from pgcite.answer._pipeline import DEFAULT_NEIGHBOURS
from pgcite.answer._precise import PreciseGenerator, PreciseOptions
from pgcite.answer._qtype import question_kind
from pgcite.answer._roles import frame_role
from pgcite.answer._sentences import split_sentences
from pgcite.embed._base import Embedder, Vectors
from pgcite.embed._registry import embedder_for_key
from pgcite.evaluate import GoldenQuery, load_golden
from pgcite.evaluate._answers import (
    AnswerRecord,
    collection_passages,
    score_answer,
    summarize_by_kind,
)
from pgcite.retrieve import SearchResult

OUT = RESULTS / "answers"
PEPYS_SETS = (DATA / "pepys-diary" / "golden.jsonl", ROOT / "abstention" / "pepys-extra.jsonl")
# (name, collection, judged sets, take the first --limit queries?)
DATASETS: list[tuple[str, str, tuple[Path, ...], bool]] = [
    ("xquad-en", "xquad_en_e5", (DATA / "xquad" / "en",), True),
    ("xquad-en-minilm", "xquad_en", (DATA / "xquad" / "en",), True),  # the default embedder
    ("xquad-ar", "xquad_ar_e5", (DATA / "xquad" / "ar",), True),
    ("pepys", "pepys", PEPYS_SETS, False),
    # judged after the Pepys choices were made (bench/abstention/README.md): a check, not a tuning
    ("pepys-held-out", "pepys", (ROOT / "abstention" / "pepys-new.jsonl",
                                 ROOT / "abstention" / "pepys-1664.jsonl"), False),
]


class LeadGenerator:
    """Baseline: the top passage's first sentences, citing it."""

    name = "lead"

    def __init__(self, sentences: int = 2) -> None:
        self.sentences = sentences

    def generate(self, request: GenerationRequest) -> str:
        top = request.passages[0]
        lead = " ".join(split_sentences(top.text)[: self.sentences])
        return f"{lead.replace('[', '(').replace(']', ')')} [{top.id}]"


class MemoEmbedder:
    """An embedder that remembers each text's vector (the variants share one question's)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.spec = inner, inner.spec
        self.docs: dict[str, np.ndarray] = {}
        self.queries: dict[str, Vectors] = {}

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        todo = [t for t in dict.fromkeys(texts) if t not in self.docs]
        if todo:
            for text, vector in zip(todo, self.inner.embed_documents(todo), strict=True):
                self.docs[text] = vector
        return np.stack([self.docs[t] for t in texts]).astype(np.float32)

    def embed_query(self, text: str) -> Vectors:
        if text not in self.queries:
            self.queries[text] = self.inner.embed_query(text)
        return self.queries[text]

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


Factory = Callable[[Embedder | None, str], Generator]


def variants(llm: tuple[str, str] | None, gguf: Path | None = None) -> dict[str, Factory]:
    def precise(**changes: Any) -> Factory:
        return lambda emb, lang: PreciseGenerator(
            embedder=emb, language=lang, options=PreciseOptions(**changes))

    out: dict[str, Factory] = {
        "baseline: top passage, first 2 sentences": lambda emb, lang: LeadGenerator(2),
        "baseline: top passage, first sentence": lambda emb, lang: LeadGenerator(1),
        "extractive (previous default)": lambda emb, lang: ExtractiveGenerator(),
        "precise (new default)": precise(),
        # the defaults before the fitted weights (round 3, docs/answers.md)
        "precise, previous defaults (embedding 1, type 0.3, 2 sentences, 60 words)": precise(
            embedding=1.0, rank=0.3, answer_type=0.3, max_sentences=2, max_words=60),
        "precise, 2 sentences, 60 words": precise(max_sentences=2, max_words=60),
        "precise, 1 sentence": precise(max_sentences=1),
        "precise − embedding": precise(embedding=0.0),
        "precise − bm25": precise(bm25=0.0),
        "precise − rank": precise(rank=0.0),
        "precise − answer type": precise(answer_type=0.0),
        "precise, no date match": precise(date_match=0.0),
        "precise, every sentence embedded": precise(embed_top=1000),
        "precise, rank 1": precise(rank=1.0),
        "precise, one passage": precise(follow_ratio=1.0),
    }
    if llm is not None:
        base_url, model = llm
        out[f"llm: {model}"] = lambda emb, lang: OpenAIChatGenerator(
            base_url=base_url, model=model, timeout_s=120.0)
    if gguf is not None:  # one model for all questions: loading it per question would dominate
        model_in_process = LlamaCppGenerator(model_path=gguf, n_ctx=4096, max_tokens=200)
        out[f"llm in-process: {gguf.stem}"] = lambda emb, lang: model_in_process
    return out


_COMPARED = ("extractive (previous default)", "precise (new default)")  # report() reads both


def with_kind(query: GoldenQuery, beir: bool) -> GoldenQuery:
    """XQuAD queries get their question word as kind (Pepys keeps its judged kinds)."""
    return query.model_copy(update={"kind": question_kind(query.text)}) if beir else query


def run_dataset(col: pgcite.Collection, queries: list[GoldenQuery],
                factories: dict[str, Factory]) -> tuple[dict[str, list[AnswerRecord]], float]:
    snap = col.active_snapshot()
    embedder = MemoEmbedder(embedder_for_key(snap.embed_model, col.client.settings))
    settings = AnswerSettings(persona_author=col.info.settings.persona_author,
                              language=col.info.ts_config)
    generators = {name: make(embedder, settings.language) for name, make in factories.items()}
    passages = collection_passages(col.view(snap.snapshot_id, embedder=False))
    records: dict[str, list[AnswerRecord]] = {name: [] for name in generators}
    retrieval: list[float] = []
    for n, query in enumerate(queries, 1):
        started = time.perf_counter()
        result = col.search(query.text, top_k=5, mode="hybrid", filters={"cutoff": query.cutoff},
                            snapshot_id=snap.snapshot_id)
        retrieval.append((time.perf_counter() - started) * 1000)

        def search(query: str, *, top_k: int, mode: str, filters: Any, stages: Any,
                   result: SearchResult = result) -> SearchResult:
            return result

        for name, generator in generators.items():
            answer = answer_question(search, query.text, settings=settings, embedder=embedder,
                                     generator=generator)
            records[name].append(score_answer(
                query, answer=answer.answer, abstained=answer.abstained,
                cited=answer.citations, passages=passages,
                latency_ms=answer.timings_ms.get("generate", 0.0)))
        if n % 25 == 0:
            print(f"  {n}/{len(queries)}", file=sys.stderr)
    return records, statistics.median(retrieval)


def write_runs(name: str, records: dict[str, list[AnswerRecord]]) -> None:
    runs = OUT / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    with (runs / f"{name}.jsonl").open("w", encoding="utf-8") as handle:
        for variant, rows in records.items():
            for row in rows:
                handle.write(json.dumps({"variant": variant, **row.model_dump()},
                                        ensure_ascii=False) + "\n")


COLUMNS = [("containment", "contains"), ("first_sentence_containment", "1st sent."),
           ("citation_precision", "cit. prec."), ("cites_only_evidence", "only evidence"),
           ("citation_recall", "cit. recall"), ("cites_relevant", "cites relevant"),
           ("first_sentence_frames", "frames first"), ("cutoff_violations", "late cit."),
           ("words", "words"),
           ("abstain_answerable", "abstain (answerable)"), ("abstain_absent", "abstain (absent)"),
           ("latency_ms_p50", "generate p50 ms")]


def report(summary: dict[str, Any]) -> str:
    lines = ["# Answer benchmark", "",
             "Scored without a model (evaluate/_answers.py). contains / 1st sent.: a gold answer "
             "string in the answer / its first sentence (abstaining counts as a miss); cit. prec.: "
             "share of cited passages that are the judged evidence or contain a gold string; only "
             "evidence: answers citing nothing else; cit. recall: the judged evidence is cited; "
             "words: answer length; generate p50: the answerer alone (retrieval is shared).", ""]
    for name, data in summary["datasets"].items():
        lines += [f"## {name}", "", f"{data['queries']} queries, collection `{data['collection']}` "
                  f"({data['embedding_model']}), retrieval p50 {data['retrieval_ms_p50']} ms. "
                  f"Command: `{data['command']}`", ""]
        lines.append("| variant | " + " | ".join(c[1] for c in COLUMNS) + " |")
        lines.append("|---|" + "---|" * len(COLUMNS))
        for variant, kinds in data["variants"].items():
            row = kinds["all"]
            lines.append(f"| {variant} | " + " | ".join(cell(row.get(c[0])) for c in COLUMNS)
                         + " |")
        lines += ["", "Per query kind (precise vs previous):", "",
                  "| kind | n | previous: contains / 1st / prec. / cites relevant | precise: "
                  "contains / 1st / prec. / cites relevant |",
                  "|---|---|---|---|"]
        old, new = data["variants"]["extractive (previous default)"], data["variants"][
            "precise (new default)"]
        for kind in [k for k in new if k != "all"]:
            def trio(d: dict[str, Any]) -> str:
                return " / ".join(cell(d.get(k)) for k in (
                    "containment", "first_sentence_containment", "citation_precision",
                    "cites_relevant"))
            lines.append(f"| {kind} | {new[kind]['queries']} | {trio(old[kind])} | "
                         f"{trio(new[kind])} |")
        lines.append("")
    return "\n".join(lines)


# --- the headline: collections the answer defaults were not chosen on ---------------------------

# Every answer default, and the collections (families: a collection and the sets and subsets made
# from its text) it was chosen on. A collection's figures are "unseen" only when none was.
_AUTHOR = "the passages' author left out of the sentence query"
_DATES = "date match 0.5 in the answerer, date boost 0.5 in retrieval"
_NEIGHBOURS = ("the neighbouring passages, 1 either side, given to the answerer (found with "
               "bench/narrative.py on the Pepys golden set)")


@dataclass(frozen=True)
class Revert:
    """A default as it was before it was chosen: retrieval stages, PreciseOptions changes and
    the answer's neighbours (None: unchanged)."""

    stages: dict[str, Any] = field(default_factory=dict)
    precise: dict[str, Any] = field(default_factory=dict)
    neighbours: int | None = None
CHOSEN_ON: dict[str, tuple[str, ...]] = {
    "sentence weights bm25 1 / embedding 1.06 / rank 0.3 / answer type 0.6 (fitted on XQuAD en "
    "questions 301-1190)": ("xquad-en",),
    "3 sentences in 70 words, the next one from the best passage": ("xquad-en",),
    "frames never quoted (answer/_roles.py: rules written from the formats and the test "
    "fixture, no figure read)": (),
    _AUTHOR: ("pepys",),
    _DATES: ("pepys",),
    _NEIGHBOURS: ("pepys",),
    # retrieve/answerability_default.json: fitted on the pooled judged sets of bench/abstention
    # (every Pepys set here, XQuAD en with paragraphs removed); no earlier value is put back for
    # it, its leave-one-collection-out figures are bench/results/abstention's
    "abstention by the shipped answerability model (fitted on the Pepys sets and XQuAD en; "
    "leave-one-collection-out figures in bench/results/abstention)": ("pepys", "xquad-en"),
}
# Leave-one-collection-out: a default chosen on a collection, as it was before that choice
# (retrieval stages, PreciseOptions changes). A collection whose every tuned default is here is
# also asked with them reverted: the settings chosen without it. (XQuAD's sentence weights were
# fitted on its questions 301-1190 and are measured on 1-300: labelled tuned, not reverted.)
WITHOUT: dict[str, Revert] = {
    _AUTHOR: Revert(precise={"match_author": True}),
    _DATES: Revert(stages={"date_boost": 0.0}, precise={"date_match": 0.0}),
    _NEIGHBOURS: Revert(neighbours=0),
}


@dataclass(frozen=True)
class Judged:
    """A judged set asked of a collection with every default, as a new user would."""

    name: str
    family: str  # the text it comes from (see CHOSEN_ON)
    collection: str
    sets: tuple[Path, ...]
    limit: int | None = None  # the first N questions
    # a collection of the diary's entries in this range, asked the questions about it: absent
    # ones, and those with a judged-relevant entry in the range (the others are not judged here)
    entries: tuple[str, str] | None = None


ABSTENTION = ROOT / "abstention"
UNSEEN = [
    Judged("pepys golden + extra", "pepys", "pepys", PEPYS_SETS),
    Judged("pepys held-out questions", "pepys", "pepys",
           (ABSTENTION / "pepys-new.jsonl", ABSTENTION / "pepys-1664.jsonl")),
    Judged("pepys February 1663 (26 entries)", "pepys", "pepys_feb1663",
           (ABSTENTION / "pepys-feb1663.jsonl",), entries=PEPYS_FEB_1663),
    # a journal of a size between those two: the diary's 1664, its held-out questions about
    # 1664 and every held-out absent one
    Judged("pepys 1664 (366 entries)", "pepys", "pepys_1664",
           (ABSTENTION / "pepys-1664.jsonl", ABSTENTION / "pepys-new.jsonl"),
           entries=PEPYS_1664),
    # the shape of the archive the issue measured (a journal of ~530 entries, 40 questions in
    # five kinds, 8 absent), written blind for this collection (abstention/README.md)
    Judged("pepys journal, Jul 1661-Dec 1662 (536 entries)", "pepys", "pepys_journal",
           (ABSTENTION / "pepys-journal.jsonl",), entries=PEPYS_JOURNAL),
    Judged("xquad-en (MiniLM)", "xquad-en", "xquad_en", (DATA / "xquad" / "en",), limit=300),
    Judged("scifact (claims)", "scifact", "scifact", (DATA / "scifact",), limit=300),
]


def tuned_on(family: str) -> list[str]:
    return [d for d, on in CHOSEN_ON.items() if family in on]


def label(family: str) -> str:
    tuned = tuned_on(family)
    return "unseen" if not tuned else "tuned on this collection: " + "; ".join(tuned)


def without(family: str) -> Revert | None:
    """Every default tuned on ``family`` that has an earlier value put back to it, as one
    Revert (None when none has: nothing to ask again)."""
    reverted = [WITHOUT[d] for d in tuned_on(family) if d in WITHOUT]
    if not reverted:
        return None
    return Revert(stages={k: v for r in reverted for k, v in r.stages.items()},
                  precise={k: v for r in reverted for k, v in r.precise.items()},
                  neighbours=next((r.neighbours for r in reverted if r.neighbours is not None),
                                  None))


def without_label(family: str) -> str:
    """What the second pass reverts, and what it still has that was tuned on ``family``."""
    tuned = tuned_on(family)
    kept = [d for d in tuned if d not in WITHOUT]
    return ("leave-one-collection-out: " + "; ".join(f"without '{d}'" for d in tuned
                                                     if d in WITHOUT)
            + ("" if not kept else "; still tuned on it: " + "; ".join(kept)))


def with_options(changes: dict[str, Any]) -> Callable[[Generator], Generator]:
    """Wrap the default answerer into one with these PreciseOptions changed."""
    def wrap(chosen: Generator) -> Generator:
        if not isinstance(chosen, PreciseGenerator):
            return chosen
        return PreciseGenerator(embedder=chosen.embedder, language=chosen.language,
                                options=chosen.options.model_copy(update=changes))
    return wrap


@functools.cache  # read once a run: the collection is built from it and its questions chosen
def in_range(entries: tuple[str, str]) -> list[dict[str, Any]]:
    """The diary's entries dated in ``entries`` (first and last day, ISO)."""
    return list(filter(dated_in(entries), read_jsonl(DATA / "pepys-diary" / "entries.jsonl")))


def judged_here(queries: list[GoldenQuery], judged: Judged) -> list[GoldenQuery]:
    """The questions a collection of a range of entries is judged on: absent ones, and those
    with a judged-relevant entry in it."""
    if judged.entries is None:
        return queries
    ids = {r["_id"] for r in in_range(judged.entries)}
    return [q for q in queries if not q.relevant or ids.intersection(q.relevant)]


def judged_collection(c: pgcite.Client, judged: Judged) -> pgcite.Collection:
    if judged.entries is None:
        return c.collection(judged.collection)
    rows = in_range(judged.entries)
    path = OUT / "runs" / f"{judged.collection}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return ensure_collection(c, judged.collection, [path],
                             overrides=pgcite.Overrides(author="Samuel Pepys", corpus="A"))


# Neighbouring passages as answerer context (docs/answers.md): every set is also asked with the
# other setting, side by side, so the default's figures and the alternative's come from one run.
OTHER_NEIGHBOURS = 1 if DEFAULT_NEIGHBOURS == 0 else 0


def neighbours_label(n: int) -> str:
    return ("neighbours off" if n == 0 else f"neighbours {n} either side") + (
        " (default)" if n == DEFAULT_NEIGHBOURS else " (not default)")


def unseen(c: pgcite.Client, command: str, only: Sequence[str] | None = None
           ) -> dict[str, Any]:
    """Every judged set asked with the defaults (Collection.answer, the query's cutoff, nothing
    else), scored per kind; each labelled by what was tuned on its collection. Each is asked
    again with the other neighbours setting (``OTHER_NEIGHBOURS``), labelled so."""
    out: dict[str, Any] = {}
    for judged in UNSEEN:
        if only and not any(judged.name.startswith(o) for o in only):
            continue
        missing = [p for p in judged.sets if not p.exists()]
        if missing:
            print(f"{judged.name}: skipped, {missing[0]} is not here", file=sys.stderr)
            continue
        col = judged_collection(c, judged)
        queries = judged_here([with_kind(q, judged.family == "xquad-en")
                               for p in judged.sets for q in load_golden(p).queries],
                              judged)[: judged.limit]
        view = col.view(embedder=False)
        passages = collection_passages(view)
        reverted = without(judged.family)
        passes: list[tuple[str, str, Revert]] = [
            (judged.name, label(judged.family), Revert()),
            (f"{judged.name}, {neighbours_label(OTHER_NEIGHBOURS)}",
             f"{label(judged.family)}; {neighbours_label(OTHER_NEIGHBOURS)}",
             Revert(neighbours=OTHER_NEIGHBOURS))]
        if reverted is not None:
            passes.append((f"{judged.name}, settings chosen without it",
                           without_label(judged.family), reverted))
        for name, how, revert in passes:
            records = []
            neighbours = DEFAULT_NEIGHBOURS if revert.neighbours is None else revert.neighbours
            for query in queries:
                started = time.perf_counter()
                answer = col.answer(query.text, filters={"cutoff": query.cutoff},
                                    options={"neighbours": neighbours},
                                    snapshot_id=view.snapshot.snapshot_id,
                                    stages=revert.stages or None,
                                    wrap_generator=(with_options(revert.precise)
                                                    if revert.precise else None))
                records.append(score_answer(
                    query, answer=answer.answer, abstained=answer.abstained,
                    cited=answer.citations, passages=passages,
                    latency_ms=(time.perf_counter() - started) * 1000))
            print(f"{name}: {len(queries)} questions on {col.name}", file=sys.stderr)
            write_runs(f"unseen {name}", {"default": records})
            out[name] = {"collection": col.name, "family": judged.family, "label": how,
                         "neighbours": neighbours,
                         "queries": len(queries),
                         "sets": [str(p.relative_to(p.parents[1])) for p in judged.sets],
                         "embedding_model": view.snapshot.embed_model,
                         "figures": summarize_by_kind(records)}
    return out


# The texts whose sentences the frame rules are counted over (answer/_roles.py): every source
# text of the shared data, split as the answerer splits it.
FRAME_TEXTS = {"pepys diary": (DATA / "pepys-diary" / "entries.jsonl", "text"),
               "xquad en": (DATA / "xquad" / "en" / "corpus.jsonl", "text"),
               "scifact": (DATA / "scifact" / "corpus.jsonl", "text")}


def frame_counts() -> dict[str, Any]:
    """How many sentences of each shared text the answerer never quotes, by role, and how many
    texts open with one (a date line, mostly): what the frame rules cost and catch
    (docs/answers.md)."""
    out: dict[str, Any] = {}
    for name, (path, key) in FRAME_TEXTS.items():
        if not path.exists():
            continue
        roles: dict[str, int] = {}
        sentences = framed = texts = 0
        for row in read_jsonl(path):
            found = [frame_role(part) for part in split_sentences(row[key])]
            texts += 1
            sentences += len(found)
            framed += bool(found) and found[0] is not None
            for role in filter(None, found):
                roles[role] = roles.get(role, 0) + 1
        out[name] = {"texts": texts, "sentences": sentences, "set_aside": sum(roles.values()),
                     "by_role": dict(sorted(roles.items())), "open_with_a_frame": framed}
    return out


UNSEEN_COLUMNS = [("queries", "n"), ("abstain_answerable", "answerable refused"),
                  ("abstain_absent", "absent abstained"), ("cites_relevant", "cites relevant"),
                  ("citation_precision", "cit. prec."), ("containment", "contains"),
                  ("first_sentence_containment", "1st sent."),
                  ("first_sentence_frames", "frames first"),
                  ("cutoff_violations", "late citations"), ("words", "words")]


def unseen_report(summary: dict[str, Any]) -> str:
    lines = ["# Answers with every default, per collection", "",
             stamp_line(summary), "",
             "Each judged set is asked as a new user asks: `Collection.answer(question, "
             "cutoff=…)`, nothing else. cites relevant: answered answerable questions citing "
             "at least one judged-relevant passage; cit. prec.: the share of cited passages "
             "that are judged relevant (or hold a gold answer string); frames first: answers "
             "whose first quoted sentence is a heading, date line, salutation or signature; "
             "late citations: cited passages after the question's cutoff. A collection is "
             "*unseen* when no answer default was chosen on it; otherwise the label says "
             "which were, and where every such default has an earlier value, the collection "
             "is asked again with those values (*leave-one-collection-out*: the settings "
             "chosen without it).", "", "Defaults and where each was chosen:", ""]
    lines += [f"- {d}: {', '.join(on) or 'no collection'}" for d, on in CHOSEN_ON.items()]
    default, other = neighbours_label(DEFAULT_NEIGHBOURS), neighbours_label(OTHER_NEIGHBOURS)
    lines += ["", f"Every set is asked twice side by side: {default}, and {other} (the passages "
              "before and after each retrieved one in its document, under the same filters, "
              "given to the answerer too)."]
    for name, data in summary["datasets"].items():
        lines += ["", f"## {name}: {data['label']}", "",
                  f"`{data['collection']}` ({data['embedding_model']}), {data['queries']} "
                  f"questions: {', '.join(data['sets'])}.", "",
                  "| kind | " + " | ".join(c[1] for c in UNSEEN_COLUMNS) + " |",
                  "|---|" + "---|" * len(UNSEEN_COLUMNS)]
        for kind, row in data["figures"].items():
            lines.append(f"| {kind} | " + " | ".join(cell(row.get(c[0]))
                                                      for c in UNSEEN_COLUMNS) + " |")
    if summary.get("frames"):
        lines += ["", "## Sentences never quoted (answer/_roles.py), over the shared texts", "",
                  "| text | texts | sentences | set aside | share | by role | open with a frame |", "|---|---|---|---|---|---|---|"]
        for name, f in summary["frames"].items():
            roles = ", ".join(f"{r} {n}" for r, n in f["by_role"].items())
            lines.append(f"| {name} | {f['texts']} | {f['sentences']} | {f['set_aside']} | "
                         f"{f['set_aside'] / max(f['sentences'], 1):.1%} | {roles} | "
                         f"{f['open_with_a_frame']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--unseen", action="store_true",
                        help="the headline: every judged set asked with the defaults, labelled "
                             "unseen or tuned (writes results/answers/unseen/)")
    parser.add_argument("--sets", nargs="*", help="--unseen: only the judged sets whose name "
                        "starts with one of these (e.g. 'pepys held-out' 'xquad')")
    parser.add_argument("--limit", type=int, default=300, help="first N XQuAD questions")
    parser.add_argument("--sample", type=int, help="only this many of them, evenly spaced")
    parser.add_argument("--datasets", nargs="*", default=[d[0] for d in DATASETS])
    parser.add_argument("--pepys-collection", default="pepys",
                        help="the Pepys collection (bench/pepys.py builds 'pepys')")
    parser.add_argument("--llm-base-url", help="an OpenAI-compatible endpoint (…/v1)")
    parser.add_argument("--llm-model", help="its model name")
    parser.add_argument("--llm-model-path", type=Path,
                        help="a GGUF model run in-process by llama-cpp-python (e.g. SmolLM2)")
    parser.add_argument("--variants", nargs="*",
                        help="only the variants whose name starts with one of these (the two "
                             "defaults the report compares always run)")
    parser.add_argument("--label", help="store this run beside the others as '<dataset> <label>' "
                        "(e.g. a sampled LLM run) instead of replacing the dataset's figures")
    args = parser.parse_args()
    llm = (args.llm_base_url, args.llm_model) if args.llm_base_url and args.llm_model else None
    factories = {name: make for name, make in variants(llm, args.llm_model_path).items()
                 if not args.variants or name in _COMPARED
                 or any(name.startswith(v) for v in args.variants)}
    command = "python bench/answers.py " + " ".join(sys.argv[1:])
    if args.unseen:
        with client() as c:
            summary = {**run_stamp(command), "datasets": unseen(c, command, args.sets),
                       "frames": frame_counts()}
        (OUT / "unseen").mkdir(parents=True, exist_ok=True)
        (OUT / "unseen" / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        (OUT / "unseen" / "report.md").write_text(unseen_report(summary))
        print(f"wrote {OUT}/unseen/summary.json, report.md", file=sys.stderr)
        return
    ran: dict[str, Any] = {}
    with client() as c:
        for name, collection, paths, beir in DATASETS:
            if name not in args.datasets:
                continue
            col = c.collection(args.pepys_collection if name.startswith("pepys") else collection)
            queries = [with_kind(q, beir) for path in paths for q in load_golden(path).queries]
            if beir:  # the first --limit questions, or --sample of them evenly spaced
                queries = queries[: args.limit]
                queries = queries[:: max(1, len(queries) // args.sample)] if args.sample else queries
            print(f"{name}: {len(queries)} queries on {col.name}", file=sys.stderr)
            records, retrieval_ms = run_dataset(col, queries, factories)
            write_runs(f"{name} {args.label}" if args.label else name, records)
            ran[f"{name} {args.label}" if args.label else name] = {
                **run_stamp(command), "collection": col.name, "embedding_model": col.active_snapshot().embed_model,
                "queries": len(queries), "retrieval_ms_p50": round(retrieval_ms, 1),
                "variants": {v: summarize_by_kind(r) for v, r in records.items()}}
    # Datasets not run this time keep their last figures (each says the command it came from);
    # read just before writing, so runs of different datasets side by side do not clobber.
    OUT.mkdir(parents=True, exist_ok=True)
    previous = OUT / "summary.json"
    summary = json.loads(previous.read_text()) if previous.exists() else {"datasets": {}}
    summary["datasets"].update(ran)
    (OUT / "summary.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    (OUT / "report.md").write_text(report(summary) + "\n")
    print(f"wrote {OUT}/summary.json, report.md", file=sys.stderr)


if __name__ == "__main__":
    main()
