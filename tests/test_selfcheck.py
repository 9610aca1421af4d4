"""Self-correcting answers: grading, the corrective loop, sufficiency — bounded, never faked,
never outside the filters."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

import pytest

import pgcite
from pgcite.answer._selfcheck import within_filters
from pgcite.llm import LLMError, OpenAIChat
from pgcite.retrieve import Filters, Hit
from tests.llm_server import chat_completion, serve

Script = Callable[[str, str], str]


class ScriptedChat:
    """Answers each judgement by its kind (grade / sufficiency / rewrite), as scripted."""

    name = "scripted"
    timeout_s = None

    def __init__(self, grade: Script | str = "", sufficiency: str = "SUFFICIENT",
                 rewrite: Script | str = "", fail: Exception | None = None) -> None:
        self.replies = {"grade": grade, "sufficiency": sufficiency, "rewrite": rewrite}
        self.fail = fail
        self.calls: list[str] = []

    def chat(self, system: str, user: str, *, max_tokens: int = 256) -> str:
        kind = ("grade" if "relevant" in system.split("\n")[0] else
                "sufficiency" if "enough information" in system else "rewrite")
        self.calls.append(kind)
        if self.fail:
            raise self.fail
        reply = self.replies[kind]
        return reply(system, user) if callable(reply) else reply


def _grade_by_word(word: str) -> Script:
    """Grade a passage relevant iff it contains ``word`` (passages are numbered [N] …)."""
    def grade(system: str, user: str) -> str:
        blocks = [b.split("</passage>")[0] for b in user.split("<passage")[1:]]
        return "\n".join(f"{i}: {'yes' if word in b.lower() else 'no'}"
                         for i, b in enumerate(blocks, start=1))
    return grade


def _kinds(answer: pgcite.Answer) -> list[str]:
    return [e.step for e in answer.trace]


def test_without_an_llm_every_check_is_skipped_not_faked(diary: pgcite.Collection) -> None:
    answer = diary.answer("Where did the great fire begin?", options={"self_check": {"grade": True, "corrective": True, "sufficiency": True}})
    skipped = [e.detail for e in answer.trace if e.step in ("grade", "sufficiency")]
    assert skipped and all(d == "skipped: no LLM configured" for d in skipped)
    assert not answer.abstained and answer.citations


def test_grading_drops_passages_graded_irrelevant(diary: pgcite.Collection) -> None:
    chat = ScriptedChat(grade=_grade_by_word("fire"))
    answer = diary.answer("Where did the great fire begin?", judge=chat, options={"self_check": {"grade": True}})
    assert not answer.abstained
    assert answer.sources and all("fire" in s.excerpt.lower() for s in answer.sources)
    assert answer.attempts[0].kept == len(answer.sources) < answer.attempts[0].retrieved
    assert any(e.step == "grade" and "graded relevant" in e.detail for e in answer.trace)


def test_all_irrelevant_abstains(diary: pgcite.Collection) -> None:
    chat = ScriptedChat(grade=_grade_by_word("xyzzy"), rewrite="fire")
    answer = diary.answer("Where did the great fire begin?", judge=chat, options={"self_check": {"grade": True}})
    assert answer.abstained and "no passage was graded relevant" in answer.trace[-1].detail
    assert chat.calls == ["grade"]  # grading alone never rewrites


def test_corrective_loop_rewrites_at_most_twice(diary: pgcite.Collection) -> None:
    rewrites = iter(["potatoes in the garden", "potato supper", "never used"])
    chat = ScriptedChat(grade=_grade_by_word("xyzzy"), rewrite=lambda s, u: next(rewrites))
    answer = diary.answer("What did Pepys think of potatoes?", judge=chat, options={"self_check": {"grade": True, "corrective": True}})
    assert answer.abstained
    assert [a.query for a in answer.attempts] == [
        "What did Pepys think of potatoes?", "potatoes in the garden", "potato supper"]
    assert chat.calls.count("rewrite") == 2 and "after 2 rewrite(s)" in answer.trace[-1].detail


def test_corrective_rewrite_recovers(diary: pgcite.Collection) -> None:
    chat = ScriptedChat(grade=_grade_by_word("cheese"), rewrite="Parmazan cheese buried")
    answer = diary.answer("What did he hide from the blaze?", top_k=2, judge=chat, options={"self_check": {"grade": True, "corrective": True}})
    assert len(answer.attempts) >= 2 and answer.attempts[1].query == "Parmazan cheese buried"
    assert not answer.abstained and any("cheese" in s.excerpt for s in answer.sources)


def test_sufficiency_insufficient_abstains_unsure_widens(diary: pgcite.Collection) -> None:
    no = diary.answer("Where did the great fire begin?", top_k=2,
                      judge=ScriptedChat(sufficiency="INSUFFICIENT"), options={"self_check": {"sufficiency": True}})
    assert no.abstained and "insufficient" in no.trace[-1].detail
    unsure = diary.answer("Where did the great fire begin?", top_k=2,
                          judge=ScriptedChat(sufficiency="hmm, maybe?"), options={"self_check": {"sufficiency": True}})
    assert not unsure.abstained
    assert any("retrieved wider once, 4 passages" in e.detail for e in unsure.trace)


@pytest.mark.parametrize(("delay", "body", "named"), [
    (30.0, chat_completion("1: yes"), "no answer within"),
    (0.0, b"\x00garbage{{", "not JSON"),
    (0.0, b"{}", "unexpected response shape"),
])
def test_misbehaving_endpoint_stays_within_budget(diary: pgcite.Collection, delay: float,
                                                  body: bytes, named: str) -> None:
    started = time.monotonic()
    diary.answer("Where did the great fire begin?")  # the same search and answer, on this load
    plain = time.monotonic() - started
    with serve(lambda request: (200, body, delay)) as server:
        chat = OpenAIChat(base_url=server.base_url, model="m", timeout_s=60)
        started = time.monotonic()
        answer = diary.answer("Where did the great fire begin?", judge=chat, options={"self_check": {
            "grade": True, "corrective": True, "sufficiency": True,
            "step_timeout_s": 0.4, "budget_s": 1.0}})
        elapsed = time.monotonic() - started
    # the 1 s budget + the plain search and answer (three times over, for a noisy machine);
    # a budget that did not hold would wait for the 30 s delay or the 60 s client timeout
    assert elapsed < 1.0 + 3 * plain + 1.0, (elapsed, plain)
    fallbacks = [e.detail for e in answer.trace if e.detail.startswith("fallback")]
    assert fallbacks and named in fallbacks[0]
    assert not answer.abstained and answer.citations  # plain retrieval still answers


def test_budget_spent_skips_the_remaining_steps(diary: pgcite.Collection) -> None:
    chat = ScriptedChat(grade=lambda s, u: (time.sleep(0.3), "1: yes")[1])
    answer = diary.answer("Where did the great fire begin?", judge=chat, options={"self_check": {
        "grade": True, "sufficiency": True, "budget_s": 0.2}})
    assert any("budget is spent" in e.detail for e in answer.trace)


@pytest.mark.parametrize("cutoff", ["1661-12-31", "1665-12-31"])
def test_rewrites_never_leave_the_filters(diary: pgcite.Collection, cutoff: str) -> None:
    rewrites = iter(["Macbeth theatre 1668", "cheese 1666 Elizabeth corpus B", "x"])
    def first_only(system: str, user: str) -> str:  # too few relevant: the loop goes on
        count = user.count("<passage ")
        return "\n".join(f"{i}: {'yes' if i == 1 else 'no'}" for i in range(1, count + 1))

    chat = ScriptedChat(grade=first_only, rewrite=lambda s, u: next(rewrites))
    answer = diary.answer("What did they see?", top_k=5,
                          judge=chat, filters={"cutoff": cutoff, "corpora": ["A"]}, options={"self_check": {"grade": True, "corrective": True}, "threshold": 0.0})
    assert len(answer.attempts) == 3 and answer.sources
    for source in answer.sources:
        assert source.corpus == "A" and source.date is not None and source.date <= cutoff

    class Outside:
        name = "outside"

        def search(self, question: str, top_k: int) -> list[Hit]:
            return [_hit("late", dt.date(1668, 1, 1), "A"), _hit("other", dt.date(1660, 1, 1),
                                                                  "B"),
                    _hit("ok", dt.date(1660, 1, 1), "A")]

    with_hook = diary.answer("What did they see?", top_k=5,
                             judge=ScriptedChat(grade=_grade_by_word("xyzzy"), rewrite="q2"),
                             external=Outside(), filters={"cutoff": cutoff, "corpora": ["A"]}, options={"self_check": {"grade": True, "corrective": True, "max_rewrites": 0}, "threshold": 0.0})
    assert [s.id for s in with_hook.sources] == ["ok"]
    assert any("1 of 3 passages within the filters" in e.detail for e in with_hook.trace)


def _hit(i: str, day: dt.date | None, corpus: str) -> Hit:
    return Hit(id=i, document_id=i, citation=i, author=None, corpus=corpus, date_start=day,
               date_end=day, source=None, locator=None, title=None, body=f"passage {i}",
               score=1.0, rank=1)


def test_within_filters() -> None:
    f = Filters(cutoff=dt.date(1666, 1, 1), corpora=["A"])
    assert within_filters(_hit("a", dt.date(1665, 1, 1), "A"), f)
    assert not within_filters(_hit("b", dt.date(1667, 1, 1), "A"), f)
    assert not within_filters(_hit("c", None, "A"), f)
    assert not within_filters(_hit("d", dt.date(1665, 1, 1), "B"), f)


def test_judge_failure_is_a_fallback_not_an_error(diary: pgcite.Collection) -> None:
    answer = diary.answer("Where did the great fire begin?", judge=ScriptedChat(fail=LLMError("down")), options={"self_check": {"grade": True, "sufficiency": True}})
    assert not answer.abstained
    assert [e.detail for e in answer.trace if e.step == "grade"] == ["fallback: down"]


def test_every_retrieval_of_an_answer_keeps_its_stage_events(diary: pgcite.Collection) -> None:
    chat = ScriptedChat(grade=_grade_by_word("cheese"), rewrite="Parmazan cheese buried",
                        sufficiency="hmm")
    answer = diary.answer("What did he hide from the blaze?", top_k=2, judge=chat, options={"self_check": {"grade": True, "corrective": True, "sufficiency": True}})
    routes = [e for e in answer.stages if e.stage == "route"]
    # the question, the rewrite, and the wider retrieval after "unsure": one route each
    assert len(routes) == 3 and len(answer.attempts) == 2
