"""Exhibits: a figure's archive as visitors meet it (docs/exhibits.md).

An exhibit is a named set of settings on one collection -- the figure (persona), a hard date
cutoff, the corpora it may quote, the texts it answers with, a greeting, suggested questions,
a language and a writing direction. Its definitions are versioned in the collection's schema
(every change a new row; deletion is a row too), and ``pgcite.exhibit_names`` makes a name
unique across collections, since visitors reach an exhibit by name alone (``/exhibit/{name}``).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from pgcite._errors import ConfigError, ExhibitExists, ExhibitNotFound
from pgcite.store._collections import CollectionInfo

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
# Languages written right to left (BCP 47 primary subtags): "auto" picks rtl for these.
RTL_LANGUAGES = frozenset({"ar", "arc", "ckb", "dv", "fa", "he", "ks", "ku", "ps", "sd", "ug",
                           "ur", "yi"})
_LANGUAGE = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
_LABEL_KEY = re.compile(r"^[a-z][a-z_]{0,39}$")
MAX_QUESTIONS = 12


def _text(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value.strip()


def _no_brackets(value: str | None) -> str | None:
    if value is not None and ("[" in value or "]" in value):
        raise ValueError("must not contain [ or ]: square brackets are reserved for citations")
    return value


Line = Annotated[str, AfterValidator(_text), Field(min_length=1, max_length=200)]
Question = Annotated[str, AfterValidator(_text), Field(min_length=1, max_length=500)]
Paragraph = Annotated[str, AfterValidator(_text), Field(min_length=1, max_length=2000)]
AnswerText = Annotated[Paragraph, AfterValidator(_no_brackets)]


class ExhibitSettings(BaseModel):
    """What an exhibit is. Every field narrows what a visitor's question may reach or says how
    the page speaks; none can be set by the visitor."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: Line | None = Field(default=None, description="the page's heading (default: the "
                               "persona's name, else the exhibit's name)")
    persona: Line | None = Field(default=None, description="the figure: answers speak as her, "
                                 "in the first person only over passages she wrote")
    cutoff: dt.date | None = Field(default=None, description="hard: nothing dated after it is "
                                   "quoted, shown as a neighbour or as a page")
    corpora: Annotated[list[Line], Field(min_length=1, max_length=50)] | None = Field(
        default=None, description="hard: only passages of these corpora (her own words, "
        "others' accounts …); None: every corpus")
    greeting: Paragraph | None = None
    questions: Annotated[list[Question], Field(max_length=MAX_QUESTIONS)] = Field(
        default_factory=list, description="suggested questions, shown as buttons")
    language: str = Field(default="en", description="BCP 47 tag of the page (en, ar, fr-CA …)")
    direction: Literal["auto", "ltr", "rtl"] = Field(
        default="auto", description="auto: right to left for Arabic, Hebrew, Persian, Urdu …")
    abstention_text: AnswerText | None = Field(
        default=None, description="the answer when the archive does not say (default: 'I did "
        "not write about that.' with a persona)")
    attribution_fallback: AnswerText | None = Field(
        default=None, description="the answer when a draft spoke another author's words as "
        "the persona's own (default: the abstention text)")
    labels: dict[str, Annotated[str, AfterValidator(_text), Field(max_length=300)]] = Field(
        default_factory=dict, description="the page's own words, by key (docs/exhibits.md, "
        "'Labels'), over the built-in English or Arabic ones")

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        if not _LANGUAGE.fullmatch(value):
            raise ValueError("a BCP 47 language tag, e.g. en, ar, fr-CA")
        return value

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > 40 or any(not _LABEL_KEY.fullmatch(k) for k in value):
            raise ValueError("at most 40 labels, keys of lowercase letters and _")
        return value

    def resolved_direction(self) -> Literal["ltr", "rtl"]:
        if self.direction != "auto":
            return self.direction
        return "rtl" if self.language.split("-")[0].lower() in RTL_LANGUAGES else "ltr"


class ExhibitInfo(BaseModel):
    """An exhibit as stored: its settings in force and which version of them."""

    model_config = ConfigDict(frozen=True)

    name: str
    collection: str
    version: int
    settings: ExhibitSettings
    created_at: dt.datetime = Field(description="when this version was defined")

    @property
    def title(self) -> str:
        return self.settings.title or self.settings.persona or self.name


def validate_exhibit_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(f"invalid exhibit name {name!r}", hint="use 1-63 characters: "
                          "lowercase letters, digits and -, starting with a letter or digit")
    return name


def settings_of(fields: dict[str, Any]) -> ExhibitSettings:
    """``fields`` as settings, a bad one a ConfigError naming it (not pydantic's exception)."""
    from pydantic import ValidationError

    try:
        return ExhibitSettings.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "settings"
        raise ConfigError(f"exhibit {where}: {first['msg']}") from None


_LOCK = 0x70676578  # "pgex": one writer of the exhibit directory at a time


def directory_collection(conn: psycopg.Connection, name: str) -> str:
    """The collection an exhibit is on (ExhibitNotFound for an unknown name)."""
    validate_exhibit_name(name)
    row = conn.execute("SELECT collection FROM pgcite.exhibit_names WHERE name = %s",
                       (name,)).fetchone()
    if row is None:
        raise ExhibitNotFound(f"no exhibit named {name!r}")
    return str(row[0])


async def adirectory_collection(conn: psycopg.AsyncConnection, name: str) -> str:
    """:func:`directory_collection` on an async connection."""
    validate_exhibit_name(name)
    cur = await conn.execute("SELECT collection FROM pgcite.exhibit_names WHERE name = %s",
                             (name,))
    row = await cur.fetchone()
    if row is None:
        raise ExhibitNotFound(f"no exhibit named {name!r}")
    return str(row[0])


def save_exhibit(conn: psycopg.Connection, info: CollectionInfo, name: str,
                 settings: ExhibitSettings, *, replace: bool = False) -> ExhibitInfo:
    """Define ``name`` on ``info`` (a new version when ``replace`` and it exists), in the
    caller's transaction."""
    validate_exhibit_name(name)
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
    row = conn.execute("SELECT collection FROM pgcite.exhibit_names WHERE name = %s",
                       (name,)).fetchone()
    if row is not None and row[0] != info.name:
        raise ExhibitExists(f"exhibit {name!r} is defined on collection {row[0]!r}",
                            hint="exhibit names are unique across collections")
    if row is not None and not replace:
        raise ExhibitExists(f"exhibit {name!r} exists already",
                            hint="pass replace (--replace) to define a new version of it")
    if row is None:
        conn.execute("INSERT INTO pgcite.exhibit_names (name, collection) VALUES (%s, %s)",
                     (name, info.name))
    stored = conn.execute(sql.SQL(
        "INSERT INTO {s}.exhibits (name, version, settings) SELECT %(n)s,"
        " coalesce((SELECT max(version) FROM {s}.exhibits WHERE name = %(n)s), 0) + 1, %(j)s"
        " RETURNING version, created_at").format(s=info.schema_id),
        {"n": name, "j": Jsonb(settings.model_dump(mode="json", exclude_defaults=True))},
    ).fetchone()
    assert stored is not None
    return ExhibitInfo(name=name, collection=info.name, version=stored[0], settings=settings,
                       created_at=stored[1])


_CURRENT = sql.SQL(
    "SELECT DISTINCT ON (name) name, version, settings, deleted, created_at FROM {s}.exhibits"
    " WHERE %(n)s::text IS NULL OR name = %(n)s ORDER BY name, version DESC")


def _info(info: CollectionInfo, row: tuple[Any, ...]) -> ExhibitInfo:
    name, version, settings, _, created_at = row
    return ExhibitInfo(name=name, collection=info.name, version=version,
                       settings=ExhibitSettings.model_validate(settings), created_at=created_at)


def list_exhibits(conn: psycopg.Connection, info: CollectionInfo) -> list[ExhibitInfo]:
    """The exhibits in force on ``info``, by name."""
    rows = conn.execute(_CURRENT.format(s=info.schema_id), {"n": None}).fetchall()
    return [_info(info, r) for r in rows if not r[3]]


def get_exhibit(conn: psycopg.Connection, info: CollectionInfo, name: str) -> ExhibitInfo:
    """The exhibit ``name`` of ``info`` as in force now."""
    validate_exhibit_name(name)
    row = conn.execute(_CURRENT.format(s=info.schema_id), {"n": name}).fetchone()
    if row is None or row[3]:
        raise ExhibitNotFound(f"no exhibit named {name!r} on collection {info.name!r}",
                              hint=f"see `pgcite exhibit list --collection {info.name}`")
    return _info(info, row)


async def aget_exhibit(conn: psycopg.AsyncConnection, info: CollectionInfo,
                       name: str) -> ExhibitInfo:
    """:func:`get_exhibit` on an async connection."""
    cur = await conn.execute(_CURRENT.format(s=info.schema_id), {"n": name})
    row = await cur.fetchone()
    if row is None or row[3]:
        raise ExhibitNotFound(f"no exhibit named {name!r}")
    return _info(info, row)


def delete_exhibit(conn: psycopg.Connection, info: CollectionInfo, name: str) -> ExhibitInfo:
    """Retire ``name`` (its history stays, as a deleted version) and delete its visitor keys,
    in the caller's transaction; returns the definition that was in force."""
    current = get_exhibit(conn, info, name)
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
    conn.execute(sql.SQL(
        "INSERT INTO {s}.exhibits (name, version, settings, deleted)"
        " VALUES (%s, %s, %s, true)").format(s=info.schema_id),
        (name, current.version + 1, Jsonb(current.settings.model_dump(
            mode="json", exclude_defaults=True))))
    conn.execute("DELETE FROM pgcite.exhibit_names WHERE name = %s", (name,))
    return current
