"""Abstention: the rule, threshold calibration, and fixed thresholds."""

from __future__ import annotations

import math

import pytest

from pgcite.evaluate import abstains, calibrate_threshold, fixed_threshold
from pgcite.evaluate._abstain import effective_confidence


def test_abstain_rule() -> None:
    assert abstains(0.2, True, 0.5)
    assert not abstains(0.5, True, 0.5)  # at the threshold: answers
    assert abstains(0.9, False, 0.5)  # nothing returned: abstains whatever the confidence
    assert abstains(None, False, -math.inf)
    assert not abstains(None, True, 0.5)  # no confidence reported: never abstains


def test_effective_confidence_agrees_with_the_rule() -> None:
    for confidence in (None, 0.1, 0.9):
        for has_hits in (True, False):
            for threshold in (0.0, 0.5, 1.0):
                mapped = effective_confidence(confidence, has_hits)
                assert (mapped < threshold) == abstains(confidence, has_hits, threshold)


def test_calibration_separates_clean_groups() -> None:
    t = calibrate_threshold([0.9, 0.8, 0.7], [0.2, 0.3])
    assert t.method == "calibrated"
    assert t.value == pytest.approx(0.5)  # midpoint of the gap 0.3 .. 0.7
    assert t.candidates == 6  # -inf, 4 midpoints, +inf
    assert (t.answer_rate, t.abstain_rate, t.balanced_accuracy) == (1.0, 1.0, 1.0)
    assert "balanced accuracy" in t.reason


def test_calibration_ties_go_to_the_centre() -> None:
    # Balanced accuracy 2/3 at 0.2, 0.5 and 0.825; the span's centre is 0.5125 -> 0.5.
    t = calibrate_threshold([0.3, 0.6, 0.95], [0.1, 0.4, 0.7])
    assert t.value == pytest.approx(0.5)
    assert t.balanced_accuracy == pytest.approx(2 / 3)


def test_calibration_is_balanced_not_plain_accuracy() -> None:
    # Plain accuracy would answer everything (9/10 right); balanced accuracy protects the absent.
    t = calibrate_threshold([0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9], [0.3])
    assert t.value == pytest.approx(0.4)
    assert t.abstain_rate == 1.0


def test_calibration_counts_empty_results_as_abstentions() -> None:
    # An absent query that returned nothing (-inf) abstains even at threshold -inf: so -inf and
    # 0.575 tie at 0.75, and the finite candidate wins.
    t = calibrate_threshold([0.5, 0.6], [-math.inf, 0.55])
    assert t.value == pytest.approx(0.575)
    assert (t.answer_rate, t.abstain_rate, t.balanced_accuracy) == (0.5, 1.0, 0.75)
    # With nothing else to separate, answering everything that has hits is perfect.
    t = calibrate_threshold([0.5, 0.6], [-math.inf])
    assert t.value == -math.inf and t.balanced_accuracy == 1.0


def test_no_absent_queries_never_abstains() -> None:
    t = calibrate_threshold([0.1, 0.9], [])
    assert t.value == -math.inf
    assert t.method == "never-abstain"
    assert "no absent queries" in t.reason
    assert t.answer_rate == 1.0 and t.abstain_rate is None


def test_fixed_threshold_reports_its_rates_without_calibrating() -> None:
    t = fixed_threshold(0.75, [0.9, 0.7], [0.2, 0.8])
    assert (t.value, t.method, t.candidates) == (0.75, "fixed", 0)
    assert (t.answer_rate, t.abstain_rate, t.balanced_accuracy) == (0.5, 0.5, 0.5)
