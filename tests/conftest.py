"""Fixtures: a real embedded PostgreSQL 18 + pgvector server (never a mock), and the real
packaged MiniLM model, on small fixtures."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pgcite
from pgcite.config import Settings

# Every embedded server of the tests (and of the pgcite processes they start, which inherit
# this) stops with its last process, as the tests expect: no keeper keeps it warm. The tests of
# the keeper (test_process.py) set their own idle time.
os.environ["PGCITE_SERVER_IDLE_S"] = "0"

FIXTURES = Path(__file__).parent / "fixtures"
DIARY = FIXTURES / "diary" / "entries.jsonl"
JOURNAL = FIXTURES / "journal" / "entries.jsonl"


@pytest.fixture(scope="session")
def settings() -> Settings:
    # Not under pytest's tmp dir: the server runs as another OS user when tests run as root and
    # must reach its data dir until it stops at exit. atexit runs LIFO, so registering the
    # removal first makes it run after the server's own stop handler.
    data_dir = Path(tempfile.mkdtemp(prefix="pgcite-test-"))
    atexit.register(shutil.rmtree, data_dir, True)
    return Settings(data_dir=data_dir, database_url=None)


@pytest.fixture(scope="session")
def client(settings: Settings) -> Iterator[pgcite.Client]:
    with pgcite.Client(settings) as c:
        yield c


@pytest.fixture(scope="session")
def diary(client: pgcite.Client) -> pgcite.Collection:
    """The small diary fixture, ingested once: three corpora, dates, an undated note."""
    col = client.create_collection("diary_fixture")
    report = col.ingest([DIARY])
    assert not report.failed and report.activated
    return col


@pytest.fixture(scope="session")
def journal(client: pgcite.Client) -> pgcite.Collection:
    """The journal fixture, ingested once: dated entries framed by date lines, titles and
    signatures, two letters, one entry dated by month and one by year only."""
    col = client.create_collection("journal_fixture")
    report = col.ingest([JOURNAL])
    assert not report.failed and report.activated
    return col


# Debian packages some tests need. .ci/run installs them where it can (root + apt-get); where
# they are missing the tests marked with them skip, with the reason in the -ra summary.
NEEDS = {
    "needs_chromium": (("chromium", "chromium-browser", "google-chrome"),
                       "apt-get install chromium"),
    "needs_tesseract": (("tesseract",), "apt-get install tesseract-ocr"),
}


def binary(marker: str) -> str | None:
    """The path of the program a ``needs_*`` marker stands for, or None if none is installed."""
    names, _ = NEEDS[marker]
    return next((path for name in names if (path := shutil.which(name))), None)


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker, (names, install) in NEEDS.items():
        if item.get_closest_marker(marker) is not None and binary(marker) is None:
            pytest.skip(f"{marker}: {' / '.join(names)} not installed ({install})")


@pytest.fixture()
def tesseract_runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The size of every image handed to Tesseract (for tests of what OCR is spared)."""
    pytesseract = pytest.importorskip("pytesseract")
    runs: list[tuple[int, int]] = []
    real = pytesseract.image_to_data

    def counted(image: Any, *args: Any, **kwargs: Any) -> Any:
        runs.append(image.size)
        return real(image, *args, **kwargs)

    monkeypatch.setattr(pytesseract, "image_to_data", counted)
    return runs
