"""Who may see what: ONE rule for every surface -- the HTTP API, the inspector's API, MCP over
HTTP and over stdio (``pgcite mcp --key``), and Python code that opens a collection under a key
(:func:`open_collection`, e.g. for the LangChain and LlamaIndex retrievers).

A caller holds a :class:`Grant`: an API key (one collection, one role) or none at all (auth off
on loopback, ``pgcite mcp`` without a key, Python with the database's own credentials).

1. **Collections.** A key sees its own collection only. Any other name -- another collection,
   or none at all -- is :class:`CollectionNotFound` with one message (:func:`not_found`, the
   message an unknown name gets from everyone), decided before any lookup: a key holder cannot
   tell whether a name exists.
2. **Roles.** ``reader`` reads (search, answer, entities, documents, passages); ``admin`` also
   administers (snapshots, uploads, deletes, activation). A reader on admin work of its own
   collection is :class:`AccessDenied` (403).
3. **Snapshots.** A reader sees the ACTIVE snapshot only: naming another one is
   :class:`AccessDenied`, before anything says whether that snapshot exists. An admin (or no key)
   may name any ready snapshot; an unknown id is :class:`SnapshotNotFound`, listing no others.
   The snapshot rule is enforced where a snapshot is resolved: the :class:`Collection` a surface
   opens with :meth:`Grant.open` refuses other snapshots itself (``snapshots="active"``), so no
   route, tool, stage or self-check search can read another one.
4. **Errors say nothing the caller may not see**: no list of collections or snapshot ids.
5. **Visitors.** A ``visitor`` key is bound to one exhibit of its collection (docs/exhibits.md):
   it holds no collection role -- on its own collection it is :class:`AccessDenied`, elsewhere
   :func:`not_found` -- and may only open the collection *for its exhibit*
   (:meth:`Grant.visiting`), whose settings then decide cutoff and corpora
   (service/_visitor.py), on the active snapshot. Readers and admins of the collection may visit
   its exhibits too (to preview them); an exhibit the caller may not visit is
   :class:`ExhibitNotFound`, as an unknown one is.

The interface is small on purpose: ``Grant.require(name, role)`` before a lookup,
``Grant.open(client, info, ...)`` to get the collection as the caller may see it (after
``Grant.visiting(collection, exhibit)`` for an exhibit), and ``authenticate_grant`` for a
token. Everything else (HTTP dependencies, the MCP tools) calls these.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from pgcite import (
    AccessDenied,
    Client,
    Collection,
    CollectionInfo,
    CollectionNotFound,
    ConfigError,
    ExhibitNotFound,
    PgciteError,
)
from pgcite._client import SnapshotScope
from pgcite.retrieve import ConnectionFactory
from pgcite.service._keys import ApiKey, Role, authenticate
from pgcite.store import get_collection

UNKNOWN_KEY = "unknown or revoked API key"


def not_found(name: str) -> CollectionNotFound:
    """The one answer to a name the caller may not see, whether or not it exists."""
    return CollectionNotFound(f"no collection named {name!r}")


@dataclass(frozen=True)
class Grant:
    """What one caller may do. ``key`` None: every collection, every snapshot."""

    key: ApiKey | None = None
    # The exhibit this grant opens its collection for (:meth:`visiting`); None: no exhibit.
    for_exhibit: str | None = None

    def allows(self, collection: str, role: Role) -> bool:
        return self.key is None or self.key.allows(collection, role)

    @property
    def visitor_of(self) -> str | None:
        """A visitor key's exhibit (None: not a visitor key)."""
        return self.key.exhibit if self.key is not None and self.key.role == "visitor" else None

    def visits(self, collection: str, exhibit: str) -> bool:
        """Whether this caller may ask ``exhibit`` (defined on ``collection``) and open its
        citations: its own visitor keys, and whoever may read the collection."""
        if self.key is not None and self.visitor_of is not None:
            return (self.key.revoked_at is None and self.key.collection == collection
                    and self.visitor_of == exhibit)
        return self.allows(collection, "reader")

    def visiting(self, collection: str, exhibit: str) -> Grant:
        """This grant, to open ``collection`` for ``exhibit`` alone (:meth:`open`); an exhibit
        the caller may not visit gets an unknown exhibit's answer."""
        if not self.visits(collection, exhibit):
            raise ExhibitNotFound(f"no exhibit named {exhibit!r}")
        return replace(self, for_exhibit=exhibit)

    def require(self, collection: str, role: Role) -> None:
        """Raise unless this caller may ``role`` the collection named ``collection`` (checked
        before the name is looked up, so an existing and an unknown name look the same)."""
        if not self.allows(collection, "reader"):
            if self.visitor_of is not None and self.key is not None \
                    and self.key.collection == collection:
                raise AccessDenied("a visitor key may only ask its exhibit",
                                   hint=f"its exhibit is {self.visitor_of!r}")
            raise not_found(collection)
        if not self.allows(collection, role):
            raise AccessDenied(f"this API key may not administer collection {collection!r}",
                               hint="an admin key of the collection may")

    def snapshots(self, collection: str) -> SnapshotScope:
        """Which snapshots of ``collection`` this caller may read."""
        return "any" if self.allows(collection, "admin") else "active"

    def open(self, client: Client, info: CollectionInfo, *,
             connection: ConnectionFactory | None = None) -> Collection:
        """``info``'s collection as this caller may read it (``connection``: where its queries
        get connections, e.g. the service's read-role-scoped ones). A grant :meth:`visiting`
        an exhibit opens the exhibit's collection for a visitor of it (active snapshot only)."""
        if self.for_exhibit is None or not self.visits(info.name, self.for_exhibit):
            self.require(info.name, "reader")
        return Collection(client, info, connection=connection,
                          snapshots=self.snapshots(info.name))


def authenticate_grant(client: Client, token: str | None) -> Grant:
    """The grant of ``token`` (None: no key, every collection); an unknown, malformed or
    revoked token is an error."""
    if token is None:
        return Grant()
    with client.connection() as conn:
        key = authenticate(conn, token)
    if key is None:
        raise PgciteError(UNKNOWN_KEY, hint="create one with `pgcite key create --collection "
                          "NAME --role reader`")
    return Grant(key)


def lookup(client: Client, grant: Grant, name: str, role: Role = "reader") -> CollectionInfo:
    """The registry entry of ``name`` if ``grant`` may ``role`` it; else :func:`not_found` (or
    AccessDenied for a reader on admin work)."""
    grant.require(name, role)
    try:
        with client.connection() as conn:
            return get_collection(conn, name)
    except (CollectionNotFound, ConfigError):  # unknown, or not even a valid name
        raise not_found(name) from None


def open_collection(client: Client, name: str, *, key: str | None = None,
                    reader: Callable[[CollectionInfo, Grant], Collection] | None = None
                    ) -> Collection:
    """The collection ``name`` as the holder of API key ``key`` sees it: its own collection
    only, and with a reader key the active snapshot only. For Python code serving others,
    e.g. ``PgciteRetriever(collection=open_collection(client, "diary", key=token))``."""
    grant = authenticate_grant(client, key)
    info = lookup(client, grant, name)
    return reader(info, grant) if reader is not None else grant.open(client, info)
