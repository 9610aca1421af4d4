"""The answer benchmark's metrics: pure functions over answer text, citations and gold data."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pgcite
from pgcite.answer import OpenAIChatGenerator
from pgcite.evaluate import GoldenQuery, load_golden
from pgcite.evaluate._answers import (
    Passage,
    answer_golden,
    collection_passages,
    contains_answer,
    first_quote,
    first_sentence,
    normalize,
    score_answer,
    summarize,
    summarize_by_kind,
    word_count,
)

from .llm_server import chat_completion, serve

PASSAGES = {
    "gold-0": Passage(document_id="gold", text="The Panthers defense gave up just 308 points."),
    "other-0": Passage(document_id="other", text="Carolina won the game by 24 points."),
    "other-1": Passage(document_id="other2", text="They gave up 308 points, said a fan."),
}
QUERY = GoldenQuery(id="q", text="How many points?", kind="how many", relevant={"gold": 1},
                    answers=["308"])


def test_containment_is_whole_words_and_ignores_citations() -> None:
    assert contains_answer("They scored four times.", ["four"])
    assert not contains_answer("They scored fourteen times.", ["four"])
    assert not contains_answer("Nothing here [doc-308]", ["308"])  # an id is not an answer
    assert contains_answer("“Kawann   Short” led.", ["Kawann Short"])
    assert normalize("مُحَمَّد، 308!") == "محمد 308"


def test_first_sentence_of_quoted_and_prose_answers() -> None:
    assert first_sentence("A wrote: “One. Two” [a]\nsecond line [b]") == "A wrote: “One."
    assert first_sentence("It was 308. Then more [a].") == "It was 308."
    assert first_sentence("") == ""
    assert word_count("one two [a] three") == 3


def test_citation_precision_and_recall() -> None:
    # gold passage + a passage containing the gold string are evidence; the third is not
    record = score_answer(QUERY, answer="It was 308 [gold-0]. Also 24 [other-0]. [other-1]",
                          abstained=False, cited=["gold-0", "other-0", "other-1"],
                          passages=PASSAGES, latency_ms=1.0)
    assert record.contains and record.first_contains
    assert record.precision == 2 / 3 and record.only_evidence is False and record.gold_cited
    only = score_answer(QUERY, answer="308 [other-1]", abstained=False, cited=["other-1"],
                        passages=PASSAGES, latency_ms=1.0)
    assert only.precision == 1.0 and only.only_evidence and only.gold_cited is False


def test_abstentions_count_as_misses_and_per_kind() -> None:
    miss = score_answer(QUERY, answer="The sources do not answer this.", abstained=True,
                        cited=[], passages=PASSAGES, latency_ms=2.0)
    absent = GoldenQuery(id="a", text="Did he fly?", kind="absent")
    kept = score_answer(absent, answer="No.", abstained=True, cited=[], passages=PASSAGES,
                        latency_ms=3.0)
    hit = score_answer(QUERY, answer="308 [gold-0]", abstained=False, cited=["gold-0"],
                       passages=PASSAGES, latency_ms=4.0)
    totals = summarize([miss, kept, hit])
    assert totals["containment"] == 0.5 and totals["first_sentence_containment"] == 0.5
    assert totals["abstain_absent"] == 1.0 and totals["abstain_answerable"] == 0.5
    assert totals["citation_recall"] == 0.5 and totals["words"] == 1.0
    by_kind = summarize_by_kind([miss, kept, hit])
    assert list(by_kind) == ["all", "how many", "absent"]
    assert by_kind["absent"]["containment"] is None


def test_frames_first_and_citations_after_the_cutoff_are_counted() -> None:
    dated = {"late-0": Passage(document_id="late", text="The fire.", date_end=dt.date(1667, 1, 1)),
             "early-0": Passage(document_id="gold", text="308.", date_end=dt.date(1660, 1, 1)),
             "undated-0": Passage(document_id="x", text="No date.")}
    query = QUERY.model_copy(update={"cutoff": dt.date(1666, 12, 31)})
    framed = score_answer(query, answer="The entry of 22 March 1855 says: “March 22” [late-0]\n"
                          "A passage says: “308.” [undated-0]", abstained=False,
                          cited=["late-0", "undated-0"], passages=dated, latency_ms=1.0)
    assert first_quote(framed.answer) == "March 22" and framed.first_frame == "date"
    assert framed.cutoff_violations == 2  # one dated after the cutoff, one undated
    fine = score_answer(query, answer="They gave up 308 points. [early-0]", abstained=False, cited=["early-0"],
                        passages=dated, latency_ms=1.0)
    assert fine.first_frame is None and fine.cutoff_violations == 0
    totals = summarize([framed, fine])
    assert totals["first_sentence_frames"] == 1 and totals["cutoff_violations"] == 2
    assert totals["cites_relevant"] == 0.5  # of the answered: "fine" cites the gold document


def test_an_openai_compatible_models_answers_get_the_same_metrics(
        diary: pgcite.Collection, tmp_path: Path) -> None:
    """The LLM path of the answer benchmark, against the scripted local chat server: the model
    quotes the first passage it was given and cites it; the metrics score it like any answer."""

    def reply(request: Any) -> tuple[int, bytes, float]:
        user = request["messages"][1]["content"]
        first = re.search(r'<passage id="([^"]+)"[^>]*>([^<]*)</passage>', user)
        assert first is not None
        return 200, chat_completion(f"{first[2]} [{first[1]}]"), 0.0

    golden = tmp_path / "golden.jsonl"
    golden.write_text(json.dumps({
        "id": "c", "query": "Where did Pepys bury his Parmazan cheese?", "kind": "fact",
        "relevant": ["d-1666-09-04"], "answers": ["Parmazan cheese"]}) + "\n")
    with serve(reply) as server:
        generator = OpenAIChatGenerator(base_url=server.base_url, model="scripted")
        records = answer_golden(
            lambda q: diary.answer(q.text, generator=generator, filters={"cutoff": q.cutoff}),
            collection_passages(diary.view(embedder=False)), load_golden(golden))
        assert len(server.requests) == 1
    (record,) = records
    assert not record.abstained and record.cited and record.latency_ms > 0
    totals = summarize(records)
    assert totals["citation_precision"] == (1.0 if record.gold_cited else 0.0)
    assert totals["queries"] == 1 and totals["words"] == float(record.words)
