"""Dates as archives write them: a day, a month (``1666-09``), a year (``1666``), or a range.

Every date becomes a range of days ``(start, end)``: ``1666-09`` is 1 to 30 September. The cutoff
filter compares the END, so a passage dated only "1666" passes a cutoff of 1666-12-31 but not one
of 1666-09-30 -- it may have been written after it, and a cutoff must never let a later text in.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from typing import Any

DateRange = tuple[dt.date, dt.date]

# yyyy, yyyy-mm or yyyy-mm-dd, optionally followed by a time (ignored: dates are days here).
_PARTIAL = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2})(?:[T ]\d{2}:\d{2}.*)?)?)?")
# A date leading a file name: 1666-09-02-letter.md, 1666_09_letter.txt, 1666 letter.md.
_NAME_DATE = re.compile(r"(\d{4})(?:[-_](\d{2}))?(?:[-_](\d{2}))?(?=$|[-_ .])")
FORMATS = "yyyy, yyyy-mm, yyyy-mm-dd or a range start/end"


class DateError(ValueError):
    """A value that is not a date in one of :data:`FORMATS`."""


def parse_dates(value: Any) -> DateRange | None:
    """The days ``value`` covers; ``None`` for no value. Accepts dates, datetimes, a year as an
    integer, and text in :data:`FORMATS` (a range is ``1666-09-02/1666-09-05``)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, dt.datetime):
        return value.date(), value.date()
    if isinstance(value, dt.date):
        return value, value
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 9999:
        return _days(value, None, None)
    if isinstance(value, str):
        first, sep, last = value.strip().partition("/")
        start = _partial(first.strip())
        if not sep:
            return start
        end = _partial(last.strip())
        if end[1] < start[0]:
            raise DateError(f"range ends ({last.strip()}) before it starts ({first.strip()})")
        return start[0], end[1]
    raise DateError(f"not a date ({FORMATS}): {value!r}")


def date_in_name(name: str) -> DateRange | None:
    """The date a file name starts with (``1666-09-02-letter.md``), or ``None``."""
    match = _NAME_DATE.match(name)
    if not match:
        return None
    try:
        return _days(*(int(g) if g else None for g in match.groups()))  # type: ignore[arg-type]
    except DateError:
        return None  # 2024-99-report.md: a number, not a date


def _partial(text: str) -> DateRange:
    match = _PARTIAL.fullmatch(text)
    if not match:
        raise DateError(f"not a date ({FORMATS}): {text!r}")
    year, month, day = (int(g) if g else None for g in match.groups())
    assert year is not None
    return _days(year, month, day)


def _days(year: int, month: int | None, day: int | None) -> DateRange:
    try:
        if month is None:
            return dt.date(year, 1, 1), dt.date(year, 12, 31)
        if day is None:
            last = calendar.monthrange(year, month)[1]
            return dt.date(year, month, 1), dt.date(year, month, last)
        return dt.date(year, month, day), dt.date(year, month, day)
    except (ValueError, calendar.IllegalMonthError) as exc:
        raise DateError(f"not a valid date: {year:04d}-{month or 1:02d}-{day or 1:02d}") from exc
