"""Exhibits in the Python API (docs/exhibits.md): define one on a collection, ask it questions
under its settings, open its citations.

>>> import pgcite
>>> diary = pgcite.connect().collection("diary")
>>> pepys = pgcite.Exhibit.create(diary, "pepys", pgcite.ExhibitSettings(
...     persona="Samuel Pepys", cutoff="1666-12-31", corpora=["A", "B"]))
>>> answer = pepys.answer("What did you save from the fire?")   # never after 1666
>>> pepys.source(answer.citations[0], snapshot_id=answer.snapshot_id).passage.body

Every answer and every source goes through :meth:`Exhibit.filters`, which the visitor's page,
its HTTP API and the MCP tool use as well: nothing a caller passes can widen them.
"""

from __future__ import annotations

from pgcite._client import Client, Collection
from pgcite._errors import PgciteError
from pgcite.answer._pipeline import AnswerOptions
from pgcite.answer._types import Answer, Generator
from pgcite.retrieve._filters import Filters
from pgcite.retrieve._sources import CitedSource, cited_page, open_citation
from pgcite.store._exhibits import (
    ExhibitInfo,
    ExhibitSettings,
    delete_exhibit,
    directory_collection,
    get_exhibit,
    list_exhibits,
    save_exhibit,
)
from pgcite.store._page_images import StoredPage
from pgcite.store._snapshots import SnapshotInfo, activations, list_snapshots

NEIGHBOURS = 2  # passages shown either side of a cited one


class Exhibit:
    """One exhibit on a collection, as stored when it was opened."""

    def __init__(self, collection: Collection, info: ExhibitInfo) -> None:
        if info.collection != collection.name:
            raise PgciteError(f"exhibit {info.name!r} is on collection {info.collection!r}")
        self.collection = collection
        self.info = info

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def settings(self) -> ExhibitSettings:
        return self.info.settings

    @classmethod
    def create(cls, collection: Collection, name: str,
               settings: ExhibitSettings | None = None, *, replace: bool = False) -> Exhibit:
        """Define ``name`` on ``collection``; with ``replace``, a new version of an existing
        one (answers report the version they were given under)."""
        with collection.client.db.transaction() as conn:
            info = save_exhibit(conn, collection.info, name, settings or ExhibitSettings(),
                                replace=replace)
        return cls(collection, info)

    @classmethod
    def open(cls, where: Client | Collection, name: str) -> Exhibit:
        """The exhibit ``name``, found by name alone (a Client) or on a collection."""
        client = where if isinstance(where, Client) else where.client
        with client.connection() as conn:
            collection_name = directory_collection(conn, name)
        collection = (where if isinstance(where, Collection) and where.name == collection_name
                      else client.collection(collection_name))
        with collection._connection() as conn:
            return cls(collection, get_exhibit(conn, collection.info, name))

    @staticmethod
    def list(collection: Collection) -> list[ExhibitInfo]:
        """The exhibits defined on ``collection``, by name."""
        with collection._connection() as conn:
            return list_exhibits(conn, collection.info)

    def delete(self) -> ExhibitInfo:
        """Retire the exhibit (its versions stay on record) and delete its visitor keys."""
        with self.collection.client.db.transaction() as conn:
            return delete_exhibit(conn, self.collection.info, self.name)

    def filters(self) -> Filters:
        """The hard filters every request of this exhibit runs under."""
        return Filters(cutoff=self.settings.cutoff, corpora=self.settings.corpora)

    def answer_options(self, *, threshold: float | None = None) -> AnswerOptions:
        """How :meth:`Collection.answer` answers a question to this exhibit (under
        :meth:`filters`): in the persona's voice, with its texts; ``threshold``: the caller's
        (None: the default)."""
        s = self.settings
        return AnswerOptions(persona=s.persona, abstention_text=s.abstention_text,
                             attribution_fallback=s.attribution_fallback, threshold=threshold)

    def answer(self, question: str, *, generator: Generator | str | None = None,
               threshold: float | None = None) -> Answer:
        """The exhibit's answer: in the persona's voice, from the active snapshot, under its
        cutoff and corpora. ``answer.snapshot_id`` is what its citation links name."""
        return self.collection.answer(question, filters=self.filters(), generator=generator,
                                      options=self.answer_options(threshold=threshold))

    def source(self, citation_id: str, *, snapshot_id: int | None = None,
               neighbours: int = NEIGHBOURS) -> CitedSource:
        """A citation opened: the passage (read from the active snapshot) in its document, under
        the exhibit's filters; ``snapshot_id`` (the answer's) says whether it is the text that
        was cited."""
        return citation_source(self.collection, citation_id, cited_snapshot=snapshot_id,
                               filters=self.filters(), neighbours=neighbours)

    def page_image(self, citation_id: str) -> StoredPage:
        """The scanned page ``citation_id`` was read from, if the exhibit may show all of it."""
        return citation_page(self.collection, citation_id, filters=self.filters())


def citation_source(collection: Collection, citation_id: str, *,
                    cited_snapshot: int | None = None, filters: Filters | None = None,
                    pin: bool = False, neighbours: int = NEIGHBOURS) -> CitedSource:
    """``citation_id`` opened in its document. The text comes from the active snapshot, and
    ``cited_snapshot`` (the one the citation names) is compared with it; with ``pin`` (an
    admin's view) the text comes from ``cited_snapshot`` itself."""
    if not 0 <= neighbours <= 10:
        raise PgciteError("neighbours must be 0-10")
    cited = _cited(collection, cited_snapshot, pinned=pin)
    readable = (collection.snapshot(cited_snapshot) if pin and cited_snapshot is not None
                else collection.active_snapshot())
    with collection._connection() as conn:
        return open_citation(conn, collection.info, readable, citation_id,
                             filters=filters or Filters(), cited=cited, cited_id=cited_snapshot,
                             neighbours=neighbours)


def citation_page(collection: Collection, citation_id: str, *,
                  filters: Filters | None = None, snapshot_id: int | None = None) -> StoredPage:
    """The page image of ``citation_id`` in the active snapshot (or ``snapshot_id``, for an
    admin), shown only when every passage on the page passes ``filters``."""
    readable = collection.snapshot(snapshot_id)
    with collection._connection() as conn:
        return cited_page(conn, collection.info, readable, citation_id,
                          filters=filters or Filters())


def _cited(collection: Collection, snapshot_id: int | None, *,
           pinned: bool) -> SnapshotInfo | None:
    """The snapshot a citation names, if it is kept and was live once (an answer came from
    it): a snapshot never activated was never cited to anyone but an admin."""
    if snapshot_id is None:
        return None
    with collection.client.connection() as conn:
        known = {s.snapshot_id: s for s in list_snapshots(conn, collection.info)}
        live = {a.snapshot_id for a in activations(conn, collection.info)}
    snap = known.get(snapshot_id)
    if snap is None or snap.state != "ready" or not (pinned or snapshot_id in live):
        return None
    return snap
