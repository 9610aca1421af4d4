"""The visitor's page in a real headless Chromium (Debian's package, driven by Playwright): an
exhibit answers a question as it is written, with numbered citations; a citation opens its
passage in its document, and for a scan the page with the passage's block outlined; "the
archive does not say" is an honest answer; the page works by keyboard, on a phone-sized and a
kiosk-sized screen, right to left for Arabic, fetches nothing from another origin, and axe-core
finds no serious accessibility violation; a cutoff exhibit never shows a later page.

Screenshots go to ``test-artifacts/exhibit/`` (or ``$PGCITE_TEST_ARTIFACTS``); the ones in
docs/images/ were taken from there (docs/exhibits.md)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw

import pgcite
from pgcite.service import ServiceConfig, create_app, create_key
from pgcite.ui import mount_ui

from .conftest import DIARY
from .live_server import live_server
from .test_inspector import CHROMIUM, FLAGS
from .test_ocr import font

sync_api = pytest.importorskip("playwright.sync_api",
                               reason="playwright is not installed (the dev extra has it)")
axe_sync = pytest.importorskip("axe_playwright_python.sync_playwright",
                               reason="axe-playwright-python is not installed (the dev extra)")
pytestmark = [pytest.mark.needs_chromium, pytest.mark.needs_tesseract]

NAME = "exhibit_page_fixture"
CUTOFF = "1666-12-31"
ARTIFACTS = Path(os.environ.get("PGCITE_TEST_ARTIFACTS",
                                Path(__file__).resolve().parent.parent / "test-artifacts"))
PHONE = {"width": 390, "height": 844}
KIOSK = {"width": 1920, "height": 1080}
SCAN_EARLY = [["To my Lord Sandwich, at sea.", "Navy Office, the 10th of September."],
              ["The fire is out at last and the Navy", "Office is saved, God be thanked,",
               "though the City lies in ashes."]]
SCAN_LATE = [["To Mr Coventry, at Whitehall.", "Navy Office, the 2nd of March."],
             ["The tar and hemp for the Chatham yard", "are not paid for, and the ropemakers",
              "will not work without their money."]]


def scanned_letter(path: Path, paragraphs: list[list[str]]) -> Path:
    """A page image of two paragraphs far apart: OCR reads them as two blocks."""
    image = Image.new("L", (1275, 1100), 255)
    draw = ImageDraw.Draw(image)
    y = 120
    for lines in paragraphs:
        for line in lines:
            draw.text((120, y), line, font=font(34), fill=0)
            y += 56
        y += 260
    image.save(path)
    return path


@pytest.fixture(scope="module")
def col(client: pgcite.Client, tmp_path_factory: pytest.TempPathFactory) -> pgcite.Collection:
    folder = tmp_path_factory.mktemp("scans")
    client.drop_collection(NAME, missing_ok=True)
    col = client.create_collection(NAME)
    assert col.ingest([DIARY]).activated
    scans = [scanned_letter(folder / "1666-09-10-letter.png", SCAN_EARLY),
             scanned_letter(folder / "1667-03-02-letter.png", SCAN_LATE)]
    report = col.ingest(scans, dates_from_names=True,
                        overrides=pgcite.Overrides(author="Samuel Pepys", corpus="A"))
    assert report.activated and not report.failed and report.ocr_pages == 2
    return col


@pytest.fixture(scope="module")
def tokens(client: pgcite.Client, col: pgcite.Collection) -> dict[str, str]:
    settings = pgcite.ExhibitSettings(
        persona="Samuel Pepys", title="Ask Samuel Pepys", cutoff=CUTOFF, corpora=["A", "B"],
        greeting="Good day to you. I kept a diary of London in the 1660s; ask me about it.",
        questions=["Where did the great fire begin?", "What did you bury in the garden?",
                   "Was the Navy Office saved from the fire?"],
        abstention_text="I did not write about that.")
    pgcite.Exhibit.create(col, "pepys", settings, replace=True)
    pgcite.Exhibit.create(col, "pepys-ar", settings.model_copy(update={
        "language": "ar", "title": "اسأل صموئيل بيبس",
        "greeting": "أهلاً بك. كتبتُ يومياتٍ عن لندن في ستينيات القرن السابع عشر.",
        "questions": ["أين بدأ الحريق؟"]}), replace=True)
    with client.db.transaction() as conn:
        return {"visitor": create_key(conn, col.name, "visitor", exhibit="pepys").token,
                "visitor-ar": create_key(conn, col.name, "visitor", exhibit="pepys-ar").token,
                "reader": create_key(conn, col.name, "reader").token}


@pytest.fixture(scope="module")
def base_url(client: pgcite.Client, col: pgcite.Collection) -> Iterator[str]:
    app = create_app(client=client, config=ServiceConfig(warm_up=False))
    mount_ui(app)
    with live_server(app) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    profile = tempfile.mkdtemp(prefix="pgcite-chromium-")
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=FLAGS, viewport=PHONE)
        try:
            yield context
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


def _shot(page: Any, name: str, full: bool = True) -> None:
    folder = ARTIFACTS / "exhibit"
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=full)


class Visit:
    """One visitor's tab: every request it makes is recorded."""

    def __init__(self, browser: Any, base_url: str, token: str, exhibit: str = "pepys",
                 viewport: dict[str, int] = PHONE) -> None:
        self.page = browser.new_page()
        self.page.set_viewport_size(viewport)
        self.requests: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.base_url = base_url
        self.page.goto(f"{base_url}/exhibit/{exhibit}#key={token}")
        self.page.wait_for_selector("body[data-ready='1']", timeout=30_000)

    def ask(self, question: str | None = None) -> None:
        self.page.evaluate("document.body.dataset.answered = ''")
        if question is None:
            self.page.click("#questions button")
        else:
            self.page.fill("#question", question)
            self.page.press("#question", "Enter")
        self.page.wait_for_selector("body[data-answered='cited'], body[data-answered='abstained']",
                                    timeout=60_000)

    def open_citation(self, index: int = 0) -> None:
        self.page.locator("#answer a.cite").nth(index).click()
        self.page.wait_for_selector("body[data-source]:not([data-source=''])", timeout=30_000)

    def serious(self) -> list[str]:
        results = axe_sync.Axe().run(self.page)
        return [f"{v['id']}: {v['help']} ({len(v['nodes'])})" for v in
                results.response["violations"] if v["impact"] in ("serious", "critical")]

    def foreign(self) -> list[str]:
        return [u for u in self.requests
                if not (u.startswith(self.base_url) or u.startswith(("blob:", "data:")))]


def test_a_question_gets_a_streamed_cited_answer_in_her_words(
    browser: Any, base_url: str, tokens: dict[str, str],
) -> None:
    visit = Visit(browser, base_url, tokens["visitor"])
    page = visit.page
    assert page.inner_text("h1") == "Ask Samuel Pepys"
    assert "key=" not in page.url  # the key left the address bar
    assert page.locator("#questions button").count() == 3
    assert not visit.serious(), visit.serious()
    _shot(page, "phone-start")
    visit.ask()  # the first suggested question: where did the great fire begin
    assert page.get_attribute("body", "data-streaming") == "1"  # deltas came before the end
    text = page.inner_text("#answer")
    assert "I wrote" in text and "Pudding Lane" in text
    links = page.locator("#answer a.cite")
    assert links.count() >= 1 and page.inner_text("#answer a.cite >> nth=0") == "[1]"
    snapshot = page.get_attribute("body", "data-snapshot")
    href = links.first.get_attribute("href")
    assert href and href.startswith("/exhibit/pepys/source?id=") and f"snapshot={snapshot}" in href
    assert page.locator("#sources li").count() >= 1
    assert not visit.serious(), visit.serious()
    _shot(page, "phone-answer")
    assert not visit.foreign(), visit.foreign()


def test_a_citation_opens_the_passage_in_its_document(
    browser: Any, base_url: str, tokens: dict[str, str],
) -> None:
    visit = Visit(browser, base_url, tokens["visitor"])
    page = visit.page
    visit.ask("What did you bury in the garden during the fire?")
    cited = page.locator("#answer a.cite").first.get_attribute("data-cite")
    visit.open_citation()
    assert page.get_attribute("body", "data-source") == "current"
    passage = page.locator("[data-testid=cited-passage]")
    assert passage.get_attribute("data-id") == cited
    assert passage.locator("mark").count() == 1  # the quoted words, marked in the passage
    facts = page.inner_text("dl.facts")
    assert "Pepys" in facts and "1666-09-0" in facts  # whose words, and when
    assert page.evaluate("document.activeElement.id") == "source-title"
    assert not visit.serious(), visit.serious()
    _shot(page, "phone-source")
    page.keyboard.press("Escape")  # back to the conversation, focus on the citation
    page.wait_for_selector("#conversation:not([hidden])")
    assert page.evaluate("document.activeElement.dataset.cite") == cited
    assert not visit.foreign(), visit.foreign()


def test_a_scan_opens_on_its_page_with_the_block_outlined(
    browser: Any, base_url: str, tokens: dict[str, str], col: pgcite.Collection,
) -> None:
    visit = Visit(browser, base_url, tokens["visitor"], viewport=KIOSK)
    page = visit.page
    visit.ask("Was the Navy Office saved from the fire?")
    cites = page.eval_on_selector_all("#answer a.cite", "as => as.map(a => a.dataset.cite)")
    scan = next((i for i, c in enumerate(cites) if c.startswith("1666-09-10-letter")), None)
    assert scan is not None, cites
    _shot(page, "kiosk-answer", full=False)
    visit.open_citation(scan)
    page.wait_for_selector("figure.page svg rect.block")
    box = page.locator("figure.page svg rect.block").first.bounding_box()
    svg = page.locator("figure.page svg").bounding_box()
    assert box and svg and box["width"] > 50 and box["height"] > 20
    assert svg["x"] <= box["x"] and box["x"] + box["width"] <= svg["x"] + svg["width"] + 1
    assert "page 1" in (page.get_attribute("figure.page svg", "aria-label") or "")
    assert page.evaluate("""() => new Promise(ok => { const i = new Image();
        i.onload = () => ok(i.naturalWidth); i.onerror = () => ok(0);
        i.src = document.querySelector('figure.page image').getAttribute('href'); })""") > 100
    assert not visit.serious(), visit.serious()
    page.locator("figure.page").scroll_into_view_if_needed()
    _shot(page, "kiosk-scan", full=False)
    assert not visit.foreign(), visit.foreign()


def test_a_cutoff_exhibit_never_shows_a_later_page(
    browser: Any, base_url: str, tokens: dict[str, str], col: pgcite.Collection,
) -> None:
    later = [h for h in col.search("tar and hemp for the Chatham yard ropemakers", top_k=5).hits
             if h.document_id.startswith("1667-03-02-letter")]
    assert later and later[0].metadata.get("ocr")
    early = [h for h in col.search("the Navy Office is saved", top_k=5).hits
             if h.document_id.startswith("1666-09-10-letter")]
    visit = Visit(browser, base_url, tokens["visitor"])

    def status(path: str) -> int:
        return int(visit.page.evaluate(
            """async ([path, key]) => (await fetch(path, {headers: {Authorization: 'Bearer ' + key}}))
               .status""", [path, tokens["visitor"]]))
    for hit in later:  # neither the passage nor its page
        assert status(f"/v1/exhibits/pepys/source?id={hit.id}") == 404
        assert status(f"/v1/exhibits/pepys/page?id={hit.id}") == 404
    assert status(f"/v1/exhibits/pepys/page?id={early[0].id}") == 200
    # the reader without a cutoff may see the later page: the refusal above is the cutoff's
    reader = {"Authorization": "Bearer " + tokens["reader"]}
    assert visit.page.request.get(f"{base_url}/v1/collections/{NAME}/page?id={later[0].id}",
                                  headers=reader).status == 200
    visit.ask("the tar and hemp for the Chatham yard and the ropemakers' money")
    shown = visit.page.eval_on_selector_all("#answer a.cite", "as => as.map(a => a.dataset.cite)")
    assert not any(c.startswith("1667-03-02-letter") for c in shown)


def test_the_archive_does_not_say_is_an_honest_answer(
    browser: Any, base_url: str, tokens: dict[str, str],
) -> None:
    visit = Visit(browser, base_url, tokens["visitor"])
    visit.ask("What did you think of the steam railway to Manchester?")
    page = visit.page
    assert page.get_attribute("body", "data-answered") == "abstained"
    assert page.is_visible("#not-said") and "does not say" in page.inner_text("#not-said")
    assert "I did not write about that." in page.inner_text("#answer")
    assert page.locator("#answer a.cite").count() == 0
    _shot(page, "phone-not-said")


def test_keyboard_only(browser: Any, base_url: str, tokens: dict[str, str]) -> None:
    visit = Visit(browser, base_url, tokens["visitor"])
    page = visit.page
    page.keyboard.press("Tab")  # the skip link, first on the page
    assert page.evaluate("document.activeElement.className") == "skip"
    page.keyboard.press("Enter")  # to the question box
    assert page.evaluate("document.activeElement.id") == "question"
    page.keyboard.type("Where did the great fire begin?")
    page.keyboard.press("Enter")
    page.wait_for_selector("body[data-answered='cited']", timeout=60_000)
    for _ in range(10):  # on to the first citation
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('cite')"):
            break
    assert page.evaluate("document.activeElement.classList.contains('cite')")
    page.keyboard.press("Enter")
    page.wait_for_selector("body[data-source='current']", timeout=30_000)
    assert page.evaluate("document.activeElement.id") == "source-title"


def test_right_to_left_for_arabic_on_a_kiosk(
    browser: Any, base_url: str, tokens: dict[str, str],
) -> None:
    visit = Visit(browser, base_url, tokens["visitor-ar"], exhibit="pepys-ar", viewport=KIOSK)
    page = visit.page
    assert page.get_attribute("html", "dir") == "rtl" and page.get_attribute("html", "lang") == "ar"
    assert page.inner_text("#ask") == "اسأل"
    field = page.locator("#question").bounding_box()
    button = page.locator("#ask").bounding_box()
    assert field and button and button["x"] < field["x"]  # the button sits to the left in rtl
    assert not visit.serious(), visit.serious()
    _shot(page, "kiosk-arabic", full=False)
    # a visitor key of one exhibit is refused by the other, as an unknown exhibit would be
    assert page.evaluate("""async (key) => (await fetch('/v1/exhibits/pepys',
        {headers: {Authorization: 'Bearer ' + key}})).status""", tokens["visitor-ar"]) == 404
    # and its page, handed the wrong exhibit's key, asks for a key rather than giving up
    wrong = browser.new_page()
    wrong.goto(f"{base_url}/exhibit/pepys#key={tokens['visitor-ar']}")
    wrong.wait_for_selector("#key-form:not([hidden])", timeout=30_000)
    assert wrong.get_attribute("body", "data-ready") != "1"


def test_a_visitor_key_cannot_use_the_inspector(browser: Any, base_url: str,
                                                tokens: dict[str, str]) -> None:
    page = browser.new_page()
    page.goto(f"{base_url}/ui")
    page.fill("#key", tokens["visitor"])
    page.click("#key-form button")
    # the page's own key-less load is refused with 401 first; wait for the visitor key's answer
    page.wait_for_function(
        "() => document.querySelector('#status.error')?.textContent.includes('refused: 403')",
        timeout=30_000)
    assert "refused: 403" in page.inner_text("#status")


def test_the_inspector_opens_a_citations_source(browser: Any, base_url: str,
                                                tokens: dict[str, str]) -> None:
    page = browser.new_page()
    page.set_viewport_size({"width": 1500, "height": 1100})
    page.goto(f"{base_url}/ui")
    page.fill("#key", tokens["reader"])
    page.click("#key-form button")
    page.wait_for_selector(f"#collection option[value='{NAME}']", state="attached")
    page.select_option("#collection", NAME)
    page.fill("#query", "Was the Navy Office saved from the fire?")
    page.click("[data-testid=run]")
    page.wait_for_selector("body[data-ready='1']", timeout=60_000)
    link = page.locator("[data-testid=answer-sources] a.source-link").first
    cited = (link.inner_text() or "").strip("[]")
    link.click()
    page.wait_for_selector("body[data-source]", timeout=30_000)
    assert page.get_attribute("body", "data-source") == "current"
    assert page.get_attribute("[data-testid=cited-passage]", "data-id") == cited
    if cited.startswith("1666-09-10-letter"):
        page.wait_for_selector("figure.page svg rect.block")
    _shot(page, "inspector-source", full=False)
