"""Supervision of the embedded PostgreSQL server: a dead postmaster is noticed at the next
connection and restarted in the background; meanwhile connections fail at once with
DatabaseError (a 503 with a hint over HTTP) instead of waiting out a pool timeout."""

from __future__ import annotations

import logging
import threading
from typing import Any

from pgcite._errors import DatabaseError
from pgcite.store._server import restart_server, server_alive

_log = logging.getLogger(__name__)


class Supervisor:
    """Watches one embedded server. ``generation`` counts restarts: connections (and pools)
    made before the last one belong to the dead server."""

    def __init__(self, server: Any) -> None:
        self._server = server
        self._lock = threading.Lock()
        self._restarting: threading.Thread | None = None
        self.generation = 0

    def check(self) -> None:
        """Return if the server runs; else start restarting it (once) and raise DatabaseError."""
        if server_alive(self._server):
            return
        with self._lock:
            if self._restarting is None or not self._restarting.is_alive():
                self._restarting = threading.Thread(target=self._restart, daemon=True,
                                                    name="pgcite-postgres-restart")
                self._restarting.start()
        raise DatabaseError("the embedded PostgreSQL server is down; it is being restarted",
                            hint="retry in a few seconds")

    def _restart(self) -> None:
        _log.warning("the embedded PostgreSQL server died; restarting it")
        try:
            restart_server(self._server)
        except DatabaseError as exc:  # the next check starts another attempt
            _log.error("%s (%s)", exc.message, exc.hint)
            return
        self.generation += 1
        _log.warning("the embedded PostgreSQL server is back")
