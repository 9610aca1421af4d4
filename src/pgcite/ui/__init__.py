"""The web inspector: ``pgcite serve`` serves it at ``/ui`` (static HTML + JS, no build step).
See docs/integrations.md, "Web inspector"."""

from pgcite.ui._routes import mount_ui

__all__ = ["mount_ui"]
