"""A passage's date as its source gives it: a day, a month, a year, or a span of them.

Ingest stores every date as the days it covers (``1855`` is 1855-01-01..1855-12-31, ``March
1666`` is 1666-03-01..1666-03-31; docs/ingest.md), so the precision is read back from the range:
an answer says "in 1855", never "on 1855-01-01" — a day the source does not give.
"""

from __future__ import annotations

import calendar
import datetime as dt

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")


def _parse(value: str | dt.date | None) -> dt.date | None:
    if value is None or isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(value)


def _month_end(day: dt.date) -> dt.date:
    return day.replace(day=calendar.monthrange(day.year, day.month)[1])


def _whole_years(start: dt.date, end: dt.date) -> bool:
    return (start.month, start.day) == (1, 1) and (end.month, end.day) == (12, 31)


def _whole_months(start: dt.date, end: dt.date) -> bool:
    return start.day == 1 and end == _month_end(end)


def iso_stated(start: str | dt.date | None, end: str | dt.date | None = None) -> str | None:
    """ISO 8601 at the source's precision: ``1855``, ``1666-03``, ``1666-09-02``, or a span
    ``1666-09-02/1666-09-05`` (what a model is shown, so that it cannot invent a day)."""
    first, last = _parse(start), _parse(end)
    if first is None:
        return None
    last = last or first
    if last == first:
        return first.isoformat()
    if _whole_years(first, last):
        return str(first.year) if first.year == last.year else f"{first.year}/{last.year}"
    if _whole_months(first, last):
        one, two = f"{first.year}-{first.month:02d}", f"{last.year}-{last.month:02d}"
        return one if one == two else f"{one}/{two}"
    return f"{first.isoformat()}/{last.isoformat()}"


def spoken(start: str | dt.date | None, end: str | dt.date | None = None
           ) -> tuple[str, str] | None:
    """(preposition, date) in words: ("on", "2 September 1666"), ("in", "March 1666"),
    ("in", "1855"), ("between", "2 and 5 September 1666"); None when undated."""
    first, last = _parse(start), _parse(end)
    if first is None:
        return None
    last = last or first
    if last == first:
        return "on", _day(first)
    if _whole_years(first, last):
        if first.year == last.year:
            return "in", str(first.year)
        return "between", f"{first.year} and {last.year}"
    if _whole_months(first, last):
        if (first.year, first.month) == (last.year, last.month):
            return "in", _month(first)
        if first.year == last.year:
            return "between", f"{_MONTHS[first.month - 1]} and {_month(last)}"
        return "between", f"{_month(first)} and {_month(last)}"
    if (first.year, first.month) == (last.year, last.month):
        return "between", f"{first.day} and {_day(last)}"
    return "between", f"{_day(first)} and {_day(last)}"


def _day(day: dt.date) -> str:
    return f"{day.day} {_month(day)}"


def _month(day: dt.date) -> str:
    return f"{_MONTHS[day.month - 1]} {day.year}"
