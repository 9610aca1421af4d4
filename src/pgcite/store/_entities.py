"""Named entities per chunk: normalised keys, their storage, and the collection's aliases.

A mention is stored under its *key*: the name without titles, punctuation or case ("Sir W.
Penn" and "Sir W. Penn's" -> "w penn"; "my Lord Sandwich" -> "sandwich"). Aliases map keys to a
canonical key at query time -- from a user's alias list, or an initial matched to the one full
first name with that surname in the collection ("w penn" -> "william penn") -- so every query
resolves ``coalesce(alias.canonical, key)`` in SQL and the rows themselves never change.
"""

from __future__ import annotations

import csv
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from pgcite._errors import ConfigError
from pgcite.store._collections import CollectionInfo

# Leading words that address a person rather than name them: dropped from the key. Ranks that
# are part of a name ("Duke of York", "King Charles") stay.
TITLES = frozenset({
    "mr", "mrs", "mris", "ms", "miss", "sir", "lord", "lady", "dr", "doctor", "master",
    "madam", "madame", "mistress", "capt", "captain", "col", "colonel", "my", "the", "dame",
    "monsieur", "mme", "mlle", "herr", "frau", "señor", "senor", "don", "dona", "doña",
})
_TOKEN = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*", re.UNICODE)
_POSSESSIVE = re.compile(r"['’]s$")
MAX_KEY_LENGTH = 200


def entity_key(name: str) -> str:
    """The normalised key of a name ('' when nothing but titles is left)."""
    text = unicodedata.normalize("NFKC", name).casefold()
    tokens = [_POSSESSIVE.sub("", t) for t in _TOKEN.findall(text)]
    while tokens and tokens[0] in TITLES:
        tokens = tokens[1:]
    return " ".join(t for t in tokens if t)[:MAX_KEY_LENGTH]


@dataclass(frozen=True)
class Mention:
    """One entity of a chunk: its key, the model's label and the first mention as written."""

    key: str
    label: str
    text: str
    count: int = 1


def insert_chunk_entities(conn: psycopg.Connection, info: CollectionInfo, version_pk: int,
                          by_ordinal: Mapping[int, Sequence[Mention]],
                          model: str | None) -> int:
    """Store a version's entities (chunks looked up by ordinal) and which model read it."""
    return insert_entities(conn, info, {version_pk: by_ordinal}, model)


def insert_entities(conn: psycopg.Connection, info: CollectionInfo,
                    versions: Mapping[int, Mapping[int, Sequence[Mention]]],
                    model: str | None) -> int:
    """Store the entities of many versions (version_pk -> chunk ordinal -> mentions) and which
    model read each, in two statements; returns how many (chunk, entity) rows it wrote."""
    if not versions:
        return 0
    conn.execute(sql.SQL(
        "INSERT INTO {s}.entity_runs (version_pk, model) SELECT unnest(%s::bigint[]), %s"
        " ON CONFLICT (version_pk) DO NOTHING").format(s=info.schema_id),
        (list(versions), model))
    rows = [(pk, ordinal, m.key, m.label, m.text[:MAX_KEY_LENGTH], m.count)
            for pk, by_ordinal in versions.items()
            for ordinal, mentions in by_ordinal.items() for m in mentions]
    if not rows:
        return 0
    columns = list(zip(*rows, strict=True))
    conn.execute(sql.SQL(
        "INSERT INTO {s}.chunk_entities (chunk_pk, key, label, mention, mentions)"
        " SELECT c.chunk_pk, e.key, e.label, e.mention, e.mentions"
        " FROM unnest(%s::bigint[], %s::int[], %s::text[], %s::text[], %s::text[], %s::int[])"
        " AS e(version_pk, ordinal, key, label, mention, mentions)"
        " JOIN {s}.chunks c ON c.version_pk = e.version_pk AND c.ordinal = e.ordinal"
        " ON CONFLICT DO NOTHING").format(s=info.schema_id), [list(c) for c in columns])
    return len(rows)


def read_alias_file(path: Path) -> dict[str, list[str]]:
    """A user's alias list: canonical name -> its other spellings.

    YAML (``.yaml``/``.yml``): a mapping ``"Sir William Penn": ["Sir W. Pen", "Sir W. Penn"]``.
    CSV: rows ``canonical,alias[,alias…]`` (a header row starting with ``canonical`` is skipped).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read alias list {path}: {exc.strerror or exc}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        return _yaml_aliases(path, text)
    if path.suffix.lower() == ".csv":
        out: dict[str, list[str]] = {}
        for row in csv.reader(text.splitlines()):
            cells = [cell.strip() for cell in row if cell.strip()]
            if len(cells) < 2 or cells[0].casefold() == "canonical":
                continue
            out.setdefault(cells[0], []).extend(cells[1:])
        return out
    raise ConfigError(f"alias list {path}: use a .yaml or .csv file",
                      hint="docs/ingest.md, 'Entities'")


def _yaml_aliases(path: Path, text: str) -> dict[str, list[str]]:
    import yaml

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"alias list {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"alias list {path}: expected a mapping of canonical name -> aliases")
    out: dict[str, list[str]] = {}
    for canonical, aliases in data.items():
        values = aliases if isinstance(aliases, list) else [aliases]
        if not isinstance(canonical, str) or not all(isinstance(a, str) for a in values):
            raise ConfigError(f"alias list {path}: {canonical!r} must map to a list of names")
        out[canonical] = list(values)
    return out


def alias_keys(aliases: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """alias key -> canonical key, from canonical name -> spellings (self-maps dropped)."""
    out: dict[str, str] = {}
    for canonical, spellings in aliases.items():
        target = entity_key(canonical)
        if not target:
            raise ConfigError(f"alias list: {canonical!r} is no name (only titles)")
        for spelling in spellings:
            key = entity_key(spelling)
            if key and key != target:
                out[key] = target
    return out


def save_user_aliases(conn: psycopg.Connection, info: CollectionInfo,
                      aliases: Mapping[str, str]) -> None:
    """Add (or replace) a user's aliases; a user alias wins over a derived one."""
    with conn.cursor() as cur:
        cur.executemany(sql.SQL(
            "INSERT INTO {s}.entity_aliases (alias, canonical, origin) VALUES (%s, %s, 'user')"
            " ON CONFLICT (alias) DO UPDATE SET canonical = EXCLUDED.canonical, origin = 'user'"
        ).format(s=info.schema_id), list(aliases.items()))


# An initial and a surname ("w penn") -> the one "<first name> <surname>" key of the collection
# whose first name starts with that initial, where exactly one does. Both resolved through the
# user's aliases first, so "w pen" -> "w penn" (user) does not also get its own guess.
_DERIVE_INITIALS = """
WITH keys AS (SELECT DISTINCT key FROM {s}.chunk_entities
              WHERE key ~ '^[[:alpha:]]+ [[:alpha:]''’-]+$'
                AND key NOT IN (SELECT alias FROM {s}.entity_aliases WHERE origin = 'user')),
initials AS (SELECT key, split_part(key, ' ', 1) AS first, split_part(key, ' ', 2) AS surname
             FROM keys WHERE length(split_part(key, ' ', 1)) = 1),
fulls AS (SELECT key, split_part(key, ' ', 1) AS first, split_part(key, ' ', 2) AS surname
          FROM keys WHERE length(split_part(key, ' ', 1)) > 1),
matched AS (SELECT i.key AS alias, min(f.key) AS canonical
            FROM initials i JOIN fulls f
              ON f.surname = i.surname AND left(f.first, 1) = i.first
            GROUP BY i.key HAVING count(*) = 1)
INSERT INTO {s}.entity_aliases (alias, canonical, origin)
SELECT alias, canonical, 'initials' FROM matched
ON CONFLICT (alias) DO NOTHING
"""


def derive_initial_aliases(conn: psycopg.Connection, info: CollectionInfo) -> int:
    """Recompute the collection's initial -> full-name aliases (user aliases are kept)."""
    conn.execute(sql.SQL("DELETE FROM {s}.entity_aliases WHERE origin = 'initials'").format(
        s=info.schema_id))
    cur = conn.execute(sql.SQL(_DERIVE_INITIALS).format(s=info.schema_id))
    # one step of resolution at query time: a derived alias points past a user alias
    conn.execute(sql.SQL(
        "UPDATE {s}.entity_aliases a SET canonical = u.canonical FROM {s}.entity_aliases u"
        " WHERE a.origin = 'initials' AND u.alias = a.canonical AND u.canonical <> a.alias"
    ).format(s=info.schema_id))
    return cur.rowcount


def canonical_sql(schema: sql.Identifier, key: sql.Composable) -> sql.Composed:
    """SQL for the canonical key of ``key`` (an expression): its alias target, else itself."""
    return sql.SQL("coalesce((SELECT a.canonical FROM {s}.entity_aliases a WHERE a.alias = {k}),"
                   " {k})").format(s=schema, k=key)


def entity_keys_sql(schema: sql.Identifier, key: sql.Composable) -> sql.Composed:
    """SQL for the set of keys that mean the same entity as ``key`` (an expression): its
    canonical key and every alias of it -- so an index on chunk_entities.key finds them."""
    canonical = canonical_sql(schema, key)
    return sql.SQL("(SELECT {c} UNION SELECT a.alias FROM {s}.entity_aliases a"
                   " WHERE a.canonical = {c})").format(s=schema, c=canonical)
