"""The HTTP service (FastAPI): search and grounded answers per collection, API keys scoped to a
collection and role, per-collection read-only database roles, Prometheus metrics.

>>> from pgcite.service import create_app, ServiceConfig
>>> app = create_app(config=ServiceConfig(auth=True))   # then: uvicorn.run(app)
"""

from pgcite.service._access import Grant, open_collection
from pgcite.service._app import create_app
from pgcite.service._keys import ApiKey, NewKey, create_key, list_keys, revoke_key
from pgcite.service._roles import RoleScopedConnection, ensure_read_role, read_role
from pgcite.service._state import ServiceConfig

__all__ = [
    "ApiKey",
    "Grant",
    "NewKey",
    "RoleScopedConnection",
    "ServiceConfig",
    "create_app",
    "create_key",
    "ensure_read_role",
    "list_keys",
    "open_collection",
    "read_role",
    "revoke_key",
]
