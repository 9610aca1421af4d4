"""Fitting the answerability score on judged queries, with cross-validated figures only.

Each judged query is searched the way an answer searches (hybrid, the collection's stages and
the query's cutoff), and its signals (:mod:`pgcite.retrieve._answerability`) are kept. A query
is *answerable* when the set names relevant documents for it and *absent* when its kind is
``absent``; others are left out. The figures are leave-one-out: each query is decided by a rule
fitted on all the others, so no figure is measured on the query it was fitted on. For each
single signal the rule is a threshold calibrated the way today's cosine threshold is
(:func:`pgcite.evaluate._abstain.calibrate_threshold`); for the combination, the logistic model.
An answer also abstains when every year the question names is later than every retrieved
passage (the year rule, :func:`pgcite.answer._pipeline.asks_outside_sources`), so the figure
of what answers do is the combined score plus that rule. The stored model is then fitted on
every query.

Rates come with 95% intervals: Wilson for the two rates, a stratified bootstrap (seeded) for
balanced accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np
import psycopg
from pydantic import Field

from pgcite._types import Mode
from pgcite.answer._pipeline import asks_outside_sources
from pgcite.evaluate._abstain import calibrate_threshold
from pgcite.evaluate._base import Frozen
from pgcite.evaluate._golden import GoldenSet
from pgcite.retrieve._answerability import (
    DEFAULT_L2,
    FEATURES,
    SIGNALS,
    fit_model,
    orientation,
    read_wording,
    shipped_default,
    signal_values,
    store_model,
)
from pgcite.retrieve._filters import Filters
from pgcite.retrieve._hits import SearchResult
from pgcite.store._collections import CollectionInfo
from pgcite.store._snapshots import SnapshotInfo

# The answer's default top_k; the signals only need top_k >= 2 (docs/answers.md).
TOP_K = 5
MODE: Mode = "hybrid"


class _Connects(Protocol):
    def connection(self) -> AbstractContextManager[psycopg.Connection]: ...


class JudgedCollection(Protocol):
    """What a fit needs of a collection (:class:`pgcite.Collection` is one): the API layer sits
    above evaluation, so evaluation names what it uses instead of importing it."""

    @property
    def name(self) -> str: ...
    @property
    def info(self) -> CollectionInfo: ...
    @property
    def client(self) -> _Connects: ...
    def active_snapshot(self) -> SnapshotInfo: ...
    def search(self, query: str, *, top_k: int | None = None, mode: Mode | None = None,
               filters: Filters | Mapping[str, Any] | None = None) -> SearchResult: ...
BOOTSTRAP = 2000


class Observation(Frozen):
    """One judged query's retrieval signals."""

    id: str
    kind: str
    answerable: bool
    has_hits: bool
    signals: dict[str, float | None]
    late: bool = False  # the year rule fires: the question asks about years after every hit


class Rates(Frozen):
    """How one abstention rule did on the judged queries (leave-one-out unless said)."""

    answerable: int
    absent: int
    answer_rate: float
    abstain_rate: float
    balanced_accuracy: float
    answer_ci: tuple[float, float]
    abstain_ci: tuple[float, float]
    balanced_ci: tuple[float, float]


class FitReport(Frozen):
    """What ``pgcite eval --fit-abstention`` reports (and stores the model of)."""

    collection: str
    golden: str
    model_key: str
    method: str = "leave-one-out"
    combined: Rates
    with_year_rule: Rates  # what an answer does: the combined score, then the year rule
    per_signal: dict[str, Rates]
    model: dict[str, Any]
    stored: bool
    left_out: list[str]  # queries neither answerable nor absent
    also: list[str] = Field(default_factory=list)  # further judged sets the fit used
    pooled: Rates | None = None  # with ``also``: what an answer does, over every query
    # the model that ships with pgcite on the same queries (never fitted on them), + year
    # rule: what answers do without the fit; None when it has no model for this embedder
    default: Rates | None = None


def observe(collection: JudgedCollection, golden: GoldenSet, *, mode: Mode = MODE,
            top_k: int = TOP_K) -> tuple[list[Observation], list[str], str]:
    """The signals of every answerable or absent query; (observations, left out, model key)."""
    observations: list[Observation] = []
    left_out: list[str] = []
    model_key = collection.active_snapshot().embed_model
    for query in golden.queries:
        if not query.answerable and query.kind != "absent":
            left_out.append(query.id)
            continue
        filters = {"cutoff": query.cutoff}
        result = collection.search(query.text, top_k=top_k, mode=mode, filters=filters)

        def keyword(text: str, filters: dict[str, Any] = filters) -> SearchResult:
            found: SearchResult = collection.search(text, top_k=top_k, mode="keyword",
                                                    filters=filters)
            return found

        result, _ = read_wording(query.text, result, keyword)
        observations.append(Observation(
            id=query.id, kind=query.kind, answerable=query.answerable,
            has_hits=bool(result.hits), signals=result.signals,
            late=bool(result.hits) and asks_outside_sources(query.text, result.hits) is not None))
    return observations, left_out, model_key


def features(observations: Sequence[Observation],
             names: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(signal rows, labels, scorable mask): rows of unscorable queries (nothing found, no
    vector leg) are zeros and always abstain."""
    rows, mask = [], []
    for obs in observations:
        values = signal_values(obs.signals, names) if obs.has_hits else None
        mask.append(values is not None)
        rows.append(values if values is not None else [0.0] * len(names))
    labels = np.array([1.0 if o.answerable else 0.0 for o in observations])
    return np.asarray(rows, dtype=float).reshape(len(rows), len(names)), labels, np.array(mask)


def loo_logistic(x: np.ndarray, y: np.ndarray, mask: np.ndarray, *,
                 l2: float = DEFAULT_L2, names: Sequence[str] = FEATURES) -> list[bool]:
    """Abstain decisions, each from a model fitted without that query. ``names``: the
    columns of ``x`` (the default signals, or any others a benchmark tries)."""
    return _leave_one_out(x, y, mask, lambda tx, ty, row: float(
        fit_model(tx, ty, model_key="cv", l2=l2, names=names).predict(row[None, :])[0]) < 0.5)


def loo_threshold(values: np.ndarray, y: np.ndarray, mask: np.ndarray,
                  name: str = "cosine") -> list[bool]:
    """Abstain decisions of a one-signal threshold calibrated without that query. The signal
    ``name`` says which way it points: one that is high on absent queries (``unknown_names``)
    abstains ABOVE its threshold, read here as its negation below one."""
    values = values * orientation(name)

    def decide(tx: np.ndarray, ty: np.ndarray, row: np.ndarray) -> bool:
        return bool(row[0] < best_threshold(tx[ty == 1, 0], tx[ty == 0, 0]))

    return _leave_one_out(values.reshape(-1, 1), y, mask, decide)


def best_threshold(answerable: np.ndarray, absent: np.ndarray) -> float:
    """:func:`calibrate_threshold`'s value for finite confidences, vectorised: leave-one-out
    calibrates once per query, which the pure-Python loop makes quadratic per fold."""
    if absent.size == 0:
        return calibrate_threshold(answerable.tolist(), []).value
    values = np.unique(np.concatenate([answerable, absent]))
    candidates = np.concatenate([[-math.inf], (values[:-1] + values[1:]) / 2, [math.inf]])
    ans, absn = np.sort(answerable), np.sort(absent)
    # declines when confidence < t: the count of values strictly below t
    # (n - k) / n, not 1 - k / n: the same floats as the calibration's, so ties tie alike
    answered = (ans.size - np.searchsorted(ans, candidates, side="left")) / max(ans.size, 1)
    declined = np.searchsorted(absn, candidates, side="left") / absn.size
    balanced = (answered + declined) / 2 if ans.size else declined
    tied = candidates[balanced == balanced.max()]
    finite = tied[np.isfinite(tied)]
    if finite.size == 0:
        return float(tied[0])
    centre = (finite[0] + finite[-1]) / 2
    return float(min(finite.tolist(), key=lambda t: (abs(t - centre), t)))


def _leave_one_out(x: np.ndarray, y: np.ndarray, mask: np.ndarray,
                   decide: Callable[[np.ndarray, np.ndarray, np.ndarray], bool]) -> list[bool]:
    out = []
    for i in range(len(y)):
        if not mask[i]:
            out.append(True)  # nothing to score: abstains, as the answer does
            continue
        keep = mask.copy()
        keep[i] = False
        out.append(decide(x[keep], y[keep], x[i]))
    return out


def rates(abstained: Sequence[bool], y: np.ndarray, *, seed: int = 0) -> Rates:
    """Answer rate on answerable, abstain rate on absent, balanced accuracy, with intervals."""
    decided = np.asarray(abstained, dtype=bool)
    answered = ~decided[y == 1]
    declined = decided[y == 0]
    answer, abstain = float(answered.mean()), float(declined.mean())
    rng = np.random.default_rng(seed)
    boot = [(rng.choice(answered, answered.size).mean() + rng.choice(declined, declined.size)
             .mean()) / 2 for _ in range(BOOTSTRAP)]
    return Rates(
        answerable=int(answered.size), absent=int(declined.size), answer_rate=answer,
        abstain_rate=abstain, balanced_accuracy=(answer + abstain) / 2,
        answer_ci=wilson(int(answered.sum()), answered.size),
        abstain_ci=wilson(int(declined.sum()), declined.size),
        balanced_ci=(float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))))


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% by default)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def cross_validate(
    observations: Sequence[Observation], names: Sequence[str] = FEATURES, *,
    l2: float = DEFAULT_L2, report_on: int | None = None,
) -> tuple[Rates, Rates, dict[str, Rates], Rates | None]:
    """Leave-one-out figures of the combined score, of the combined score followed by the
    year rule (what an answer does), and of each signal alone (every signal, not only the
    ``names`` combined). Every query is decided by a rule fitted on all the others; the
    figures count the first ``report_on`` queries' decisions (all by default), so a small
    judged set can be decided by fits that also learned from further queries. The last
    element: with ``report_on`` short of every query, what an answer does over all of them
    (the same decisions, counted on every query; None otherwise)."""
    x, y, mask = features(observations, names)
    _need_both(y)
    on = slice(report_on)
    _need_both(y[on])
    decided = loo_logistic(x, y, mask, l2=l2)
    combined = rates(decided[on], y[on])
    abstained = [a or o.late for a, o in zip(decided, observations, strict=True)]
    with_rule = rates(abstained[on], y[on])
    pooled = rates(abstained, y) if len(abstained[on]) < len(abstained) else None
    every, _, _ = features(observations, SIGNALS)
    per_signal = {name: rates(loo_threshold(every[:, j], y, mask, name)[on], y[on])
                  for j, name in enumerate(SIGNALS)}
    return combined, with_rule, per_signal, pooled


def fit_abstention(collection: JudgedCollection, golden: GoldenSet, *, store: bool = True,
                   names: Sequence[str] = FEATURES, l2: float = DEFAULT_L2,
                   also: Sequence[GoldenSet] = ()) -> FitReport:
    """Cross-validate, fit on every query, and (``store``) save the model in the collection.
    ``also``: further judged sets to fit on; the figures stay ``golden``'s (each of its
    queries decided by a fit on every other query, ``also``'s included), with the pooled
    figure beside them."""
    observations, left_out, model_key = observe(collection, golden)
    own = len(observations)
    for extra in also:
        more, skipped, _ = observe(collection, extra)
        observations += more
        left_out += skipped
    combined, with_rule, per_signal, pooled = cross_validate(observations, names, l2=l2,
                                                             report_on=own)
    x, y, mask = features(observations, names)
    sets = " + ".join([golden.name, *(extra.name for extra in also)])
    model = fit_model(
        x[mask], y[mask], model_key=model_key, names=names, l2=l2,
        fitted_on=f"{sets}: {int(y.sum())} answerable + {int((1 - y).sum())} absent",
        cross_validated={"method": "leave-one-out", **combined.model_dump(mode="json"),
                         "with_year_rule": with_rule.model_dump(mode="json")})
    if store:
        with collection.client.connection() as conn:
            store_model(conn, collection.name, model)
    return FitReport(collection=collection.name, golden=golden.name, model_key=model_key,
                     combined=combined, with_year_rule=with_rule, per_signal=per_signal,
                     model=model.model_dump(mode="json"), stored=store, left_out=left_out,
                     also=[extra.name for extra in also], pooled=pooled,
                     default=default_rates(observations[:own], model_key,
                                           collection.info.ts_config))


def default_rates(observations: Sequence[Observation], model_key: str,
                  language: str) -> Rates | None:
    """What the shipped default model (+ the year rule) decides on these queries."""
    shipped = shipped_default().for_key(model_key, language)
    if shipped is None:
        return None
    x, y, mask = features(observations, shipped.signals)
    low = shipped.predict(x) < shipped.cut
    return rates([bool(not m or a or o.late) for m, a, o in zip(mask, low, observations,
                                                                strict=True)], y)


def _need_both(y: np.ndarray) -> None:
    from pgcite._errors import ConfigError

    if y.size == 0 or y.min() == y.max():
        raise ConfigError("fitting abstention needs answerable and absent queries",
                          hint="absent queries are kind \"absent\" with no relevant documents")


def render_fit(report: FitReport) -> str:
    """The figures as a short Markdown table (leave-one-out, 95% intervals)."""
    lines = [f"Abstention on {report.golden} ({report.collection}, {report.model_key}), "
             f"{report.method}: {report.combined.answerable} answerable, "
             f"{report.combined.absent} absent",
             "", "| rule | answerable answered | absent abstained | balanced accuracy |",
             "|---|---|---|---|"]
    if report.also:
        lines[0] += (f"; each decided by a fit on every other query, those of "
                     f"{', '.join(report.also)} included")
    rows = [("combined score", report.combined),
            ("combined score + year rule (what an answer does)", report.with_year_rule),
            *([("the shipped default model + year rule (no fit: what answers do now)",
                report.default)] if report.default else []),
            *([(f"the same, over every query ({report.pooled.answerable} answerable, "
                f"{report.pooled.absent} absent)", report.pooled)] if report.pooled else []),
            *((f"{name} alone (threshold{', today' if name == 'cosine' else ''})", r) for name, r in report.per_signal.items())]
    for label, r in rows:
        lines.append(f"| {label} | {_pct(r.answer_rate, r.answer_ci)} | "
                     f"{_pct(r.abstain_rate, r.abstain_ci)} | "
                     f"{r.balanced_accuracy:.3f} [{r.balanced_ci[0]:.3f}, {r.balanced_ci[1]:.3f}] |")
    lines.append("")
    lines.append("model stored in the collection's settings for " + report.model_key
                 if report.stored else "model not stored")
    return "\n".join(lines)


def _pct(value: float, ci: tuple[float, float]) -> str:
    return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"

