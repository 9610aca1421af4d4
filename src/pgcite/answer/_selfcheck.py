"""Self-correcting retrieval around an answer: relevance grading (Self-RAG), the corrective loop
(CRAG) and the sufficiency check.

Each judgement is one bounded chat call (:mod:`pgcite.answer._judges`); every step takes
``min(step_timeout_s, what is left of budget_s)``, and a step that fails, runs late or finds
the budget spent is skipped with its reason in the trace — the answer then goes on from what it
had, so these stages can never hang, loop (at most ``max_rewrites`` rewrites, at most one wider
retrieval) or fail a question. Grading only removes passages; rewrites only change the query
text and go through the same search, with the request's filters; the optional external-search
hook's passages are checked against the filters here. With no chat model configured, each stage
says "skipped: no LLM configured" and nothing is faked.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from pgcite.answer._context import to_passage
from pgcite.answer._judges import Grades, grade_passages, judge_sufficiency, rewrite_query
from pgcite.answer._types import Attempt, ContextPassage
from pgcite.llm import ChatModel, LLMError, call_bounded
from pgcite.retrieve._filters import Filters
from pgcite.retrieve._hits import Hit, SearchResult

T = TypeVar("T")
SearchFn = Callable[[str, int], SearchResult]  # (query text, top_k) under the request's filters


class SelfCheckOptions(BaseModel):
    """Which self-correcting steps run (all off by default: see bench/README.md for why)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    grade: bool = Field(default=False, description="drop passages the LLM grades irrelevant")
    corrective: bool = Field(default=False, description="rewrite and retrieve again when "
                             "fewer than half survive grading or similarity is low")
    sufficiency: bool = Field(default=False, description="abstain when the LLM judges the "
                              "context insufficient; retrieve wider once when unsure")
    max_rewrites: int = Field(default=2, ge=0, le=2)
    step_timeout_s: float = Field(default=8.0, gt=0, le=120)
    budget_s: float = Field(default=30.0, gt=0, le=600)

    @property
    def active(self) -> bool:
        return self.grade or self.corrective or self.sufficiency


class ExternalSearch(Protocol):
    """The hook CRAG calls when rewrites did not help (none is wired by default: this service
    answers from its own sources). Its hits are kept only if they satisfy the filters."""

    name: str

    def search(self, question: str, top_k: int) -> list[Hit]: ...


class SelfCheck:
    """One answer's self-correcting steps, sharing one deadline and one trace."""

    def __init__(self, *, chat: ChatModel | None, options: SelfCheckOptions, search: SearchFn,
                 note: Callable[[str, str], None], filters: Filters, threshold: float | None,
                 external: ExternalSearch | None = None) -> None:
        self.chat, self.options, self.search, self.note = chat, options, search, note
        self.filters, self.threshold, self.external = filters, threshold, external
        self.deadline = time.monotonic() + options.budget_s
        self.attempts: list[Attempt] = []
        self.timings: dict[str, float] = {}

    # --- bounded judgements ---------------------------------------------------------------

    def _call(self, step: str, fn: Callable[[ChatModel, float], T]) -> T | None:
        """``fn(chat, timeout)`` within the step timeout and the budget; None (noted) if not."""
        if self.chat is None:
            self.note(step, "skipped: no LLM configured")
            return None
        left = self.deadline - time.monotonic()
        if left <= 0.05:
            self.note(step, f"skipped: the {self.options.budget_s:g} s budget is spent")
            return None
        timeout = min(self.options.step_timeout_s, left)
        chat = self.chat
        started = time.perf_counter()
        try:
            return call_bounded(lambda: fn(chat, timeout), timeout, step)
        except LLMError as exc:
            self.note(step, f"fallback: {exc}")
            return None
        finally:
            ms = (time.perf_counter() - started) * 1000
            self.timings[step] = self.timings.get(step, 0.0) + ms

    def grade(self, question: str, hits: list[Hit]) -> Grades | None:
        passages = [to_passage(h) for h in hits]
        # "N: yes" lines need a few tokens each; a small model given more writes prose instead
        budget = 8 * len(passages) + 16
        return self._call("grade", lambda chat, _t: grade_passages(
            chat, question, passages, max_tokens=budget))

    # --- grading + corrective loop ----------------------------------------------------------

    def retrieve(self, question: str, result: SearchResult, top_k: int
                 ) -> tuple[SearchResult, str | None]:
        """The result to answer from, and an abstention reason when nothing relevant is left."""
        query, previous = question, list[str]()
        hits = list(result.hits)
        kept = hits
        for round_ in range(self.options.max_rewrites + 1):
            kept, graded = self._grade_round(question, query, hits)
            if not self._needs_correction(kept, hits, graded, result.confidence):
                return result.model_copy(update={"hits": kept}), None
            if round_ == self.options.max_rewrites or not self.options.corrective:
                break  # grading alone never rewrites
            rewrite = self._call("rewrite", lambda chat, _t: rewrite_query(
                chat, question, previous=previous))
            if rewrite is None:
                break
            previous.append(rewrite)
            query = rewrite
            again = self.search(rewrite, top_k)
            self.note("rewrite", f"retrieving again for {rewrite!r}")
            hits = merge_hits(kept, again.hits)
            result = again.model_copy(update={
                "confidence": _max(result.confidence, again.confidence),
                "stages": [*result.stages, *again.stages]})  # every retrieval's stages
        return self._after_correction(question, result, kept, top_k)

    def _grade_round(self, question: str, query: str, hits: list[Hit]
                     ) -> tuple[list[Hit], bool]:
        if not self.options.grade or not hits:
            self.attempts.append(Attempt(query=query, retrieved=len(hits), kept=None))
            return hits, False
        grades = self.grade(question, hits)
        if grades is None:
            self.attempts.append(Attempt(query=query, retrieved=len(hits), kept=None,
                                         note="grading failed: all passages kept"))
            return hits, False
        kept = [h for h in hits if h.id in set(grades.kept_ids)]
        dropped = grades.dropped_ids
        self.note("grade", f"{len(kept)} of {len(hits)} passages graded relevant"
                  + (f"; dropped {', '.join(dropped)}" if dropped else ""))
        self.attempts.append(Attempt(query=query, retrieved=len(hits), kept=len(kept),
                                     grades=grades.by_id))
        return kept, True

    def _needs_correction(self, kept: list[Hit], hits: list[Hit], graded: bool,
                          confidence: float | None) -> bool:
        if graded and not kept:
            return True  # even without the loop: nothing relevant is left
        if not self.options.corrective:
            return False
        few = graded and len(kept) < len(hits) / 2
        low = (self.threshold is not None and confidence is not None
               and confidence < self.threshold)
        return few or low

    def _after_correction(self, question: str, result: SearchResult, kept: list[Hit],
                          top_k: int) -> tuple[SearchResult, str | None]:
        outside = self._external(question, top_k) if self.options.corrective else []
        if outside:
            return result.model_copy(update={"hits": merge_hits(kept, outside)}), None
        if kept:
            self.note("corrective", f"answering from the {len(kept)} passage(s) graded "
                      "relevant after the rewrites")
            return result.model_copy(update={"hits": kept}), None
        rewrites = len(self.attempts) - 1
        return result, (f"no passage was graded relevant after {rewrites} rewrite(s)"
                        if self.options.grade else "retrieval stayed below the similarity "
                        f"threshold after {rewrites} rewrite(s)")

    def _external(self, question: str, top_k: int) -> list[Hit]:
        if self.external is None:
            return []
        try:
            found = self.external.search(question, top_k)
        except Exception as exc:  # a third-party hook: whatever it raises, answer without it
            self.note("external", f"fallback: {self.external.name} failed ({exc!r})")
            return []
        allowed = [h for h in found if within_filters(h, self.filters)]
        self.note("external", f"{self.external.name}: {len(allowed)} of {len(found)} passages "
                  "within the filters")
        return allowed

    # --- sufficiency ------------------------------------------------------------------------

    def sufficiency(self, question: str, passages: Sequence[ContextPassage]) -> str | None:
        """"sufficient", "insufficient", "unsure", or None when the judgement was skipped."""
        verdict = self._call("sufficiency", lambda chat, _t: judge_sufficiency(
            chat, question, passages))
        if verdict is None:
            return None
        self.note("sufficiency", verdict.verdict + ("" if verdict.parsed else
                                                    " (unparseable reply)"))
        return verdict.verdict


def within_filters(hit: Hit, filters: Filters) -> bool:
    """Whether ``hit`` satisfies the request's filters (for passages that did not come from
    SQL). Metadata predicates cannot be checked here, so they exclude every such passage."""
    day: dt.date | None = hit.date_end or hit.date_start
    if filters.cutoff is not None and (day is None or day > filters.cutoff):
        return False
    if filters.corpora and hit.corpus not in filters.corpora:
        return False
    if filters.authors and hit.author not in filters.authors:
        return False
    if filters.sources and hit.source not in filters.sources:
        return False
    return not filters.metadata


def merge_hits(first: Sequence[Hit], second: Sequence[Hit]) -> list[Hit]:
    """``first``, then the hits of ``second`` it does not hold already (by passage id)."""
    seen = {h.id for h in first}
    return [*first, *(h for h in second if h.id not in seen)]


def _max(a: float | None, b: float | None) -> float | None:
    values = [v for v in (a, b) if v is not None]
    return max(values) if values else None
