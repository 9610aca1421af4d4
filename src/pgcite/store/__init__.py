"""Store: the PostgreSQL server, migrations, collections (one schema each) and snapshots."""

from typing import TYPE_CHECKING

from pgcite._lazy import lazy_exports
from pgcite.store._collections import (
    CollectionInfo,
    CollectionSettings,
    aget_collection,
    get_collection,
    list_collections,
    update_settings,
)
from pgcite.store._database import Database
from pgcite.store._keeper import process_alive
from pgcite.store._migrations import latest_version
from pgcite.store._server import prune_handles

if TYPE_CHECKING:
    from pgcite.store._exhibits import (
        adirectory_collection,
        aget_exhibit,
        directory_collection,
        get_exhibit,
        settings_of,
    )
    from pgcite.store._replicas import ReplicaBehind
    from pgcite.store._snapshots import (
        activations,
        active_snapshot,
        list_snapshots,
        previous_snapshot,
    )
    from pgcite.store._standby import start_standby, stop_standby

# From modules that importing the package does not load: imported on first use
__getattr__ = lazy_exports(__name__, {
    "adirectory_collection": "._exhibits", "aget_exhibit": "._exhibits",
    "directory_collection": "._exhibits", "get_exhibit": "._exhibits",
    "settings_of": "._exhibits", "ReplicaBehind": "._replicas",
    "active_snapshot": "._snapshots", "activations": "._snapshots",
    "list_snapshots": "._snapshots", "previous_snapshot": "._snapshots",
    "start_standby": "._standby", "stop_standby": "._standby",
})

__all__ = [
    "CollectionInfo",
    "CollectionSettings",
    "Database",
    "ReplicaBehind",
    "active_snapshot",
    "activations",
    "adirectory_collection",
    "aget_collection",
    "aget_exhibit",
    "directory_collection",
    "get_collection",
    "get_exhibit",
    "latest_version",
    "list_collections",
    "list_snapshots",
    "previous_snapshot",
    "process_alive",
    "prune_handles",
    "settings_of",
    "start_standby",
    "stop_standby",
    "update_settings",
]
