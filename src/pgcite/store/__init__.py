"""Store: the PostgreSQL server, migrations, collections (one schema each) and snapshots."""

from pgcite.store._collections import CollectionInfo, CollectionSettings
from pgcite.store._database import Database

__all__ = ["CollectionInfo", "CollectionSettings", "Database"]
