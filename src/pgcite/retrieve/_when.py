"""The months and years a question asks about, and whether a passage's dates fall in them.

"What did Pepys see at the coronation in April 1661?" asks about April 1661: a passage of 1662
is rarely its evidence. Used by the date boost (:class:`~pgcite.retrieve._pipeline.Stages`
``date_boost``) and by the answerer's date-match signal. Dates are the days a passage covers
(``date_start``..``date_end``), as ingest stores them.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re

_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
# "in September 1666", "June 1667", "1665", "the winter of 1664-65": the periods a question
# asks about. A year that bounds it from above ("before 1664", "until June 1664") asks about
# the time before, which any earlier passage may cover: it names no period.
_MONTH_INDEX = {m: i + 1 for i, m in enumerate(_MONTHS)} | {
    m[:3]: i + 1 for i, m in enumerate(_MONTHS)} | {"sept": 9}
_YEAR_TEXT = r"1[0-9]{3}|20[0-9]{2}"  # a year a question or a passage may name: 1000-2099
YEAR = re.compile(rf"\b({_YEAR_TEXT})\b")
_PERIOD = re.compile(
    r"\b(?:(?P<month>" + "|".join(sorted(_MONTH_INDEX, key=len, reverse=True))
    + rf")\.?\s+(?:of\s+)?)?(?P<year>{_YEAR_TEXT})(?:\s*[-–/]\s*(?P<to>[0-9]{{2,4}}))?\b",
    re.IGNORECASE)
UPPER_BOUND = re.compile(r"\b(?:before|until|till|up\s+to|prior\s+to|by)\s+"
                         rf"(?:[A-Za-z]+\s+){{0,2}}({_YEAR_TEXT})\b", re.IGNORECASE)


def asked_periods(question: str) -> list[tuple[dt.date, dt.date]]:
    """The days of each month or year the question names (not those bounding it from above)."""
    periods = []
    for match in _PERIOD.finditer(UPPER_BOUND.sub(" ", question)):
        year = int(match["year"])
        if match["month"]:
            first = dt.date(year, _MONTH_INDEX[match["month"].casefold()], 1)
            periods.append((first, first.replace(day=calendar.monthrange(year, first.month)[1])))
            continue
        last = year
        if match["to"]:  # "1664-65", "1664-1665"
            to = match["to"]
            last = int(str(year)[: 4 - len(to)] + to)
            last = last if year <= last <= year + 20 else year
        periods.append((dt.date(year, 1, 1), dt.date(last, 12, 31)))
    return periods


def overlaps(periods: list[tuple[dt.date, dt.date]], start: dt.date | None,
             end: dt.date | None = None) -> bool:
    """Does a passage dated ``start``..``end`` fall in one of ``periods``? (Undated: no.)"""
    if not periods or start is None:
        return False
    first, last = start, end or start
    return any(first <= to and last >= since for since, to in periods)
