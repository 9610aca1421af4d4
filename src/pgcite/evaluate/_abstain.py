"""When to abstain: a confidence threshold, fixed or calibrated on the judged queries.

A searcher reports a ``confidence`` per query (e.g. the best cosine similarity). The system
abstains when ``confidence < threshold``; it also abstains when it returns nothing, whatever the
threshold. A query that returns hits but no confidence never abstains.

Calibration picks the threshold that maximises *balanced accuracy*: the mean of the answer rate on
answerable queries and the abstain rate on absent ones, so a set with few absent queries still
weighs them equally. Candidates are the midpoints between consecutive distinct confidences, plus
``-inf`` (answer everything) and ``+inf`` (abstain on everything with a confidence). When several
candidates tie, the one nearest the centre of the tied span wins: the widest margin we can give
both sides, rather than an edge that a tiny shift in scores would flip.

This is calibrated and measured on the same queries, so the reported pass rate on absent queries
is optimistic; pass a fixed threshold (chosen on other data) for an honest figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pgcite.evaluate._base import Frozen

NEVER_ABSTAIN = -math.inf


class Threshold(Frozen):
    """A threshold and how it was chosen, in words a report can print."""

    value: float
    method: str  # "calibrated", "fixed" or "never-abstain"
    reason: str
    candidates: int = 0  # thresholds tried (calibrated only)
    answer_rate: float | None = None  # on answerable queries, at this threshold
    abstain_rate: float | None = None  # on absent queries, at this threshold
    balanced_accuracy: float | None = None


def abstains(confidence: float | None, has_hits: bool, threshold: float) -> bool:
    """Whether the system declines to answer (see module doc for the rule)."""
    if not has_hits:
        return True
    return confidence is not None and confidence < threshold


def effective_confidence(confidence: float | None, has_hits: bool) -> float:
    """The confidence that makes ``x < threshold`` agree with :func:`abstains` for any finite
    threshold: no hits always abstain (``-inf``), no confidence never does (``+inf``)."""
    if not has_hits:
        return -math.inf
    return math.inf if confidence is None else confidence


def fixed_threshold(
    value: float, answerable: Sequence[float], absent: Sequence[float]
) -> Threshold:
    """A threshold given by the caller, with the rates it achieves on these queries."""
    answer, abstain, balanced = _rates(value, answerable, absent)
    return Threshold(
        value=value,
        method="fixed",
        reason=f"given by the caller ({value:g}); not calibrated",
        answer_rate=answer,
        abstain_rate=abstain,
        balanced_accuracy=balanced,
    )


def calibrate_threshold(answerable: Sequence[float], absent: Sequence[float]) -> Threshold:
    """The threshold maximising balanced accuracy on these confidences (see module doc).

    Use :func:`effective_confidence` to turn "no hits" / "no confidence" into confidences.
    """
    if not absent:
        answer, _, _ = _rates(NEVER_ABSTAIN, answerable, absent)
        return Threshold(
            value=NEVER_ABSTAIN,
            method="never-abstain",
            reason="no absent queries to calibrate on: threshold -inf, never abstains",
            answer_rate=answer,
        )
    candidates = _candidates([*answerable, *absent])
    scored = [(_rates(t, answerable, absent)[2] or 0.0, t) for t in candidates]
    best = max(score for score, _ in scored)
    chosen = _middle([t for score, t in scored if score == best])
    answer, abstain, balanced = _rates(chosen, answerable, absent)
    return Threshold(
        value=chosen,
        method="calibrated",
        reason=(
            f"maximises balanced accuracy ({balanced:.3f}) over {len(candidates)} candidate "
            f"thresholds on {len(answerable)} answerable + {len(absent)} absent queries; "
            "ties go to the centre of the tied span"
        ),
        candidates=len(candidates),
        answer_rate=answer,
        abstain_rate=abstain,
        balanced_accuracy=balanced,
    )


def _candidates(confidences: Sequence[float]) -> list[float]:
    values = sorted({c for c in confidences if math.isfinite(c)})
    midpoints = [(a + b) / 2 for a, b in zip(values, values[1:], strict=False)]
    return [-math.inf, *midpoints, math.inf]


def _middle(tied: list[float]) -> float:
    """The tied candidate nearest the centre of the finite tied span (lower one on a tie)."""
    finite = [t for t in tied if math.isfinite(t)]
    if not finite:
        return tied[0]
    centre = (finite[0] + finite[-1]) / 2
    return min(finite, key=lambda t: (abs(t - centre), t))


def _rates(
    threshold: float, answerable: Sequence[float], absent: Sequence[float]
) -> tuple[float | None, float | None, float | None]:
    """(answer rate on answerable, abstain rate on absent, balanced accuracy); None if empty."""
    answer = _mean([not _declines(c, threshold) for c in answerable])
    abstain = _mean([_declines(c, threshold) for c in absent])
    present = [r for r in (answer, abstain) if r is not None]
    return answer, abstain, (sum(present) / len(present) if present else None)


def _declines(confidence: float, threshold: float) -> bool:
    # -inf stands for "returned nothing", which abstains even at threshold -inf.
    return confidence == -math.inf or confidence < threshold


def _mean(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None
