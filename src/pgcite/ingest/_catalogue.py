"""A sidecar catalogue: what archives keep beside their files -- one row per file with its date,
author, corpus, title and any other metadata.

CSV (a header row) or JSONL (one object a line). The ``file`` column (or ``path``) names the file
relative to the folder being ingested (``letters/1666-09-02.txt``), or by its bare name
(``1666-09-02.txt``) when that is unique. ``date`` (or ``date_start``), ``date_end``, ``title``,
``author`` and ``corpus`` fill those fields; every other non-empty column is metadata. A catalogue
that cannot be read, or a bad row, stops the ingest before anything is written: it would date
files wrongly.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from pgcite._errors import ConfigError
from pgcite.ingest._attributes import Attributes
from pgcite.ingest._storable import value_problem

CATALOGUE_SUFFIXES = (".csv", ".jsonl")
FILE_KEYS = ("file", "path")


class Catalogue:
    """Rows of a sidecar catalogue, looked up by relative path or bare file name."""

    def __init__(self, path: Path, rows: dict[str, Attributes]) -> None:
        self.path = path
        self._rows = rows
        self._used: set[str] = set()
        names: dict[str, list[str]] = {}
        for key in rows:
            names.setdefault(Path(key).name, []).append(key)
        self._by_name = {name: keys[0] for name, keys in names.items() if len(keys) == 1}

    @classmethod
    def read(cls, path: Path) -> Catalogue:
        if path.suffix.lower() not in CATALOGUE_SUFFIXES:
            raise ConfigError(f"catalogue {path}: expected a .csv or .jsonl file")
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"catalogue {path}: cannot read it ({exc})") from exc
        records = _csv_rows(text) if path.suffix.lower() == ".csv" else _jsonl_rows(text, path)
        rows: dict[str, Attributes] = {}
        for line, record in records:
            key, attrs = _row(record, path, line)
            if key in rows:
                raise ConfigError(f"catalogue {path}, line {line}: {key!r} is listed twice")
            rows[key] = attrs
        return cls(path.resolve(), rows)

    def lookup(self, rel: str) -> Attributes | None:
        """The row for the file at ``rel`` (relative to the ingested folder), if any."""
        key = rel if rel in self._rows else self._by_name.get(Path(rel).name)
        if key is None:
            return None
        self._used.add(key)
        return self._rows[key]

    def unmatched(self) -> list[str]:
        """Rows that named no file of the run (a typo, or a file not given)."""
        return sorted(set(self._rows) - self._used)


def _csv_rows(text: str) -> list[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text))
    return [(reader.line_num, {k: v.strip() for k, v in row.items() if k and v and v.strip()})
            for row in reader]


def _jsonl_rows(text: str, path: Path) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    for line, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ConfigError(f"catalogue {path}, line {line}: not valid JSON") from exc
        if not isinstance(record, dict):
            raise ConfigError(f"catalogue {path}, line {line}: expected a JSON object")
        rows.append((line, record))
    return rows


def _row(record: dict[str, Any], path: Path, line: int) -> tuple[str, Attributes]:
    where = f"catalogue {path}, line {line}"
    key = next((record[k] for k in FILE_KEYS if record.get(k)), None)
    if not isinstance(key, str):
        raise ConfigError(f"{where}: no file name (a 'file' column)")
    if problem := value_problem(record):
        raise ConfigError(f"{where}: {problem}")
    try:
        attrs = Attributes.from_mapping({k: v for k, v in record.items() if k not in FILE_KEYS},
                                         source="catalogue")
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    return Path(key.strip()).as_posix().removeprefix("./"), attrs
