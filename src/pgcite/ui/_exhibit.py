"""The visitor's page (docs/exhibits.md): ``/exhibit/{name}`` and a citation's source at
``/exhibit/{name}/source?id=…&snapshot=…``, one static page with no data in it. Everything it
shows comes from the exhibit's keyed API (``/v1/exhibits/{name}/…``, service/_exhibits.py).

Its Content-Security-Policy allows nothing from another origin -- no fonts, scripts, styles or
images -- so a page that would fetch one is refused by the browser, not just not written."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from pgcite.ui._assets import asset

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
       "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'self'")
router = APIRouter(tags=["visitors"])


def _page() -> HTMLResponse:
    return HTMLResponse(asset("exhibit.html"), headers={
        "Cache-Control": "no-store", "Content-Security-Policy": CSP,
        "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"})


@router.get("/exhibit/{name}", response_class=HTMLResponse, include_in_schema=False)
def exhibit_page(name: str) -> HTMLResponse:
    """The exhibit's page (its name is read by the page from the address)."""
    return _page()


@router.get("/exhibit/{name}/source", response_class=HTMLResponse, include_in_schema=False)
def exhibit_source_page(name: str) -> HTMLResponse:
    """A citation's source, opened from its link (the same page, showing the source)."""
    return _page()
