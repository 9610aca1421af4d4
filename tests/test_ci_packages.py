"""The Debian packages .ci/run installs, through the markers that skip (with a reason) where
they are missing: each test runs the real program."""

from __future__ import annotations

import subprocess

import pytest

from .conftest import binary


@pytest.mark.needs_tesseract
def test_tesseract_runs() -> None:
    path = binary("needs_tesseract")
    assert path is not None
    done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.returncode == 0 and "tesseract" in (done.stdout + done.stderr).lower()


@pytest.mark.needs_chromium
def test_chromium_renders_a_page() -> None:
    path = binary("needs_chromium")
    assert path is not None
    page = "data:text/html,<p id=x>pgcite ci</p>"
    done = subprocess.run([path, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                           page], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and '<p id="x">pgcite ci</p>' in done.stdout, done.stderr[-500:]
