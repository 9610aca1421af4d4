"""Who is asking, over MCP: which collections a caller may read, and each as a Collection.

The same API keys as the HTTP service (one key, one collection); no key means every collection
(stdio, run by the database's own user, or the service with auth off on loopback). An unknown
collection and one the key may not read get the same answer, so a key learns nothing about
collections outside its scope.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pgcite._client import Client, Collection
from pgcite._errors import CollectionNotFound, ConfigError, PgciteError
from pgcite.service._keys import ApiKey, authenticate
from pgcite.store._collections import CollectionInfo, get_collection, list_collections


@dataclass(frozen=True)
class Access:
    """One caller's view: ``key`` None reads everything; ``reader`` opens a collection (the
    service passes its read-only-role opener)."""

    client: Client
    key: ApiKey | None
    reader: Callable[[CollectionInfo], Collection]

    def allows(self, name: str) -> bool:
        return self.key is None or self.key.allows(name, "reader")

    def visible(self) -> list[CollectionInfo]:
        with self.client.connection() as conn:
            return [info for info in list_collections(conn) if self.allows(info.name)]

    def collection(self, name: str) -> Collection:
        if self.allows(name):
            try:
                with self.client.connection() as conn:
                    return self.reader(get_collection(conn, name))
            except (CollectionNotFound, ConfigError):
                pass
        raise CollectionNotFound(
            f"no collection named {name!r} is visible here",
            hint="list_collections names the collections you may search")


def open_access(client: Client, token: str | None,
                reader: Callable[[CollectionInfo], Collection] | None = None) -> Access:
    """The access of ``token`` (None: unrestricted); an unknown or revoked token is an error."""
    opener = reader or (lambda info: Collection(client, info))
    if token is None:
        return Access(client, None, opener)
    with client.connection() as conn:
        key = authenticate(conn, token)
    if key is None:
        raise PgciteError("unknown or revoked API key",
                          hint="create one with `pgcite key create --collection NAME`")
    return Access(client, key, opener)
