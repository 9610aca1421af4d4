"""Character error rate: how far an OCR transcription is from the known text."""

from __future__ import annotations

import re


def character_error_rate(reference: str, hypothesis: str) -> float:
    """Levenshtein distance (insertions, deletions, substitutions) over the reference length.

    Whitespace runs count as one space on both sides: OCR re-flows lines, which is not an error
    in the text. 0.0 is a perfect reading; it can exceed 1.0 when the hypothesis adds text.
    """
    ref, hyp = _spaced(reference), _spaced(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, start=1):
        current = [i]
        for j, h in enumerate(hyp, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h)))
        previous = current
    return previous[-1] / len(ref)


def _spaced(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()
