"""The activation gate: pure comparisons of evaluation summaries (no database, no model).

A snapshot may become active only if its evaluation on the collection's golden set

* meets every **floor** (e.g. ``recall@10 >= 0.85``), configurable per collection;
* does not **regress** against the currently active snapshot by more than ``tolerance``
  (absolute, per metric) on the regression metrics;
* has **no cutoff violations** -- a hard floor that ``--force`` cannot skip, because a snapshot
  that shows a passage dated after a user's cutoff is wrong, not merely worse.

Everything here works on :class:`EvalSummary` (what ``snapshots.evaluation`` stores) and returns a
:class:`Verdict` whose failing checks describe themselves ("recall@10 0.41 < floor 0.85").
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pgcite._errors import ConfigError, PgciteError
from pgcite._gate_settings import HARD_METRIC, GateSettings, check_metric_name


class GateRefused(PgciteError):
    """A snapshot did not pass the activation gate; the message names the failing figures."""


class Check(BaseModel):
    """One comparison; ``describe()`` is what a user reads when it fails."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["floor", "regression", "hard"]
    metric: str
    value: float | None  # None: the evaluation did not measure this figure
    limit: float
    passed: bool
    baseline: float | None = None  # regression checks: the active snapshot's figure

    def describe(self) -> str:
        if self.value is None:
            return f"{self.metric} not measured (needed for the {self.kind} {_fmt(self.limit)})"
        value, limit = _fmt_pair(self.value, self.limit)
        if self.kind == "floor":
            return f"{self.metric} {value} {'>=' if self.passed else '<'} floor {limit}"
        if self.kind == "regression":
            base = _fmt(self.baseline if self.baseline is not None else math.nan)
            return (f"{self.metric} {value} {'>=' if self.passed else '<'} {limit} "
                    f"(active {base} - tolerance)")
        return f"{self.metric} {int(self.value)} {'<=' if self.passed else '>'} {int(self.limit)}" \
               " (hard floor)"


class Verdict(BaseModel):
    """All checks of one candidate against the floors and one baseline."""

    model_config = ConfigDict(frozen=True)

    candidate: int | None = None
    baseline: int | None = None  # the active snapshot compared against (None: none was active)
    checks: list[Check] = Field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    @property
    def hard_failures(self) -> list[Check]:
        return [c for c in self.failures if c.kind == "hard"]

    def failure_text(self) -> str:
        return "; ".join(c.describe() for c in self.failures)


class EvalSummary(BaseModel):
    """A snapshot's evaluation, as stored in ``snapshots.evaluation``.

    A calibrated threshold can be ``-inf`` ("never abstain": a golden set without absent
    queries); jsonb has no infinities, so they travel as the strings ``"-Infinity"`` /
    ``"Infinity"`` (read back as floats), as everywhere in evaluate.
    """

    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    golden: str
    golden_path: str
    golden_sha256: str
    queries: int
    mode: str
    k: int
    depth: int
    threshold: float | None  # as requested (None: calibrated)
    threshold_used: float | None = None
    figures: dict[str, float]
    cutoff_violations: int
    must_not_hits: int = 0
    evaluated_at: dt.datetime
    verdict: Verdict | None = None  # against the active snapshot at evaluation time

    def to_jsonb(self) -> dict[str, Any]:
        """What ``snapshots.evaluation`` stores: plain JSON, infinities as strings."""
        data: dict[str, Any] = json.loads(self.model_dump_json())
        return data

    def matches(self, golden_sha256: str, gate: GateSettings) -> bool:
        """Whether this evaluation answers for ``gate`` on that golden set (else re-evaluate)."""
        return (self.golden_sha256 == golden_sha256 and self.mode == gate.mode
                and self.k == gate.k and self.depth == gate.depth
                and self.threshold == gate.threshold)


def floor_checks(figures: Mapping[str, float], floors: Mapping[str, float]) -> list[Check]:
    """One check per floor: the figure must be at least the floor."""
    return [
        Check(kind="floor", metric=name, value=figures.get(name), limit=floor,
              passed=name in figures and figures[name] >= floor - 1e-9)
        for name, floor in floors.items()
    ]


def regression_checks(
    candidate: Mapping[str, float],
    baseline: Mapping[str, float],
    metrics: Sequence[str],
    tolerance: float,
) -> list[Check]:
    """The candidate may be worse than the baseline by at most ``tolerance`` per metric.
    Metrics the baseline did not measure are not compared (there is nothing to regress from)."""
    checks = []
    for name in metrics:
        if name not in baseline:
            continue
        limit = baseline[name] - tolerance
        value = candidate.get(name)
        checks.append(Check(kind="regression", metric=name, value=value, limit=limit,
                            baseline=baseline[name],
                            passed=value is not None and value >= limit - 1e-9))
    return checks


def hard_checks(summary: EvalSummary) -> list[Check]:
    violations = float(summary.cutoff_violations)
    return [Check(kind="hard", metric=HARD_METRIC, value=violations, limit=0.0,
                  passed=violations == 0)]


def judge(
    candidate: EvalSummary,
    baseline: EvalSummary | None,
    gate: GateSettings,
    *,
    candidate_id: int | None = None,
    baseline_id: int | None = None,
) -> Verdict:
    """Every check the gate makes; ``baseline`` is the active snapshot's evaluation (or None)."""
    checks = hard_checks(candidate) + floor_checks(candidate.figures, gate.floors)
    if baseline is not None:
        checks += regression_checks(candidate.figures, baseline.figures,
                                    gate.regression_metrics, gate.tolerance)
    return Verdict(candidate=candidate_id, baseline=baseline_id, checks=checks)


def forced_skips(verdict: Verdict) -> list[str]:
    """What ``--force`` skips: the soft failures. Hard failures are never skippable."""
    if verdict.hard_failures:
        raise GateRefused(
            f"snapshot {verdict.candidate} cannot be activated, even with --force: "
            + "; ".join(c.describe() for c in verdict.hard_failures),
            hint="a cutoff violation means passages dated after a cutoff come back: fix the data",
        )
    return [c.describe() for c in verdict.failures]


def parse_floor(text: str) -> tuple[str, float | None]:
    """``"recall@10=0.85"`` -> ``("recall@10", 0.85)``; ``"recall@10=none"`` removes the floor."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if sep and value.strip().lower() in ("none", "off"):
        return check_metric_name(name), None
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not sep or math.isnan(number) or not 0.0 <= number <= 1.0:
        raise ConfigError(f"bad floor {text!r}",
                          hint="write METRIC=VALUE (0..1), e.g. recall@10=0.85, or METRIC=none")
    return check_metric_name(name), number


def apply_floors(gate: GateSettings, updates: Sequence[str]) -> GateSettings:
    """The gate with ``METRIC=VALUE`` / ``METRIC=none`` updates applied to its floors."""
    floors = dict(gate.floors)
    for text in updates:
        name, value = parse_floor(text)
        if value is None:
            floors.pop(name, None)
        else:
            floors[name] = value
    return gate.model_copy(update={"floors": floors})


def _fmt(x: float) -> str:
    return f"{x:.2f}"


def _fmt_pair(value: float, limit: float) -> tuple[str, str]:
    """Two decimals, or four where two would print a failing value equal to its limit."""
    if _fmt(value) == _fmt(limit) and value != limit:
        return f"{value:.4f}", f"{limit:.4f}"
    return _fmt(value), _fmt(limit)
