"""Who is asking, over MCP: the collections a caller may read, each as a Collection.

The rule is the service's, the same for every surface (service/_access.py): the same API keys as
the HTTP service (one key, one collection); a reader key sees the active snapshot only; no key
means every collection (stdio run by the database's own user, or the service with auth off on
loopback). An unknown collection and one the key may not read get the same answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pgcite import Client, Collection, CollectionInfo
from pgcite.service import Grant, authenticate_grant, lookup
from pgcite.store import list_collections

Reader = Callable[[CollectionInfo, Grant], Collection]


@dataclass(frozen=True)
class Access:
    """One caller's view: ``grant`` says what it may read; ``reader`` opens a collection as the
    grant may see it (the service passes its read-only-role opener)."""

    client: Client
    grant: Grant
    reader: Reader

    def visible(self) -> list[CollectionInfo]:
        with self.client.connection() as conn:
            return [info for info in list_collections(conn)
                    if self.grant.allows(info.name, "reader")]

    def open(self, info: CollectionInfo) -> Collection:
        """``info`` (one of :meth:`visible`) as this caller may read it."""
        return self.reader(info, self.grant)

    def collection(self, name: str) -> Collection:
        return self.open(lookup(self.client, self.grant, name))


def open_access(client: Client, token: str | None, reader: Reader | None = None) -> Access:
    """The access of ``token`` (None: unrestricted); an unknown or revoked token is an error."""
    opener = reader or (lambda info, grant: grant.open(client, info))
    return Access(client, authenticate_grant(client, token), opener)
