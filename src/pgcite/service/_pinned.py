"""Which snapshot a query may name: a reader key the active one only; an admin key any ready
snapshot -- to search or list a built, inactive one before activating it (evaluation before
activation)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from pgcite.service._auth import Access
from pgcite.service._errors import ApiError
from pgcite.service._state import ServiceState
from pgcite.store._snapshots import list_snapshots

SnapshotQuery = Annotated[int | None, Query(
    ge=1, le=2**31 - 1, description="a snapshot id (default: the active one); a snapshot that "
    "is not active needs an admin key")]


def pinned_snapshot(access: Access, state: ServiceState, snapshot_id: int | None) -> int | None:
    """``snapshot_id`` if this key may query it: any key the active snapshot, only an admin key
    another one (403 otherwise, before saying whether it exists: 404 for admins)."""
    if snapshot_id is None:
        return None
    with state.client.connection() as conn:
        known = {s.snapshot_id: s for s in list_snapshots(conn, access.info)}
    snap = known.get(snapshot_id)
    if not access.principal.allows(access.info.name, "admin") and not (snap and snap.active):
        raise ApiError(403, "only an admin key may query a snapshot that is not the active one",
                       hint="leave out 'snapshot' to query the active snapshot")
    if snap is None:
        raise ApiError(404, f"collection {access.info.name!r} has no snapshot {snapshot_id}")
    return snapshot_id
