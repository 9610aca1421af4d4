"""Figure captions and alt text become passages of their own that cite their figure."""

from __future__ import annotations

from pathlib import Path

import pgcite
from pgcite._types import Document
from pgcite.ingest._loaders import iter_documents

PAGE = """<html><head><title>Harbour Report</title></head><body>
<p>Intro text.</p>
<h2>Methods</h2><p>We sailed at dawn.</p>
<figure><img src="map.png" alt="A map of the harbour walls">
<figcaption>Figure 1: The harbour in 1666.</figcaption></figure>
<p>After the figure.</p>
<img src="rule.png" alt="">
<img src="ship.jpg" alt="A merchant ship at anchor">
<figure><img src="same.png" alt="Tide table"><figcaption>Tide table</figcaption></figure>
</body></html>"""


def load(tmp_path: Path) -> Document:
    path = tmp_path / "report.html"
    path.write_text(PAGE)
    (doc,) = iter_documents([path])
    assert isinstance(doc, Document)
    return doc


def test_captions_and_alt_text_are_passages_citing_their_figure(tmp_path: Path) -> None:
    doc = load(tmp_path)
    assert [(u.locator, u.text) for u in doc.units] == [
        (None, "Intro text."),
        ("Methods", "We sailed at dawn.\n\nAfter the figure."),  # the caption is not body text
        ("Methods, figure 1", "Figure 1: The harbour in 1666.\nA map of the harbour walls"),
        ("Methods, figure 2", "A merchant ship at anchor"),  # alt="" is decorative: no passage
        ("Methods, figure 3", "Tide table"),  # alt text equal to the caption: once
    ]
    assert doc.units[2].metadata == {"figure": {
        "number": 1, "caption": "Figure 1: The harbour in 1666.",
        "alt": ["A map of the harbour walls"], "src": ["map.png"]}}
    assert doc.units[2].title == "Methods"


def test_figure_passage_is_searched_and_cited(client: pgcite.Client, tmp_path: Path) -> None:
    load(tmp_path)
    col = client.create_collection("figures")
    try:
        report = col.ingest([tmp_path / "report.html"])
        assert not report.failed and report.activated
        hit = col.search("merchant ship anchor", mode="keyword").hits[0]
        assert hit.locator == "Methods, figure 2"
        assert hit.citation.endswith("report.html, Methods, figure 2")
        assert hit.metadata["figure"]["src"] == ["ship.jpg"]
    finally:
        client.drop_collection("figures")


def test_reingest_of_a_page_opening_with_a_figure_changes_nothing(
        client: pgcite.Client, tmp_path: Path) -> None:
    # The first chunk's metadata is read back as the document's on re-ingest: its figure must
    # not be taken for document metadata (that would make every re-ingest a new version).
    (tmp_path / "plate.html").write_text(
        '<html><body><img src="p.png" alt="Plate one: the harbour"></body></html>')
    col = client.create_collection("figures_again")
    try:
        assert col.ingest([tmp_path / "plate.html"]).new_versions == 1
        again = col.ingest([tmp_path / "plate.html"])
        assert (again.unchanged, again.new_versions, again.snapshot_id) == (1, 0, None)
    finally:
        client.drop_collection("figures_again")
