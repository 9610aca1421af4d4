"""pgcite over the Model Context Protocol (``pip install 'pgcite[mcp]'``): ``pgcite mcp`` serves
it over stdio; ``pgcite serve`` mounts it at ``/mcp`` (streamable HTTP, per-collection keys).
See docs/integrations.md."""

from typing import TYPE_CHECKING

from pgcite._lazy import lazy_exports
from pgcite.mcp._access import Access, open_access
from pgcite.mcp._server import build_server

if TYPE_CHECKING:
    from pgcite.mcp._http import mount_mcp
    from pgcite.mcp._stdio import serve_stdio

# The two transports, each loaded by the command that serves it
__getattr__ = lazy_exports(__name__, {"mount_mcp": "._http", "serve_stdio": "._stdio"})

__all__ = ["Access", "build_server", "mount_mcp", "open_access", "serve_stdio"]
