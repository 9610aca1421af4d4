"""The entity path of retrieval: the entities a query names, the boost they give the passages
that mention them, and the co-occurrence graph (``pgcite entities``).

Everything here reads one snapshot's member chunks under the request's compiled filters, in
SQL: an entity, an edge or a count can only come from passages the same search could return,
so the graph never knows of a passage after the cutoff or outside the allowed corpora.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Sequence
from typing import Any, Literal

import psycopg
from psycopg import sql
from pydantic import ConfigDict, Field

from pgcite._camel import CAMEL, CamelModel
from pgcite.retrieve._filters import CompiledFilter, Filters, compile_filters
from pgcite.retrieve._hits import Hit
from pgcite.retrieve._route import EntityAsk, entity_ask
from pgcite.store._collections import CollectionInfo
from pgcite.store._entities import TITLES, canonical_sql, entity_key, entity_keys_sql
from pgcite.store._snapshots import SnapshotInfo

# The chunks a request may see: the snapshot's members under its filters (alias c).
# The passages a request may see: its snapshot's chunks under its filters (cutoff, corpora,
# metadata). Every entity path that reads passages goes through this one predicate.
_VISIBLE_WHERE = """c.version_pk IN (SELECT version_pk FROM {s}.snapshot_members
                     WHERE snapshot_id = %(snapshot_id)s)
  AND {filters}"""
_VISIBLE = """
visible AS (
    SELECT c.chunk_pk, c.id, c.date_end FROM {s}.chunks c WHERE {where_visible} AND {naming}
), mentions AS (
    -- one row per (passage, entity): two spellings of one entity in a passage count once
    SELECT v.chunk_pk, v.id, v.date_end, {canonical} AS entity, min(ce.label) AS label,
           min(ce.mention) AS mention, sum(ce.mentions)::bigint AS mentions
    FROM visible v JOIN {s}.chunk_entities ce USING (chunk_pk)
    GROUP BY v.chunk_pk, v.id, v.date_end, entity
)"""

Kind = Literal["any", "person", "place", "organisation"]
KINDS: tuple[str, ...] = ("any", "person", "place", "organisation")
KIND_LABELS: dict[str, tuple[str, ...]] = {
    "person": ("PERSON", "PER"),
    "place": ("GPE", "LOC", "FAC"),
    "organisation": ("ORG", "NORP"),
}
MAX_NGRAM = 4
# An entity in more than this share of the visible passages (the diarist himself) says
# nothing about which passage a query wants: it neither boosts nor counts as a query entity.
# (Only from MIN_PASSAGES visible passages on: in a handful, any name is in a large share.)
MAX_SHARE = 0.2
MIN_PASSAGES = 50
# Lowercase words that join the capitalised words of one name ("Duke of York", "Siege of
# Rhodes", "Vincent de Paul").
_CONNECTORS = frozenset({"of", "the", "de", "la", "le", "du", "des", "van", "von", "der", "da",
                         "di"})
# Month and weekday names are capitalised but name a date, not a person or place: "Who did
# Pepys dine with in June 1665?" asks nothing of an entity "June" (spaCy tags such words PERSON
# or ORG now and then, so the name would match). After a title they are a name ("Mr. May").
_CALENDAR = frozenset({
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
    "sept", "oct", "nov", "dec", "monday", "tuesday", "wednesday", "thursday", "friday",
    "saturday", "sunday"})
_WORD = re.compile(r"[^\W_]+(?:['’.-][^\W_]+)*\.?", re.UNICODE)


class QueryEntity(CamelModel):
    """An entity the query names: its canonical key, how it was written, and in how many
    visible passages it appears (its weight is the idf of that count)."""

    model_config = ConfigDict(**CAMEL, frozen=True)

    key: str
    text: str
    chunks: int
    idf: float


class RelatedEntity(CamelModel):
    """An entity of the graph: its canonical key, its most frequent spelling and label, in how
    many visible passages it appears (with the anchor, for ``near``), and those passages'
    citation ids (oldest first; at most ``citations``)."""

    model_config = ConfigDict(**CAMEL, frozen=True)

    key: str
    name: str
    label: str
    chunks: int = Field(description="passages that mention it (with the anchor, for near)")
    mentions: int
    citations: list[str]


class EntityEdge(CamelModel):
    """Two entities mentioned in the same passages: the weight is how many, backed by ids."""

    model_config = ConfigDict(**CAMEL, frozen=True)

    source: str
    target: str
    weight: int
    citations: list[str]


class EntitiesResult(CamelModel):
    """``pgcite entities``: ranked entities (near one, or overall) under the filters, and the
    heaviest co-occurrence edges when asked for, all from one snapshot."""

    model_config = ConfigDict(**CAMEL, frozen=True)

    collection: str
    snapshot_id: int
    near: str | None = None
    near_key: str | None = Field(default=None, description="the canonical key near resolved to")
    entities: list[RelatedEntity]
    edges: list[EntityEdge] = Field(default_factory=list)
    models: list[str | None] = Field(
        default_factory=list, description="the entity models that read the snapshot's "
        "documents (null: a document read by none, so it has no entities)")


def _where_visible(info: CollectionInfo, compiled: CompiledFilter) -> sql.Composed:
    return sql.SQL(_VISIBLE_WHERE).format(s=info.schema_id, filters=compiled.sql())


def _visible(info: CollectionInfo, snapshot: SnapshotInfo, filters: Filters,
             naming: sql.Composable | None = None) -> tuple[sql.Composed, CompiledFilter]:
    """The visible and mentions CTEs; ``naming``: only the passages that name one of a set of
    stored keys (an expression for that set), found through the key index -- what ``near``
    reads, so it never groups the entities of every visible passage."""
    compiled = compile_filters(filters, snapshot.metadata_fields or {}, info.schema_id)
    where_naming: sql.Composable = sql.SQL("true") if naming is None else sql.SQL(
        "c.chunk_pk IN (SELECT n.chunk_pk FROM {s}.chunk_entities n WHERE n.key IN {keys})"
    ).format(s=info.schema_id, keys=naming)
    ctes = sql.SQL(_VISIBLE).format(
        s=info.schema_id, where_visible=_where_visible(info, compiled), naming=where_naming,
        canonical=canonical_sql(info.schema_id, sql.SQL("ce.key")))
    return ctes, compiled


def query_candidates(query: str) -> list[str]:
    """The keys of every run of 1-4 words of the query that could be a name, longest first.

    In a query with capitals a name is a whole capitalised phrase ("Sir W. Penn", "Siege of
    Rhodes": capitalised words, joined by "of", "de" ...) or its tail after leading titles
    ("Lord Mayor Bludworth" -> "Bludworth") -- never a piece inside a longer name ("King
    Charles" of "King Charles II") nor what follows its "of" ("London" of "Great Fire of
    London"): those name something else than the phrase does, and boosting them lowered
    fact questions on the Pepys golden set (bench/results/entities/report.md). Without any
    capital every run counts. A month or weekday name is never a name of its own ("June",
    "Monday"): it dates the question, it does not name whom it is about."""
    words = _WORD.findall(query)
    if not any(w[:1].isupper() for w in words):
        runs = [words[start: start + n] for n in range(MAX_NGRAM, 0, -1)
                for start in range(len(words) - n + 1)]
    else:
        runs = sorted((tail for phrase in _capitalised_phrases(words)
                       for tail in _tails(phrase)), key=len, reverse=True)
    keys: list[str] = []
    for run in runs:
        if all(_is_date_word(word, "") for word in run):
            continue
        key = entity_key(" ".join(run))
        if key and key not in keys and not key.isdigit():
            keys.append(key)
    return keys


def _capitalised_phrases(words: list[str]) -> list[list[str]]:
    """Maximal runs of capitalised words, a lowercase connector inside one ("of") included."""
    phrases: list[list[str]] = []
    current: list[str] = []
    for i, word in enumerate(words):
        if word[:1].isupper() and not _is_date_word(word, words[i - 1] if i else ""):
            current.append(word)
            continue
        joins = (word in _CONNECTORS and bool(current) and i + 1 < len(words)
                 and words[i + 1][:1].isupper())
        if joins:
            current.append(word)
            continue
        if current:
            phrases.append(current)
        current = []
    if current:
        phrases.append(current)
    return phrases


def _is_date_word(word: str, before: str) -> bool:
    """A month or weekday name ("June", "Monday", "Sept."), unless a title comes before it."""
    return (word.rstrip(".").casefold() in _CALENDAR
            and before.rstrip(".").casefold() not in TITLES)


def _tails(phrase: list[str]) -> list[list[str]]:
    """The phrase and its tails of at most MAX_NGRAM words, none starting at or after a
    connector (its head comes before the "of")."""
    return [phrase[start:] for start in range(len(phrase))
            if len(phrase) - start <= MAX_NGRAM
            and not (phrase[start] in _CONNECTORS
                     or (start and phrase[start - 1] in _CONNECTORS))]


# Index-driven: each candidate's entity, every stored key that means it (itself and its
# aliases, as the entity filter reads them), their chunks through the key index, and only then
# the snapshot and the filters -- never every visible passage's entities (that grew with the
# collection: ~50 ms on 1,781 passages).
_RECOGNISE = """
WITH candidates AS (
    SELECT q.key, q.ord, {canonical} AS entity
    FROM unnest(%(candidates)s::text[]) WITH ORDINALITY AS q(key, ord)
), spellings AS (
    SELECT k.key, k.ord, k.entity, s.stored
    FROM candidates k CROSS JOIN LATERAL (
        SELECT k.entity AS stored
        UNION SELECT a.alias FROM {s}.entity_aliases a WHERE a.canonical = k.entity) s
)
SELECT k.key, k.entity, count(DISTINCT c.chunk_pk) AS chunks
FROM spellings k
JOIN {s}.chunk_entities ce ON ce.key = k.stored
JOIN {s}.chunks c ON c.chunk_pk = ce.chunk_pk
WHERE {where_visible}
GROUP BY k.key, k.entity, k.ord ORDER BY k.ord
"""
_VISIBLE_COUNT = "SELECT count(*) FROM {s}.chunks c WHERE {where_visible}"


def recognise(conn: psycopg.Connection, info: CollectionInfo, snapshot: SnapshotInfo,
              query: str, filters: Filters) -> list[QueryEntity]:
    """The entities the query names, as the visible passages know them (with aliases):
    longest names first, a name whose words all belong to a longer one found not counted
    again ("penn" of "w penn"; but two names may share an initial: "Sir W. Penn with Sir W.
    Batten"), and none that more than MAX_SHARE of the passages mention, nor the documents'
    authors (:func:`_author_keys`)."""
    candidates = query_candidates(query)
    if not candidates:
        return []
    compiled = compile_filters(filters, snapshot.metadata_fields or {}, info.schema_id)
    params = {**compiled.params, "snapshot_id": snapshot.snapshot_id, "candidates": candidates}
    statement = sql.SQL(_RECOGNISE).format(
        s=info.schema_id, where_visible=_where_visible(info, compiled),
        canonical=canonical_sql(info.schema_id, sql.SQL("q.key")))
    rows = conn.execute(statement, params).fetchall()
    if not rows:
        return []
    total = _visible_count(conn, info, snapshot, compiled)
    found: list[QueryEntity] = []
    used: set[str] = set()
    authors = _author_keys(conn, info, snapshot)
    for key, entity, chunks in rows:
        words = set(key.split())
        if entity in authors or key in authors:
            continue  # the documents' own author ("Pepys" in his diary) tells no passage apart
        common = total >= MIN_PASSAGES and chunks > MAX_SHARE * total
        if words <= used or entity in {e.key for e in found} or common:
            continue
        used |= words
        found.append(QueryEntity(key=entity, text=key, chunks=chunks,
                                 idf=math.log(1 + (total - chunks + 0.5) / (chunks + 0.5))))
    return found


def _visible_count(conn: psycopg.Connection, info: CollectionInfo, snapshot: SnapshotInfo,
                   compiled: CompiledFilter) -> int:
    """How many passages the request may see: the snapshot's count when nothing filters."""
    if not compiled.clauses and snapshot.n_chunks is not None:
        return snapshot.n_chunks
    row = conn.execute(sql.SQL(_VISIBLE_COUNT).format(
        s=info.schema_id, where_visible=_where_visible(info, compiled)),
                       {**compiled.params, "snapshot_id": snapshot.snapshot_id}).fetchone()
    return int(row[0]) if row else 0


# A snapshot's members never change, so neither do its authors: they are read once per
# snapshot (a pass over its chunks: ~3 ms of every entity-boosted search on SciFact's 10k before).
# Keyed by the snapshot's creation time as well, so a collection dropped and made again under
# its name, whose first snapshot has the same id, is read afresh. Emptied when it holds
# _AUTHORS_KEPT snapshots (simpler than evicting one while other threads read it).
_AUTHORS: dict[tuple[str, int, dt.datetime], frozenset[str]] = {}
_AUTHORS_KEPT = 256


def _author_keys(conn: psycopg.Connection, info: CollectionInfo,
                 snapshot: SnapshotInfo) -> frozenset[str]:
    """The keys of the snapshot's authors and of each of their names ("samuel pepys",
    "samuel", "pepys")."""
    key = (info.schema_name, snapshot.snapshot_id, snapshot.created_at)
    found = _AUTHORS.get(key)
    if found is None:
        found = _read_author_keys(conn, info, snapshot)
        if len(_AUTHORS) >= _AUTHORS_KEPT:
            _AUTHORS.clear()
        _AUTHORS[key] = found
    return found


def _read_author_keys(conn: psycopg.Connection, info: CollectionInfo,
                      snapshot: SnapshotInfo) -> frozenset[str]:
    rows = conn.execute(sql.SQL(
        "SELECT DISTINCT c.author FROM {s}.chunks c WHERE c.author IS NOT NULL AND c.version_pk"
        " IN (SELECT version_pk FROM {s}.snapshot_members WHERE snapshot_id = %s) LIMIT 100"
    ).format(s=info.schema_id), (snapshot.snapshot_id,)).fetchall()
    keys = {entity_key(r[0]) for r in rows}
    return frozenset(k for key in keys if key for k in (key, *key.split()))


_HIT_ENTITIES = """
SELECT c.id, array_agg(DISTINCT {canonical}) AS entities
FROM {s}.chunks c JOIN {s}.chunk_entities ce USING (chunk_pk)
WHERE c.id = ANY(%(ids)s)
  AND c.version_pk IN (SELECT version_pk FROM {s}.snapshot_members
                       WHERE snapshot_id = %(snapshot_id)s)
GROUP BY c.id
"""


def boost_hits(conn: psycopg.Connection, info: CollectionInfo, snapshot: SnapshotInfo,
               hits: Sequence[Hit], entities: Sequence[QueryEntity],
               weight: float) -> list[Hit]:
    """Fused scores times ``1 + weight * (idf share of the query's entities the passage
    mentions)``, re-sorted (stable) and re-ranked. Only reorders hits the search returned."""
    if not hits or not entities or weight <= 0:
        return list(hits)
    rows = conn.execute(sql.SQL(_HIT_ENTITIES).format(
        s=info.schema_id, canonical=canonical_sql(info.schema_id, sql.SQL("ce.key"))),
        {"ids": [h.id for h in hits], "snapshot_id": snapshot.snapshot_id}).fetchall()
    mentioned = {row[0]: set(row[1]) for row in rows}
    total = sum(e.idf for e in entities) or 1.0
    scored: list[tuple[float, Hit]] = []
    for hit in hits:
        share = sum(e.idf for e in entities if e.key in mentioned.get(hit.id, ())) / total
        scored.append((hit.score * (1 + weight * share), hit))
    scored.sort(key=lambda pair: -pair[0])
    return [hit.model_copy(update={"score": score, "rank": i + 1})
            for i, (score, hit) in enumerate(scored)]


_RELATED = """
WITH {visible}, {anchor}
SELECT m.entity, mode() WITHIN GROUP (ORDER BY m.mention) AS name,
       mode() WITHIN GROUP (ORDER BY m.label) AS label,
       count(*) AS chunks, sum(m.mentions)::bigint AS mentions,
       (array_agg(m.id ORDER BY m.id = ANY(%(prefer)s::text[]) DESC, m.date_end NULLS LAST,
                  m.chunk_pk))[1:%(citations)s] AS ids
FROM mentions m {join}
WHERE {where}
GROUP BY m.entity
HAVING {kind}
ORDER BY chunks DESC, mentions DESC, m.entity
LIMIT %(limit)s
"""
_ANCHOR = """anchor AS (
    SELECT DISTINCT chunk_pk FROM mentions WHERE entity = {canonical}
)"""
_NO_ANCHOR = "anchor AS (SELECT NULL::bigint AS chunk_pk WHERE false)"


def related_entities(conn: psycopg.Connection, info: CollectionInfo, snapshot: SnapshotInfo,
                     *, filters: Filters, near: str | None = None, kind: Kind = "any",
                     limit: int = 20, citations: int = 5, only: Sequence[str] | None = None,
                     prefer: Sequence[str] = ()) -> list[RelatedEntity]:
    """Entities ranked by the visible passages that mention them -- with ``near`` only the
    passages that also mention that entity (itself left out) -- each with citation ids.
    ``only``: just these canonical keys. ``prefer``: citation ids to cite first where they
    back an entity (an answer's retrieved passages); then the oldest."""
    naming: sql.Composable | None = None
    if near is not None:  # every passage that counts names the anchor
        naming = entity_keys_sql(info.schema_id, sql.Placeholder("near"))
    elif only is not None:  # ... or one of these (canonical keys: themselves or an alias)
        naming = sql.SQL("(SELECT unnest(%(only)s::text[]) UNION SELECT a.alias FROM"
                         " {s}.entity_aliases a WHERE a.canonical = ANY(%(only)s::text[]))"
                         ).format(s=info.schema_id)
    visible, compiled = _visible(info, snapshot, filters, naming)
    params: dict[str, Any] = {**compiled.params, "snapshot_id": snapshot.snapshot_id,
                              "limit": limit, "citations": citations, "prefer": list(prefer)}
    anchor: sql.Composable = sql.SQL(_NO_ANCHOR)
    join: sql.Composable = sql.SQL("")
    where: list[sql.Composable] = [sql.SQL("true")]
    if near is not None:
        params["near"] = entity_key(near)
        near_sql = canonical_sql(info.schema_id, sql.Placeholder("near"))
        anchor = sql.SQL(_ANCHOR).format(canonical=near_sql)
        join = sql.SQL("JOIN anchor USING (chunk_pk)")
        where.append(sql.SQL("m.entity <> {c}").format(c=near_sql))
    if only is not None:
        params["only"] = list(only)
        where.append(sql.SQL("m.entity = ANY(%(only)s::text[])"))
    kind_sql: sql.Composable = sql.SQL("true")
    if kind != "any":
        params["labels"] = list(KIND_LABELS[kind])
        kind_sql = sql.SQL("mode() WITHIN GROUP (ORDER BY m.label) = ANY(%(labels)s)")
    statement = sql.SQL(_RELATED).format(visible=visible, anchor=anchor, join=join,
                                          where=sql.SQL(" AND ").join(where), kind=kind_sql)
    return [RelatedEntity(key=r[0], name=r[1], label=r[2], chunks=r[3], mentions=r[4],
                          citations=list(r[5]))
            for r in conn.execute(statement, params).fetchall()]


_EDGES = """
WITH {visible}
SELECT a.entity, b.entity, count(*) AS weight,
       (array_agg(a.id ORDER BY a.date_end NULLS LAST, a.chunk_pk))[1:%(citations)s] AS ids
FROM mentions a JOIN mentions b ON b.chunk_pk = a.chunk_pk AND a.entity < b.entity
GROUP BY a.entity, b.entity
ORDER BY weight DESC, a.entity, b.entity
LIMIT %(limit)s
"""


def entity_graph(conn: psycopg.Connection, info: CollectionInfo, snapshot: SnapshotInfo, *,
                 filters: Filters, limit: int = 50, citations: int = 5) -> list[EntityEdge]:
    """The heaviest co-occurrence edges among the visible passages, each backed by ids."""
    visible, compiled = _visible(info, snapshot, filters)
    rows = conn.execute(sql.SQL(_EDGES).format(visible=visible),
                        {**compiled.params, "snapshot_id": snapshot.snapshot_id,
                         "limit": limit, "citations": citations}).fetchall()
    return [EntityEdge(source=r[0], target=r[1], weight=r[2], citations=list(r[3]))
            for r in rows]


# What each ask ranks: people for who, places for where; how often counts the named ones.
ASK_KINDS: dict[str, Kind] = {"who": "person", "where": "place", "how often": "any"}


class EntityEvidence(CamelModel):
    """What the graph says for an entity question (:func:`entity_evidence`): the question's
    anchor entity with its passages, and for who/where the entities of the asked kind ranked
    by the passages that name them together with it (for how often: the second entity the
    question names, with their passages together, or the anchor itself when it names one);
    ``passages`` are the cited ones, as a search returns them."""

    model_config = ConfigDict(**CAMEL, frozen=True)

    ask: EntityAsk
    anchor: RelatedEntity
    entities: list[RelatedEntity]
    passages: list[Hit]


def entity_evidence(conn: psycopg.Connection, info: CollectionInfo, snapshot: SnapshotInfo,
                    question: str, *, filters: Filters, prefer: Sequence[str] = (),
                    limit: int = 5, citations: int = 2) -> EntityEvidence | None:
    """The graph's answer to a who/where/how-often question (None: not such a question, or it
    names no entity the visible passages know), read under ``filters`` like a search: its
    first recognised entity is the anchor; the citations of each entity are passages that
    name it together with the anchor (``prefer``'s first: the answer's retrieved passages).
    The documents' authors and the question's own entities are not ranked."""
    ask = entity_ask(question)
    if ask is None:
        return None
    # recognition leaves the authors out of the question's entities, and the ranking below
    # out of the entities named with them
    authors = _author_keys(conn, info, snapshot)
    found = recognise(conn, info, snapshot, question, filters)
    if not found:
        return None
    first = found[0]
    anchors = related_entities(conn, info, snapshot, filters=filters, only=[first.key],
                               limit=1, citations=citations, prefer=prefer)
    if not anchors:
        return None
    if ask == "how often":  # the anchor alone, or with the second entity (none: never)
        entities = (related_entities(conn, info, snapshot, filters=filters, near=first.key,
                                     only=[found[1].key], limit=1, citations=citations,
                                     prefer=prefer) if len(found) > 1 else anchors)
    else:
        skip = {e.key for e in found} | authors
        ranked = related_entities(conn, info, snapshot, filters=filters, near=first.key,
                                  kind=ASK_KINDS[ask], limit=limit + len(found) + 5,
                                  citations=citations, prefer=prefer)
        entities = [e for e in ranked if e.key not in skip][:limit]
    cited = [c for e in entities for c in e.citations]
    return EntityEvidence(ask=ask, anchor=anchors[0], entities=entities,
                          passages=visible_passages(conn, info, snapshot, filters,
                                                    list(dict.fromkeys(cited))))


_PASSAGES = """
SELECT c.id, c.document_id, c.citation, c.author, c.corpus, c.date_start, c.date_end,
       c.source, c.locator, c.title, c.body, c.metadata
FROM {s}.chunks c WHERE {where_visible} AND c.id = ANY(%(ids)s::text[])
"""


def visible_passages(conn: psycopg.Connection, info: CollectionInfo, snapshot: SnapshotInfo,
                     filters: Filters, ids: Sequence[str]) -> list[Hit]:
    """The passages ``ids`` as hits (in that order; score 0: no search ranked them), read
    through the visible-passages predicate: an id the request may not see is left out."""
    if not ids:
        return []
    compiled = compile_filters(filters, snapshot.metadata_fields or {}, info.schema_id)
    rows = conn.execute(sql.SQL(_PASSAGES).format(
        s=info.schema_id, where_visible=_where_visible(info, compiled)),
        {**compiled.params, "snapshot_id": snapshot.snapshot_id, "ids": list(ids)}).fetchall()
    by_id = {r[0]: r for r in rows}
    return [Hit(id=r[0], document_id=r[1], citation=r[2], author=r[3], corpus=r[4],
                date_start=r[5], date_end=r[6], source=r[7], locator=r[8], title=r[9],
                body=r[10], metadata=r[11] or {}, score=0.0, rank=rank)
            for rank, r in enumerate((by_id[i] for i in ids if i in by_id), start=1)]


def canonical_key(conn: psycopg.Connection, info: CollectionInfo, name: str) -> str:
    """The canonical key a name resolves to (its own key when no alias names it)."""
    row = conn.execute(sql.SQL("SELECT {c}").format(
        c=canonical_sql(info.schema_id, sql.Placeholder("k"))), {"k": entity_key(name)}).fetchone()
    return str(row[0]) if row else entity_key(name)


def snapshot_models(conn: psycopg.Connection, info: CollectionInfo,
                    snapshot: SnapshotInfo) -> list[str | None]:
    """The entity models that read the snapshot's versions (None: read by no model; versions
    ingested before entities existed count as None too)."""
    rows = conn.execute(sql.SQL(
        "SELECT DISTINCT r.model FROM {s}.snapshot_members m LEFT JOIN {s}.entity_runs r"
        " USING (version_pk) WHERE m.snapshot_id = %s ORDER BY 1").format(s=info.schema_id),
        (snapshot.snapshot_id,)).fetchall()
    return [r[0] for r in rows]
