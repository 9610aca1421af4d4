"""The static files of the inspector and the visitor's page (``static/``), one allow-list."""

from __future__ import annotations

from importlib import resources

from fastapi.responses import Response

MEDIA_TYPES = {"app.js": "text/javascript", "style.css": "text/css",
               "exhibit.js": "text/javascript", "exhibit.css": "text/css",
               "source.js": "text/javascript", "source-page.js": "text/javascript"}


def asset(name: str) -> str:
    return resources.files("pgcite.ui").joinpath("static", name).read_text(encoding="utf-8")


def static_response(name: str) -> Response:
    if name not in MEDIA_TYPES:
        return Response(status_code=404)
    return Response(asset(name), media_type=MEDIA_TYPES[name],
                    headers={"X-Content-Type-Options": "nosniff"})
