"""The HTTP service (FastAPI): search and grounded answers per collection, API keys scoped to a
collection and role, per-collection read-only database roles, Prometheus metrics.

>>> from pgcite.service import create_app, ServiceConfig
>>> app = create_app(config=ServiceConfig(auth=True))   # then: uvicorn.run(app)
"""

from typing import TYPE_CHECKING

from pgcite._lazy import lazy_exports
from pgcite.service._access import Grant, authenticate_grant, lookup, open_collection
from pgcite.service._app import create_app
from pgcite.service._auth import Access, reader_access
from pgcite.service._keys import ApiKey, NewKey, aauthenticate, create_key, list_keys, revoke_key
from pgcite.service._roles import RoleScopedConnection, ensure_read_role, read_role
from pgcite.service._routes import ERRORS
from pgcite.service._state import ServiceConfig, ServiceState, get_state

if TYPE_CHECKING:
    from pgcite.service._connections import BoundedH11Protocol, configure

# uvicorn's connection handling: loaded by `pgcite serve` only
__getattr__ = lazy_exports(__name__, {"BoundedH11Protocol": "._connections",
                                      "configure": "._connections"})

__all__ = [
    "ERRORS",
    "Access",
    "ApiKey",
    "BoundedH11Protocol",
    "Grant",
    "NewKey",
    "RoleScopedConnection",
    "ServiceConfig",
    "ServiceState",
    "aauthenticate",
    "authenticate_grant",
    "configure",
    "create_app",
    "create_key",
    "ensure_read_role",
    "get_state",
    "list_keys",
    "lookup",
    "open_collection",
    "read_role",
    "reader_access",
    "revoke_key",
]
