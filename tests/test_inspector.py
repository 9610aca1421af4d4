"""The web inspector in a real headless Chromium (Debian's package, driven by Playwright): pages
load, a query renders the keyword, vector and fused lists, a cutoff hides later passages, the
answer links its citations to passages, and a visit without a valid key is refused.

Screenshots are kept under ``test-artifacts/inspector/`` (or ``$PGCITE_TEST_ARTIFACTS``)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import pgcite
from pgcite.service import ServiceConfig, create_app
from pgcite.service._keys import create_key
from pgcite.ui import mount_ui

from .live_server import live_server

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip("no chromium executable (Debian: apt-get install chromium)",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="playwright is not installed (the dev extra has it)")

# As root in a container: no sandbox; nothing that reaches out to the network.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(os.environ.get("PGCITE_TEST_ARTIFACTS",
                                Path(__file__).resolve().parent.parent / "test-artifacts"))
QUERY = "the great fire in the City"


@pytest.fixture(scope="module")
def base_url(client: pgcite.Client, diary: pgcite.Collection) -> Iterator[str]:
    app = create_app(client=client, config=ServiceConfig(warm_up=False))
    mount_ui(app)
    with live_server(app) as url:
        yield url


@pytest.fixture(scope="module")
def keys(client: pgcite.Client, diary: pgcite.Collection) -> dict[str, str]:
    with client.db.transaction() as conn:
        return {role: create_key(conn, diary.name, role).token for role in ("reader", "admin")}


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    profile = tempfile.mkdtemp(prefix="pgcite-chromium-")
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=FLAGS,
            viewport={"width": 1500, "height": 1100})
        try:
            yield context
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


def _shot(page: object, name: str) -> None:
    folder = ARTIFACTS / "inspector"
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]


def _open(browser: object, base_url: str, key: str | None) -> object:
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(f"{base_url}/ui")
    if key is not None:
        page.fill("#key", key)
        page.click("#key-form button")
    return page


def _inspect(page: object, query: str, cutoff: str = "") -> None:
    page.evaluate("document.body.dataset.ready = ''")  # type: ignore[attr-defined]
    page.fill("#query", query)  # type: ignore[attr-defined]
    page.fill("#cutoff", cutoff)  # type: ignore[attr-defined]
    page.click("[data-testid=run]")  # type: ignore[attr-defined]
    page.wait_for_selector("body[data-ready='1']", timeout=60_000)  # type: ignore[attr-defined]


def _ids(page: object, testid: str) -> list[str]:
    return page.eval_on_selector_all(  # type: ignore[attr-defined, no-any-return]
        f"[data-testid={testid}] li.hit", "items => items.map(i => i.dataset.id)")


def test_a_query_renders_all_three_lists_and_the_cited_answer(
    browser: object, base_url: str, keys: dict[str, str], diary: pgcite.Collection,
) -> None:
    page = _open(browser, base_url, keys["admin"])
    page.wait_for_selector("#collection option", state="attached")  # type: ignore[attr-defined]
    _inspect(page, QUERY)
    _shot(page, "query")
    expected = diary.search(QUERY, top_k=10, explain=True)
    assert _ids(page, "fused-list") == [h.id for h in expected.hits]
    keyword, vector = _ids(page, "keyword-list"), _ids(page, "vector-list")
    assert keyword and vector
    candidates = [*expected.hits, *expected.dropped]
    assert keyword == [h.id for h in sorted((h for h in candidates if h.keyword_rank),
                                             key=lambda h: h.keyword_rank or 0)]
    # the query's words are highlighted in the snippets
    assert page.locator("[data-testid=fused-list] mark").count() > 0  # type: ignore[attr-defined]
    # every citation in the answer links to a passage shown in the fused list
    cites = page.eval_on_selector_all(  # type: ignore[attr-defined]
        "#answer a", "links => links.map(a => a.dataset.cite)")
    assert cites and set(cites) <= set(_ids(page, "fused-list"))
    page.click("#answer a")  # type: ignore[attr-defined]
    assert page.url.endswith(f"#fused-{cites[0]}")  # type: ignore[attr-defined]
    # the stage trace and (admin key) the snapshots with their gate evaluation
    assert page.locator("[data-testid=trace] tbody tr").count() > 0  # type: ignore[attr-defined]
    snapshots = page.inner_text("[data-testid=snapshots]")  # type: ignore[attr-defined]
    assert "not evaluated" in snapshots or "cutoff violations" in snapshots


def test_a_cutoff_hides_later_passages(
    browser: object, base_url: str, keys: dict[str, str],
) -> None:
    page = _open(browser, base_url, keys["reader"])
    page.wait_for_selector("#collection option", state="attached")  # type: ignore[attr-defined]
    _inspect(page, QUERY)
    dates_before = page.eval_on_selector_all(  # type: ignore[attr-defined]
        "li.hit", "items => items.map(i => i.dataset.date)")
    assert any(d > "1665-12-31" for d in dates_before)
    _inspect(page, QUERY, cutoff="1665-12-31")
    _shot(page, "cutoff")
    dates = page.eval_on_selector_all(  # type: ignore[attr-defined]
        "li.hit", "items => items.map(i => i.dataset.date)")
    assert dates and all(d and d <= "1665-12-31" for d in dates)
    # a reader key does not see snapshots or gate reports
    assert "admin key" in page.inner_text("[data-testid=snapshots]")  # type: ignore[attr-defined]


@pytest.mark.parametrize("key", [None, "pgc_000000000000_" + "x" * 43])
def test_an_unauthorised_visit_is_refused(browser: object, base_url: str,
                                          key: str | None) -> None:
    page = _open(browser, base_url, key)
    page.wait_for_selector("#status.error")  # type: ignore[attr-defined]
    _shot(page, "refused-" + ("nokey" if key is None else "badkey"))
    assert "refused: 401" in page.inner_text("#status")  # type: ignore[attr-defined]
    assert page.locator("#collection option").count() == 0  # type: ignore[attr-defined]
    # and the API refuses the inspect call itself
    status = page.evaluate("""async () => (await fetch('/ui/api/collections/diary_fixture/inspect',
        {method: 'POST', headers: {'Content-Type': 'application/json'},
         body: JSON.stringify({query: 'fire'})})).status""")  # type: ignore[attr-defined]
    assert status == 401
