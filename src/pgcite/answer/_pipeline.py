"""retrieve → fit the context to a token budget → generate → check.

Abstention happens before any model is called when retrieval finds nothing, or when the
collection's fitted answerability score (:mod:`pgcite.retrieve._answerability`) is below its cut,
or, without a fitted score, when the best cosine similarity (``SearchResult.confidence``) is
below the threshold. After generation the
guard (:mod:`pgcite.answer._guard`) drops citations of passages the generator was not given,
abstains if no valid citation is left, and swaps in the fallback text when the persona speaks
another author's words in the first person. Every such decision is written to ``Answer.trace``.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pgcite._errors import ConfigError
from pgcite._types import Mode
from pgcite.answer._context import DEFAULT_TOKEN_BUDGET, approx_tokens, fit_context
from pgcite.answer._facts import Evidence, Facts, entity_facts
from pgcite.answer._guard import check_attribution, check_citations, cited_ids
from pgcite.answer._precise import PreciseGenerator
from pgcite.answer._search import AnswerSettings, EntityEvidenceFn, NeighboursFn, SearchFn
from pgcite.answer._selfcheck import ExternalSearch, SelfCheck, SelfCheckOptions, merge_hits
from pgcite.answer._types import (
    Answer,
    Attempt,
    ContextPassage,
    GenerationRequest,
    Generator,
    GeneratorError,
    Source,
    TraceEvent,
)
from pgcite.embed._base import Embedder
from pgcite.llm import ChatModel
from pgcite.retrieve._answerability import (
    AnswerabilityModel,
    answerability_verdict,
    read_wording,
    shipped_default,
)
from pgcite.retrieve._filters import Filters, merge_filters
from pgcite.retrieve._hits import Hit, SearchResult
from pgcite.retrieve._query_text import parse_query
from pgcite.retrieve._when import UPPER_BOUND, YEAR, asked_periods

# Abstain below this best cosine similarity, per embedding model. Measured on the Pepys golden
# set (docs/answers.md, "Choosing the threshold"); a model without a measured value never
# abstains on similarity (only when nothing is retrieved) until a threshold is passed.
DEFAULT_THRESHOLDS: dict[str, float] = {"all-MiniLM-L6-v2": 0.30}
PERSONA_ABSTENTION = "I did not write about that."
PLAIN_ABSTENTION = "The sources do not answer this."
EXCERPT_CHARS = 400
# How far before the earliest retrieved passage a year must be for the year rule to call the
# question absent (when no passage names it): sources recall their recent past (a diary of the
# 1660s remembers the King's execution in 1649 without writing the year), so only a generation
# earlier counts. A diary's questions about its own years stay clear of it, whichever entries
# retrieval ranked first.
EARLY_YEARS = 20
# How many passages before and after each retrieved passage, in its document, the answerer is
# also given (docs/answers.md, "Neighbouring passages"): the one place for this default. 1 since
# a neighbour is ranked as the passage it stands beside (bench/answers.py --unseen, both ways in
# one run): the Pepys golden + extra set, where it was chosen, cites a relevant entry more often
# (fact 0.80 -> 0.87, paraphrase 0.29 -> 0.36), the held-out Pepys questions and XQuAD as often
# (XQuAD's answers unchanged), SciFact as often (citation precision 0.573 -> 0.572: docs/answers.md).
DEFAULT_NEIGHBOURS = 1


class AnswerOptions(BaseModel):
    """Knobs of one answer; ``None`` means "the documented default"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    top_k: int = Field(default=5, ge=1, le=1000)
    mode: Mode = "hybrid"
    token_budget: int = Field(default=DEFAULT_TOKEN_BUDGET, ge=50, le=1_000_000)
    threshold: float | None = None
    persona: str | None = None  # overrides the collection's persona_author
    # abstain when every year asked about is after the sources, or the question asks about the
    # death of the sources' one author (asks_outside_sources, asks_own_death)
    temporal_check: bool = True
    abstention_text: str | None = None
    attribution_fallback: str | None = None
    stages: dict[str, Any] | None = Field(
        default=None, description="retrieval stage overrides, e.g. {'route': True}")
    snapshot_id: int | None = Field(default=None, description="retrieve from this snapshot "
                                    "(default: the active one)")
    self_check: SelfCheckOptions = Field(default_factory=SelfCheckOptions)
    entity_facts: bool = Field(default=True, description="state the entity graph's facts for "
                               "who/where/how-often questions (docs/answers.md)")
    neighbours: int = Field(default=DEFAULT_NEIGHBOURS, ge=0, le=5, description=(
        "give the answerer, after each retrieved passage, this many passages before and after "
        "it in its document (within the same filters); 0: the retrieved passages only"))


def default_threshold(embedding_model: str) -> float | None:
    """The documented threshold for ``id@version`` (None: no measured value for this model)."""
    return DEFAULT_THRESHOLDS.get(embedding_model.rsplit("@", 1)[0])


class _Policy:
    """The texts and threshold in force for one answer."""

    def __init__(self, settings: AnswerSettings, options: AnswerOptions, result: SearchResult):
        self.persona = options.persona or settings.persona_author
        self.abstention = options.abstention_text or (
            PERSONA_ABSTENTION if self.persona else PLAIN_ABSTENTION)
        self.fallback = options.attribution_fallback or self.abstention
        for text in (self.abstention, self.fallback):
            if "[" in text or "]" in text:
                raise ConfigError("abstention and fallback texts must not contain [ or ]",
                                  hint="square brackets are reserved for citations")
        self.threshold = (options.threshold if options.threshold is not None
                          else default_threshold(result.embedding_model))
        # Who decides: a threshold the caller passes; else the collection's fitted model for
        # this embedding model; else the model that ships with pgcite (the cosine threshold
        # only where neither can score the retrieval: another mode than hybrid).
        fitted = settings.abstention.get(result.embedding_model)
        self.answerability: AnswerabilityModel | None = None
        self.decider = "threshold"
        if options.threshold is None and fitted is not None:
            self.answerability, self.decider = AnswerabilityModel.model_validate(fitted), "fitted"
        elif options.threshold is None:
            self.answerability = shipped_default().for_key(result.embedding_model,
                                                           settings.language)
            self.decider = "default" if self.answerability is not None else "threshold"

    def reported_threshold(self, result: SearchResult) -> float | None:
        """The best-cosine threshold that decided, for ``Answer.threshold``: None when the
        fitted answerability model scored this retrieval (its cut is a probability, not a
        cosine; the trace says what it decided)."""
        if self.answerability is not None and self.answerability.probability(result) is not None:
            return None
        return self.threshold


class _Run:
    """One answer being built: the trace and timings accumulate here."""

    def __init__(self, question: str, result: SearchResult, policy: _Policy,
                 default: Generator) -> None:
        self.question, self.result, self.policy = question, result, policy
        self.default = default  # the model-free answerer: answers when a model fails
        self.trace: list[TraceEvent] = []
        self.timings: dict[str, float] = {}
        self.attempts: list[Attempt] = []
        self.evidence: Evidence | None = None  # the entity graph, for entity questions
        # the passages beside given ones, under the answer's filters (None: no neighbours)
        self.neighbours: Callable[[list[str]], Mapping[str, list[Hit]]] | None = None

    def note(self, step: str, detail: str) -> None:
        self.trace.append(TraceEvent(step=step, detail=detail))

    def finish(self, text: str, *, abstained: bool, sources: list[Source], cited: list[str],
               generator: str) -> Answer:
        return Answer(
            question=self.question, answer=text, abstained=abstained,
            snapshot_id=self.result.snapshot_id, embedding_model=self.result.embedding_model,
            sources=sources, citations=cited, generator=generator,
            confidence=self.result.confidence,
            threshold=self.policy.reported_threshold(self.result),
            trace=self.trace, attempts=self.attempts, stages=self.result.stages,
            timings_ms=self.timings,
        )

    def abstain(self, reason: str, *, sources: list[Source] | None = None,
                generator: str = "none", text: str | None = None) -> Answer:
        self.note("abstain", reason)
        return self.finish(text or self.policy.abstention, abstained=True, sources=sources or [],
                           cited=[], generator=generator)


def answer_question(
    search_fn: SearchFn,
    question: str,
    *,
    settings: AnswerSettings | None = None,
    embedder: Embedder | None = None,
    options: AnswerOptions | None = None,
    filters: Filters | dict[str, Any] | None = None,
    cutoff: dt.date | str | None = None,
    corpora: Sequence[str] | None = None,
    generator: Generator | None = None,
    judge: ChatModel | None = None,
    external: ExternalSearch | None = None,
    wrap_generator: Callable[[Generator], Generator] | None = None,
    entity_evidence: EntityEvidenceFn | None = None,
    neighbours: NeighboursFn | None = None,
) -> Answer:
    """Answer ``question`` from what ``search_fn`` retrieves, with checked citations (see the
    module doc). ``search_fn`` is bound to one snapshot, so every retrieval of this answer (the
    self-check's rewrites included) reads the same data.

    ``embedder`` is the snapshot's query model: the default generator scores sentences with it.
    ``judge`` is the chat model of the self-checks (without one they say they were skipped);
    ``external`` is the corrective loop's optional outside-search hook (none by default).
    ``wrap_generator`` wraps the generator that will write (given or default), e.g. to stream
    its text as it is written (:mod:`pgcite._streaming`); the check still reads the whole text.
    ``entity_evidence``: the entity graph over the same snapshot, for the facts an entity
    question's answer states (:mod:`pgcite.answer._facts`; off with ``entity_facts=False``).
    ``neighbours``: the passages beside a retrieved one in its document, over the same snapshot
    and filters, given to the answerer after it (``AnswerOptions.neighbours`` either side;
    without this function, or at 0, the answerer sees the retrieved passages only).
    """
    options = options or AnswerOptions()
    settings = settings or AnswerSettings()
    started = time.perf_counter()
    merged = merge_filters(filters, cutoff, corpora, None)

    def search(text: str, top_k: int) -> SearchResult:
        return search_fn(text, top_k=top_k, mode=options.mode, filters=merged,
                         stages=options.stages)

    result = search(question, options.top_k)
    default = PreciseGenerator(embedder=embedder, language=settings.language)
    run = _Run(question, result, _Policy(settings, options, result), default)
    run.timings.update({k: v for k, v in result.timings_ms.items() if k != "total"})
    if entity_evidence is not None and options.entity_facts:
        run.evidence = lambda prefer: entity_evidence(question, filters=merged, prefer=prefer)
    if neighbours is not None and options.neighbours > 0:
        run.neighbours = lambda ids: neighbours(ids, filters=merged, n=options.neighbours)
    check = None
    if options.self_check.active:
        check = SelfCheck(
            chat=judge, options=options.self_check, search=search,
            note=run.note, filters=merged, threshold=run.policy.threshold, external=external)
        run.result, reason = check.retrieve(question, result, options.top_k)
        run.attempts = check.attempts
    model = run.policy.answerability
    if model is not None and model.mode == options.mode:  # the question as passages write it
        run.result, wording = read_wording(question, run.result, lambda text: search_fn(
            text, top_k=options.top_k, mode="keyword", filters=merged, stages=options.stages))
        if changed := wording.describe():
            run.note("answerability", f"signals read {changed}")
    run.timings["retrieve"] = _ms(started)  # embed + database + finding the snapshot (+ loop)
    if check is not None and reason is not None:
        answer = run.abstain(reason)
    else:
        chosen = generator or default
        if wrap_generator is not None:
            chosen = wrap_generator(chosen)
        answer = _answer(run, options, chosen, check, search)
    if check is not None:
        answer.timings_ms.update(check.timings)
    answer.timings_ms["total"] = _ms(started)
    return answer


def _answer(run: _Run, options: AnswerOptions, generator: Generator,
            check: SelfCheck | None = None,
            search: Callable[[str, int], SearchResult] | None = None) -> Answer:
    result, policy = run.result, run.policy
    reason = abstention_reason(run.question, result, policy, options, run.note)
    if reason is not None:
        return run.abstain(reason)
    hits = _with_neighbours(run, result.hits)
    passages, dropped = fit_context(hits, options.token_budget)
    if not passages:
        return run.abstain(f"no passage fits the token budget of {options.token_budget}")
    if check is not None and options.self_check.sufficiency:
        verdict = check.sufficiency(run.question, passages)
        if verdict == "insufficient":
            return run.abstain("the model judged the passages insufficient to answer")
        if verdict == "unsure" and search is not None:  # retrieve wider, once
            wider = search(run.question, options.top_k * 2)
            merged = merge_hits(result.hits, wider.hits)
            run.note("sufficiency", f"unsure: retrieved wider once, {len(merged)} passages")
            run.result = result = result.model_copy(update={
                "hits": merged, "stages": [*result.stages, *wider.stages]})
            hits = _with_neighbours(run, merged)
            passages, dropped = fit_context(hits, options.token_budget)
    used = sum(approx_tokens(p.text) for p in passages)
    run.note("context", f"{len(passages)} passages, ~{used} tokens of {options.token_budget}"
             + (f"; over budget, left out: {', '.join(dropped)}" if dropped else ""))
    text, name = _generate(run, generator, GenerationRequest(
        question=run.question, passages=passages, persona=policy.persona,
        abstention_text=policy.abstention))
    facts = _facts(run, text, passages)
    started = time.perf_counter()
    answer = _check(run, facts.text + " " + text if facts.text else text, name,
                    [*passages, *facts.passages], [*hits, *facts.hits])
    answer.entities = [] if answer.abstained else facts.entities
    answer.timings_ms["check"] = _ms(started)  # the Answer holds a copy of run.timings
    return answer


def _with_neighbours(run: _Run, hits: list[Hit]) -> list[Hit]:
    """Each retrieved passage followed by the passages beside it in its document that are not
    in the list already, each neighbour ranked as the passage it stands beside: context the
    answerer may quote and cite. Ranked by their new position instead, the neighbours pushed
    the 2nd to 5th retrieved passages down (2 -> 3 or 4 …), and the answerer's rank signal then
    weighed their sentences less: SciFact's answers changed citations where no neighbour was
    quoted (docs/answers.md). They come from the answer's snapshot under its filters
    (``run.neighbours``), so a neighbour after the cutoff or outside the corpora is never given,
    so never cited. Called after the abstention decision: they change what is quoted, never
    whether to answer."""
    if run.neighbours is None or not hits:
        return hits
    started = time.perf_counter()
    beside = run.neighbours([h.id for h in hits])
    seen = {h.id for h in hits}
    out: list[Hit] = []
    for hit in hits:
        out.append(hit)
        for neighbour in beside.get(hit.id, []):
            if neighbour.id not in seen:
                seen.add(neighbour.id)
                out.append(neighbour.model_copy(update={"rank": hit.rank}))
    run.timings["neighbours"] = _ms(started)
    run.note("neighbours", f"{len(out) - len(hits)} passage(s) beside the {len(hits)} "
             "retrieved added as context")
    return out


def _facts(run: _Run, text: str, passages: list[ContextPassage]) -> Facts:
    """The entity graph's facts for an entity question, stated before the generated text
    (none when the generator abstained: the facts do not overrule it)."""
    if run.evidence is None or text.strip() == run.policy.abstention:
        return Facts()
    started = time.perf_counter()
    facts = entity_facts(run.evidence([*cited_ids(text), *(p.id for p in passages)]), passages,
                         run.question)
    run.timings["entities"] = _ms(started)
    if facts.entities:
        run.note("entities", f"{len(facts.entities)} graph fact(s) about "
                 f"{facts.entities[0].anchor}, {len(facts.hits)} passage(s) added to sources")
    return facts


def abstention_reason(question: str, result: SearchResult, policy: _Policy,
                      options: AnswerOptions, note: Callable[[str, str], None]) -> str | None:
    """Why to abstain before any model is called (None: answer). The one place that decides
    whether the retrieved passages can answer the question: the fitted answerability score
    where the collection has one for this embedding model, else the best-cosine threshold
    (a quoted phrase the passages must contain overrules either), then the temporal check.
    An answer's score or cosine goes to ``note`` (the trace), as an abstention's reason does."""
    if not result.hits:
        return "retrieval found no passage (the filters may exclude everything)"
    answer, why = answerability_verdict(result, policy.answerability, policy.threshold,
                                        policy.decider)
    if not answer and not _has_phrase(question):
        return f"{why}; no model was called"
    if why is not None:
        note("answerability", why + ("" if answer else "; a quoted phrase overrules it"))
    late = (asks_outside_sources(question, result.hits, policy.persona)
            if options.temporal_check else None)
    if late:
        return late + "; no model was called"
    return None


def _has_phrase(question: str) -> bool:
    """A "quoted phrase" is a hard constraint of the search: every hit contains it, which is
    stronger evidence than any similarity, so the threshold does not apply."""
    return '"' in (parse_query(question).constraint or "")


def asks_outside_sources(question: str, hits: list[Hit], persona: str | None = None
                         ) -> str | None:
    """Sources cannot report what happened after they were written: the year rule
    (:func:`_outside_years`) and the writer's own death (:func:`asks_own_death`). Why the
    question is absent, or None."""
    return _outside_years(question, hits) or asks_own_death(question, hits, persona)


def _outside_years(question: str, hits: list[Hit]) -> str | None:
    """If every year or month of a year the question names ("in 1690", "in November 1669")
    begins after the latest retrieved passage, say so (None otherwise). Years that bound the
    question from above ("before 1664") do not count. Undated passages could be from any time,
    so they switch the rule off.

    The other side: a question about a time long BEFORE the sources ("Which steam railways
    were running in England in 1600?" put to letters of the 1850s) is absent when no retrieved
    passage names the year either. Sources do recall their past, so it needs both: every year
    asked about at least ``EARLY_YEARS`` before the earliest retrieved passage, and none of
    those years written in a retrieved passage."""
    # a year that bounds the question from above ("before 1664", "up to June 1664") asks about
    # the time before it, which sources that end earlier do cover: only the other years count
    years = [int(y) for y in YEAR.findall(UPPER_BOUND.sub(" ", question))]
    starts = [h.date_start or h.date_end for h in hits]
    ends = [h.date_end or h.date_start for h in hits]
    if not years or not ends or any(d is None for d in ends):
        return None
    late = _after(asked_periods(question), max(d for d in ends if d is not None))
    if late:
        return late
    earliest = min(d.year for d in starts if d is not None)
    if max(years) <= earliest - EARLY_YEARS and not any(
            str(y) in f"{h.title or ''} {h.body}" for y in years for h in hits):
        return (f"the question asks about {max(years)}, but every retrieved passage is dated "
                f"{earliest} or later and none names the year")
    return None


# How a question asks about someone's death: {who} stands for them, {whose} for their
# possessive and {they} for the pronoun that takes them up ("When did Pepys die?", "Pepys's
# funeral", "the death of Samuel Pepys", "How old was Pepys when he died?"; the persona asked
# "How did you die?", "your funeral", "How old were you when you died?").
_DEATH_TEXT = (
    r"{whose}\s+(?:own\s+)?(?:death|funeral|burial|last\s+illness)\b",
    r"\b(?:did|does|do|will|would)\s+{who}\s+die\b",  # not "did he nearly die": he lived
    r"{who}\s+(?:died|dies|was\s+buried|is\s+buried|were\s+buried|are\s+buried"
    r"|passed\s+away)\b",
    r"\b(?:was|is|were|are)\s+{who}\s+buried\b",
    r"\b(?:death|funeral|burial)\s+of\s+{who}\b",
    r"{who}\b[^.?!]{{0,40}}\bwhen\s+{they}\s+died\b",
)


def _death_pattern(who: str, whose: str, they: str) -> str:
    return "|".join(p.format(who=who, whose=whose, they=they) for p in _DEATH_TEXT)


def asks_own_death(question: str, hits: list[Hit], persona: str | None = None) -> str | None:
    """Nothing a writer wrote can report the writer's own death: a question about the death,
    funeral or burial of the author of every retrieved passage ("When and where did Samuel
    Pepys die?" put to his diary; "How did you die?" to the persona) is absent (None: it is
    not, or the passages are not all one author's: a sister's letters may tell of it)."""
    authors = {(h.author or "").strip() for h in hits}
    if len(authors) != 1 or "" in authors:
        return None  # no author, or several: nobody's own death to rule out
    author = authors.pop()
    names = [re.escape(author), *(re.escape(w) for w in author.split() if len(w) > 2),
             r"the\s+(?:diarist|author|writer)"]
    who = r"\b(?:" + "|".join(names) + r")\b"
    patterns = [_death_pattern(who, who + r"['’]s", r"(?:he|she|they)")]
    if persona is not None and persona.casefold() == author.casefold():
        # the visitor asks the persona in the second person (not "the death of your father")
        patterns.append(_death_pattern(r"\byou\b", r"\byour", r"you"))
    if re.search("|".join(patterns), question, re.IGNORECASE) is None:
        return None
    return (f"the question asks about the death of {author}, which nothing {author} wrote "
            "can report")


def _after(periods: list[tuple[dt.date, dt.date]], latest: dt.date) -> str | None:
    """Why every period asked about begins after ``latest`` (None: one does not). A month is
    read as a month: "his wife's death in November 1669" put to a diary whose retrieved
    entries end in June 1669 asks about what the diary cannot have seen, although its year
    does not come after the entries'."""
    if not periods or min(since for since, _ in periods) <= latest:
        return None
    since, to = min(periods)
    if since.month == 1 and (to.month, to.day) == (12, 31):
        return (f"the question asks about {since.year}, but every retrieved passage is dated "
                f"{latest.year} or earlier")
    return (f"the question asks about {since:%B %Y}, but every retrieved passage is dated "
            f"{latest:%B %Y} or earlier")


def _generate(run: _Run, generator: Generator, request: GenerationRequest) -> tuple[str, str]:
    """The generator's text, or the extractive one if it fails (recorded in the trace)."""
    started = time.perf_counter()
    try:
        text = generator.generate(request)
        name = generator.name
    except GeneratorError as exc:
        run.note("fallback", f"{generator.name} failed ({exc}); answered extractively")
        text, name = run.default.generate(request), run.default.name
    run.timings["generate"] = _ms(started)
    return text, name


def _check(run: _Run, text: str, generator: str, passages: list[ContextPassage],
           hits: list[Hit]) -> Answer:
    given = {p.id: p for p in passages}
    sources = [_source(h, given[h.id]) for h in hits if h.id in given]
    checked = check_citations(text, set(given))
    if checked.removed:
        run.note("citations", "removed citations of passages not given: "
                 + ", ".join(sorted(set(checked.removed))))
    if not checked.cited:
        reason = ("the generator abstained" if checked.text == run.policy.abstention
                  else "the generated text cites no given passage")
        return run.abstain(reason, sources=sources, generator=generator)
    authors = {p.id: p.author for p in passages}
    violations = check_attribution(checked.text, authors, run.policy.persona)
    if violations:
        first = violations[0]
        run.note("attribution", f"{len(violations)} first-person sentence(s) use another "
                 f"author's passage without attribution, e.g. {first.passage_ids[0]} by "
                 f"{first.authors[0]}: {first.sentence[:120]!r}")
        return run.abstain("answer replaced by the attribution fallback", sources=sources,
                           generator=generator, text=run.policy.fallback)
    return run.finish(checked.text, abstained=False, sources=sources, cited=checked.cited,
                      generator=generator)


def _source(hit: Hit, passage: ContextPassage) -> Source:
    flat = " ".join(passage.text.split())
    excerpt = flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1] + "…"
    return Source(
        id=hit.id, citation=hit.citation, source=hit.source, locator=hit.locator,
        distance=hit.vector_distance, score=hit.score, excerpt=excerpt, author=hit.author,
        corpus=hit.corpus, date=hit.date_start.isoformat() if hit.date_start else None,
    )


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
