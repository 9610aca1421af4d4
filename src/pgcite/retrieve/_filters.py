"""Hard filters, compiled to SQL for both legs. Values are always bound parameters.

A filter on a metadata key the snapshot has never seen, or with a value of a type that key never
holds, is an error (not an empty result): a typo must not look like "no passages".
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from psycopg import sql
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pgcite._errors import FilterError, InvalidFilter
from pgcite._inputs import (
    MAX_ENTITIES,
    MAX_IN_VALUES,
    MAX_PREDICATES,
    Name,
    Names,
    Scalar,
    excerpt,
    first_problem,
)
from pgcite.store._entities import entity_key, entity_keys_sql

Op = Literal["eq", "in", "lt", "lte", "gt", "gte", "exists"]
_COMPARE = {"lt": "<", "lte": "<=", "gt": ">", "gte": ">="}
_JSON_TYPE = {bool: "boolean", int: "number", float: "number", str: "string"}


class MetadataPredicate(BaseModel):
    """A predicate on one key of a chunk's ``metadata``: a key of at most 200 characters, a
    value that is a string (at most 1000 characters), a finite number, a boolean, or for ``in``
    a list of at most 100 of them (pgcite/_inputs.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: Name
    op: Op = "eq"
    value: Scalar | Annotated[list[Scalar], Field(max_length=MAX_IN_VALUES)] | None = None


class Filters(BaseModel):
    """What a query may see. Every field narrows; none widens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    corpora: Names | None = None
    cutoff: dt.date | None = None  # only chunks whose date_end is on or before it
    authors: Names | None = None
    sources: Names | None = None
    metadata: list[MetadataPredicate] = Field(default_factory=list, max_length=MAX_PREDICATES)
    # passages that mention every one of these entities (any spelling its aliases know)
    entity: Annotated[list[Name], Field(max_length=MAX_ENTITIES)] | None = None

    @field_validator("entity", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


def _json_type(value: Any) -> str:
    for kind, name in _JSON_TYPE.items():
        if isinstance(value, kind):
            return name
    raise FilterError(f"unsupported filter value {value!r}")


def _check_predicate(pred: MetadataPredicate, fields: dict[str, list[str]]) -> None:
    if pred.key not in fields:
        known = ", ".join(sorted(fields)) or "(none)"
        raise FilterError(
            f"unknown metadata field {pred.key!r}",
            hint=f"fields in this collection's active snapshot: {known}",
        )
    if pred.op == "exists":
        return
    if pred.value is None:
        raise FilterError(f"filter {pred.key!r} {pred.op}: expects a value",
                          hint="a string, a finite number or a boolean (a list for 'in')")
    values = pred.value if isinstance(pred.value, list) else [pred.value]
    if pred.op == "in" and not isinstance(pred.value, list):
        raise FilterError(f"filter {pred.key!r} in: expects a list of values")
    if pred.op != "in" and isinstance(pred.value, list):
        raise FilterError(f"filter {pred.key!r} {pred.op}: expects one value, not a list")
    for value in values:
        kind = _json_type(value)
        if kind not in fields[pred.key]:
            raise FilterError(
                f"filter {pred.key!r}: value {excerpt(repr(value), 60)} is a {kind}, but the "
                "field holds "
                + " or ".join(fields[pred.key]),
            )
    if pred.op in _COMPARE and _json_type(values[0]) == "boolean":
        raise FilterError(f"filter {pred.key!r}: {pred.op} does not apply to booleans")


class CompiledFilter:
    """SQL (over alias ``c``) plus its named parameters."""

    def __init__(self) -> None:
        self.clauses: list[sql.Composable] = []
        self.params: dict[str, Any] = {}

    def add(self, clause: str, parts: dict[str, sql.Composable] | None = None,
            **params: Any) -> None:
        """``clause`` with ``{name}`` placeholders for ``params`` (bound values) and for
        ``parts`` (SQL composed elsewhere, such as a schema identifier)."""
        names = {key: f"f{len(self.params) + i}" for i, key in enumerate(params)}
        for key, name in names.items():
            self.params[name] = params[key]
        placeholders = {key: sql.Placeholder(name) for key, name in names.items()}
        self.clauses.append(sql.SQL(clause).format(**placeholders, **(parts or {})))

    def bind(self, value: Any) -> sql.Placeholder:
        """A named placeholder for ``value``, for a clause composed with ``parts``."""
        name = f"f{len(self.params)}"
        self.params[name] = value
        return sql.Placeholder(name)

    def sql(self) -> sql.Composable:
        if not self.clauses:
            return sql.SQL("true")
        return sql.SQL(" AND ").join(sql.SQL("({})").format(c) for c in self.clauses)


def compile_filters(filters: Filters, fields: dict[str, list[str]],
                    schema: sql.Identifier | None = None) -> CompiledFilter:
    """Check ``filters`` against the snapshot's metadata fields and compile them (an entity
    filter needs the collection's ``schema``: it reads the chunk_entities table)."""
    out = CompiledFilter()
    if filters.corpora is not None:
        out.add("c.corpus = ANY({v})", v=filters.corpora)
    if filters.cutoff is not None:
        out.add("c.date_end <= {v}", v=filters.cutoff)
    if filters.authors is not None:
        out.add("c.author = ANY({v})", v=filters.authors)
    if filters.sources is not None:
        out.add("c.source = ANY({v})", v=filters.sources)
    for pred in filters.metadata:
        _check_predicate(pred, fields)
        _compile_predicate(out, pred)
    for name in filters.entity or ():
        if schema is None:
            raise FilterError("an entity filter needs the collection (internal: no schema)")
        if not (key := entity_key(name)):
            raise FilterError(f"bad filter: {excerpt(repr(name), 60)} names no entity (only titles "
                              "or punctuation)", hint=_FILTER_HINT)
        _compile_entity(out, schema, key)
    return out


def _compile_entity(out: CompiledFilter, schema: sql.Identifier, key: str) -> None:
    """The chunk mentions the entity under one of the keys that resolve to its canonical key."""
    out.add("EXISTS (SELECT 1 FROM {s}.chunk_entities ce WHERE ce.chunk_pk = c.chunk_pk"
            " AND ce.key IN {keys})",
            parts={"s": schema, "keys": entity_keys_sql(schema, out.bind(key))})


def _compile_predicate(out: CompiledFilter, pred: MetadataPredicate) -> None:
    if pred.op == "exists":
        out.add("c.metadata ? {k}", k=pred.key)
    elif pred.op == "eq":
        out.add("c.metadata @> {v}", v=Jsonb({pred.key: pred.value}))
    elif pred.op == "in":
        out.add("{vs} @> jsonb_build_array(c.metadata -> {k})", vs=Jsonb(pred.value), k=pred.key)
    elif isinstance(pred.value, str):
        out.add(
            f"CASE WHEN jsonb_typeof(c.metadata -> {{k}}) = 'string'"
            f" THEN (c.metadata ->> {{k2}}) {_COMPARE[pred.op]} {{v}} ELSE false END",
            k=pred.key, k2=pred.key, v=pred.value,
        )
    else:
        out.add(
            f"CASE WHEN jsonb_typeof(c.metadata -> {{k}}) = 'number'"
            f" THEN (c.metadata ->> {{k2}})::numeric {_COMPARE[pred.op]} {{v}} ELSE false END",
            k=pred.key, k2=pred.key, v=pred.value,
        )


_FILTER_RE = re.compile(r"^([A-Za-z_][\w.\-]*)\s*(>=|<=|!?=|<|>|:in=|:exists)\s*(.*)$")


def _coerce(key: str, text: Any, types: list[str]) -> Any:
    """A CLI value (always text) as the JSON type the field holds."""
    if not isinstance(text, str) or "string" in types:
        return text
    if "number" in types:
        try:
            return int(text)
        except ValueError:  # not an integer, or one of over 4,300 digits
            try:
                number = float(text)
            except ValueError:
                number = math.nan
            if not math.isfinite(number):  # nan, inf, 1e999999: no JSON number, anywhere
                raise InvalidFilter(f"filter {key!r}: {excerpt(repr(text), 60)} is not a "
                                    "finite number", hint=_FILTER_HINT) from None
            return number
    if "boolean" in types and text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def coerce_predicates(
    preds: list[MetadataPredicate], fields: dict[str, list[str]]
) -> list[MetadataPredicate]:
    """Give text values from the command line the type their field holds."""
    out = []
    for pred in preds:
        types = fields.get(pred.key, [])
        value = pred.value
        if isinstance(value, list):
            value = [_coerce(pred.key, v, types) for v in value]
        elif value is not None:
            value = _coerce(pred.key, value, types)
        out.append(pred.model_copy(update={"value": value}))
    return out


def parse_filter_args(items: list[str]) -> tuple[dict[str, list[str]], list[MetadataPredicate]]:
    """CLI ``--filter`` strings: ``key=value``, ``key>=1665``, ``key:in=a,b``, ``key:exists``.

    ``author=…`` and ``source=…`` go to the column filters; other keys to metadata.
    """
    columns: dict[str, list[str]] = {}
    preds: list[MetadataPredicate] = []
    ops = {"=": "eq", ">=": "gte", "<=": "lte", "<": "lt", ">": "gt", ":in=": "in",
           ":exists": "exists"}
    for item in items:
        match = _FILTER_RE.match(item.strip())
        if not match or match[2] == "!=":
            raise FilterError(
                f"cannot read filter {item!r}",
                hint="use key=value, key>=value, key<value, key:in=a,b or key:exists",
            )
        key, op, raw = match[1], ops[match[2]], match[3].strip()
        if key in ("author", "source") and op == "eq":
            columns.setdefault(key, []).append(raw)
            continue
        value: Any = None  # text here; coerce_predicates gives it the field's type
        if op == "in":
            value = [part.strip() for part in raw.split(",") if part.strip()]
        elif op != "exists":
            value = raw
        try:
            preds.append(MetadataPredicate(key=key, op=op, value=value))  # type: ignore[arg-type]
        except ValidationError as exc:  # a key over 200 characters, a NUL in a value …
            raise InvalidFilter(f"bad filter: {first_problem(exc)}", hint=_FILTER_HINT) from None
    return columns, preds


def filters_from_args(items: Sequence[str], fields: Callable[[], dict[str, list[str]]],
                      **given: Any) -> Filters:
    """The Filters of ``--filter`` strings (the CLI's, the inspector's) together with the other
    fields ``given`` (corpora, cutoff, entity): each value typed by the metadata fields of the
    snapshot searched (``fields()``, read only when a predicate needs them). A malformed value
    is an :class:`InvalidFilter`, never pydantic's report."""
    columns, preds = parse_filter_args(list(items))
    if preds:
        preds = coerce_predicates(preds, fields())
    return merge_filters(dict(given, authors=columns.get("author"), sources=columns.get("source"),
                              metadata=preds), None, None, None)


def merge_filters(
    filters: Filters | dict[str, Any] | None,
    cutoff: dt.date | str | None,
    corpora: Sequence[str] | None,
    metadata: Sequence[MetadataPredicate] | None,
) -> Filters:
    """``filters`` (a model or a dict) with the ``cutoff``/``corpora``/``metadata`` shorthands.

    A malformed value (a cutoff that is not a date, an unknown field) is a FilterError naming it,
    not pydantic's or datetime's exception: Python callers get the same clear error as the CLI.
    """
    try:
        base = filters if isinstance(filters, Filters) else Filters.model_validate(filters or {})
        update: dict[str, Any] = {}
        if cutoff is not None:
            update["cutoff"] = dt.date.fromisoformat(cutoff) if isinstance(cutoff, str) else cutoff
        if corpora is not None:
            update["corpora"] = list(corpora)
        if metadata:
            update["metadata"] = [*base.metadata, *metadata]
        return Filters.model_validate({**base.model_dump(), **update}) if update else base
    except ValidationError as exc:
        raise InvalidFilter(f"bad filter: {first_problem(exc, 'filters')}",
                            hint=_FILTER_HINT) from None
    except (ValueError, TypeError) as exc:  # date.fromisoformat on a string that is no date
        raise InvalidFilter(f"bad filter: cutoff {excerpt(repr(cutoff), 40)}: {exc}",
                            hint=_FILTER_HINT) from None


_FILTER_HINT = ("cutoff is a date (YYYY-MM-DD); corpora, authors and sources are lists of "
                "strings; metadata predicates are key/op/value (docs/retrieval.md)")
