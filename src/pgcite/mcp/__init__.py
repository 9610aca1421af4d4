"""pgcite over the Model Context Protocol (``pip install 'pgcite[mcp]'``): ``pgcite mcp`` serves
it over stdio; ``pgcite serve`` mounts it at ``/mcp`` (streamable HTTP, per-collection keys).
See docs/integrations.md."""

from pgcite.mcp._access import Access, open_access
from pgcite.mcp._server import build_server

__all__ = ["Access", "build_server", "open_access"]
