"""A journal kept in one file, read as its dated entries (``pgcite ingest --entries``).

A diary or a letter-book transcribed as one text puts a date line before each entry ("March 22,
1852", "Monday, March 22nd.", "4th (Lord's day).", "1852-03-22") or starts the entry with it
("March 22.—Walked to the mill …"). Read as one undated document, a cutoff leaves all of it out
and nothing ties a passage to its day. With ``--entries`` each entry becomes a unit of the
document (the smallest thing with its own date and locator, ``pgcite._types.Unit``), dated by
its date line and cited by its day; the text before the first date line stays, undated. In
Markdown a heading may be the date line ("## March 22, 1852"); the entries then replace the
heading sections.

A date line without a year takes the year of the entry before it, and one with only a day the
month and year too (Pepys's "4th."), or those of a month heading before it ("SEPTEMBER 1666"); a
month or day that goes backwards moves on to the next year or month. A line that cannot be
dated that way (a day with no month known yet) is text. What a user gave (``--date``, a
catalogue row) still replaces these dates, as it replaces any date a file states
(docs/ingest.md, "Dates").
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass

from pgcite._types import Unit

_MONTH_NAMES = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "febr": 2, "march": 3, "mar": 3,
    "april": 4, "apr": 4, "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8,
    "aug": 8, "september": 9, "sep": 9, "sept": 9, "septemb": 9, "october": 10, "oct": 10,
    "octob": 10, "november": 11, "nov": 11, "novemb": 11, "december": 12, "dec": 12,
    "decemb": 12,
}
_WEEKDAY = (r"(?:(?:mon|tues?|wednes|thurs?|fri|satur|sun)(?:day)?|wed|thu|sat)\.?,?\s+")
_DAY = r"(\d{1,2})(?:st|nd|rd|th|d)?"
_MONTH = r"([a-z]+)\.?"
_YEAR = r"(?:,?\s+(\d{4}))?"
# What may follow the date on its line: a full stop, a parenthesis ("(Lord's day)").
_TAIL = r"\.?(?:\s*\([^()]{0,40}\))?\.?"
_MONTH_DAY = re.compile(rf"(?:{_WEEKDAY})?{_MONTH}\s+{_DAY}{_YEAR}", re.IGNORECASE)
_DAY_MONTH = re.compile(rf"(?:{_WEEKDAY})?{_DAY}\s+(?:of\s+)?{_MONTH}{_YEAR}", re.IGNORECASE)
_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
# A day alone only as an ordinal ("4th.", "8th (Lord's day)."): a bare number is a page or an item.
_DAY_ONLY = re.compile(r"(\d{1,2})(?:st|nd|rd|th|d)\b", re.IGNORECASE)
# The date ends its line, or the entry follows it on the line: after a dash ("March 22.—Walked
# to the mill"), or after a full stop or a parenthesis and a capital ("4th. Up by break of day",
# "2nd (Lord's day). Some of our mayds …", Pepys as printed).
_AFTER = re.compile(rf"{_TAIL}\s*$|\.?\s*[—–]\s*(?=\S)"
                    r"|(?:\.?\s*\([^()]{0,40}\)\.?|\.)\s*(?=[A-Z“\"‘'])")
# A month and a year alone ("SEPTEMBER 1666", "Sept., 1666."): no entry, but the month and year
# the day-only date lines after it are in.
_MONTH_YEAR = re.compile(r"([a-z]+)\.?,?\s+(\d{4})\.?", re.IGNORECASE)


def entry_units(text: str, title: str | None) -> list[Unit] | None:
    """``text`` cut into its dated entries, or ``None`` when no line of it dates an entry."""
    entries: list[tuple[dt.date | None, list[str]]] = [(None, [])]
    last: _Context | None = None
    # A month heading ("APRIL 1852") and the blank lines after it open the entries below it:
    # held until the next line says whether an entry follows (it then heads that entry) or text
    # does (it stays where it stands). Kept with the entry before, "APRIL 1852" ended the last
    # March entry and was quoted and cited as that day's text.
    heading: list[str] = []
    for line in text.split("\n"):
        # a Markdown heading or bold line may be the date line: "## March 22, 1852"
        bare = line.strip().lstrip("#").strip().strip("*_").strip()
        day = _date_line(bare, last)
        if day is not None:
            last = _Context(day.year, day.month, day.day)
            entries.append((day, [*(h.strip() for h in heading if h.strip()), line.strip()]))
            heading = []
        elif (month := _month_year(bare)) is not None or (heading and not bare):
            last = month or last
            heading.append(line)
        else:
            entries[-1][1].extend([*heading, line])
            heading = []
    entries[-1][1].extend(heading)
    if len(entries) == 1:
        return None
    units: list[Unit] = []
    for day, lines in entries:
        body = "\n".join(lines).strip()
        if day is None:
            if body:
                units.append(Unit(text=body, title=title))
        elif body:  # titled in full: a day-only line says "4th", its entry is a date
            units.append(Unit(text=body, title=f"{day.day} {calendar.month_name[day.month]} "
                              f"{day.year}", locator=day.isoformat(), date_start=day,
                              date_end=day))
    return units


@dataclass(frozen=True)
class _Context:
    """The date the entries have reached: a month heading gives no day yet (``day`` 0)."""

    year: int
    month: int
    day: int


def _month_year(line: str) -> _Context | None:
    match = _MONTH_YEAR.fullmatch(line)
    month = _MONTH_NAMES.get(match[1].casefold()) if match else None
    return _Context(int(match[2]), month, 0) if match and month else None


def _date_line(line: str, last: _Context | None) -> dt.date | None:
    """The day ``line`` opens an entry with (alone, or before the entry's text), read after
    ``last``."""
    for pattern in (_ISO, _MONTH_DAY, _DAY_MONTH, _DAY_ONLY):
        match = pattern.match(line)
        if match is None or _AFTER.match(line, match.end()) is None:
            continue
        day = _resolve(pattern, match, last)
        if day is not None:
            return day
    return None


def _resolve(pattern: re.Pattern[str], match: re.Match[str], last: _Context | None
             ) -> dt.date | None:
    if pattern is _ISO:
        return _day(*(int(g) for g in match.groups()))
    if pattern is _DAY_ONLY:
        if last is None:
            return None
        day = int(match[1])
        month, year = last.month, last.year
        if day < last.day:  # "1st." after "30th.": the next month
            month, year = (1, year + 1) if month == 12 else (month + 1, year)
        return _day(year, month, day)
    name, day_text = (match[1], match[2]) if pattern is _MONTH_DAY else (match[2], match[1])
    named = _MONTH_NAMES.get(name.casefold())
    if named is None:
        return None
    if match[3] is not None:
        year = int(match[3])
    elif last is not None:
        year = last.year + (1 if named < last.month else 0)  # "January 2" after "December 30"
    else:
        return None
    return _day(year, named, int(day_text))


def _day(year: int, month: int, day: int) -> dt.date | None:
    if not (1 <= month <= 12) or not (1 <= day <= calendar.monthrange(year, month)[1]):
        return None
    return dt.date(year, month, day)
