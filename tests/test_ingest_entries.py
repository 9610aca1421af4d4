"""A journal kept in one file, read as its dated entries (``--entries``): the date lines a diary
writes, a year or month carried from the entry before, the text before the first entry kept, and
a cutoff search that sees only the entries written by then."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from typer.testing import CliRunner

import pgcite
from pgcite.cli import app
from pgcite.config import Settings
from pgcite.ingest._entries import entry_units
from pgcite.ingest._loaders import iter_documents

D = dt.date

JOURNAL = """THE JOURNAL OF MARY HARTLEY

March 22, 1852

Walked to the mill with my brother John. The miller said the wheel had not turned since Sunday.

March 23.—Rain all day. Wrote to Ellen about the school.

Monday, April 2nd, 1852.

The water came up to the kitchen door at four in the morning.
"""


def test_each_date_line_starts_a_dated_entry() -> None:
    units = entry_units(JOURNAL, "journal")
    assert units is not None
    assert [(u.title, u.date_start, u.locator) for u in units] == [
        ("journal", None, None),  # the text before the first entry stays, undated
        ("22 March 1852", D(1852, 3, 22), "1852-03-22"),
        ("23 March 1852", D(1852, 3, 23), "1852-03-23"),  # the year carried
        ("2 April 1852", D(1852, 4, 2), "1852-04-02"),
    ]
    # the date line stays in the entry's text; a dash joins an entry to its date
    assert units[1].text.startswith("March 22, 1852\n\nWalked to the mill")
    assert units[2].text == "March 23.—Rain all day. Wrote to Ellen about the school."


@pytest.mark.parametrize(("text", "expected"), [
    # Pepys: a day alone, the month carried, and the next month after the 30th
    ("Sept. 2nd, 1666 (Lord's day).\nA fire.\n3rd.\nUp early.\n30th.\nHome.\n1st.\nOctober.",
     [D(1666, 9, 2), D(1666, 9, 3), D(1666, 9, 30), D(1666, 10, 1)]),
    # Pepys as printed: a month heading, then each entry's day before its first sentence
    ("SEPTEMBER 1666\n\n2nd (Lord's day). Some of our mayds sitting up late.\n\n"
     "4th. Up by break of day.\n\nOCTOBER 1666\n\n1st. All the morning at the office.\n"
     "6th. (Shrove Tuesday.) I called Mr. Sheply.\n8th (Lord's day).Up early.",
     [D(1666, 9, 2), D(1666, 9, 4), D(1666, 10, 1), D(1666, 10, 6), D(1666, 10, 8)]),
    # a Markdown heading as the date line; the next year after December
    ("## 1851-12-30\nSnow.\n## January 2\nThaw.\n## 4 February\nRain.",
     [D(1851, 12, 30), D(1852, 1, 2), D(1852, 2, 4)]),
])
def test_a_date_left_out_is_carried_from_the_entry_before(text: str,
                                                          expected: list[dt.date]) -> None:
    units = entry_units(text, "t")
    assert units is not None and [u.date_start for u in units if u.date_start] == expected


def test_a_month_heading_opens_the_entries_below_it() -> None:
    # it ended the entry above it, and "APRIL 1852" was quoted as 22 March's text
    text = ("MARCH 1852\n\nMarch 22.\nPlanted potatoes.\n\nAPRIL 1852\n\nApril 2.\n"
            "The inspector came.\n\nMAY 1852\nA dry month, by the almanac.\nMay 5.\nRain.")
    units = entry_units(text, "t")
    assert units is not None
    assert [(u.date_start, u.text) for u in units] == [
        (D(1852, 3, 22), "MARCH 1852\nMarch 22.\nPlanted potatoes."),
        # text under a heading, before any entry, stays where it stands, the heading with it
        (D(1852, 4, 2), "APRIL 1852\nApril 2.\nThe inspector came.\n\n"
                        "MAY 1852\nA dry month, by the almanac."),
        (D(1852, 5, 5), "May 5.\nRain."),
    ]


@pytest.mark.parametrize("text", [
    "No dates here.\nJust text.",
    "12\nA page number, not a day.",  # a bare number is no date line
    "3rd.\nA day with no month known yet.",
    "22 March 1852 was a Monday.",  # a date inside a sentence starts nothing
    "May 12 people come?", "May 12 People came.",
    "SEPTEMBER 1666\nA month heading dates no entry of its own.",
])
def test_lines_that_are_not_date_lines(text: str) -> None:
    assert entry_units(text, "t") is None


def test_only_with_entries_and_never_over_the_users_date(tmp_path: Path) -> None:
    (tmp_path / "journal.txt").write_text(JOURNAL)
    plain = list(iter_documents([tmp_path]))
    assert [len(d.units) for d in plain] == [1]  # by default a file is one undated unit
    read = [d for d in iter_documents([tmp_path], entries=True)
            if isinstance(d, pgcite.Document)]
    assert [u.date_start for u in read[0].units] == [None, D(1852, 3, 22), D(1852, 3, 23),
                                                     D(1852, 4, 2)]
    assert read[0].provenance["dates"] == "file"
    # what the user gives still replaces what the file states
    forced = [d for d in iter_documents([tmp_path / "journal.txt"], entries=True,
                                        overrides=pgcite.Overrides(date="1852"))
              if isinstance(d, pgcite.Document)]
    assert {u.date_start for u in forced[0].units} == {D(1852, 1, 1)}
    assert forced[0].provenance["dates"] == "flag"


def test_a_cutoff_search_sees_the_entries_written_by_then(
        client: pgcite.Client, settings: Settings, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "journal.txt").write_text(JOURNAL)
    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)
    client.create_collection("journal_entries")
    try:
        result = CliRunner().invoke(app, ["ingest", "journal_entries", str(tmp_path),
                                          "--entries", "--no-progress"])
        assert result.exit_code == 0, result.output
        assert "1 of 1 documents have undated passages" in result.output  # its title page
        col = client.collection("journal_entries")
        hits = col.search("rain mill water kitchen Ellen", mode="keyword", top_k=10,
                          filters={"cutoff": "1852-03-31"}).hits
        assert hits and {h.date_start for h in hits} <= {D(1852, 3, 22), D(1852, 3, 23)}
        later = col.search("kitchen door water", mode="keyword", top_k=10).hits
        assert later[0].date_start == D(1852, 4, 2) and later[0].locator == "1852-04-02"
    finally:
        client.drop_collection("journal_entries")


def test_an_upload_reads_entries_when_asked(client: pgcite.Client) -> None:
    from fastapi.testclient import TestClient

    from pgcite.service import ServiceConfig, create_app, create_key

    client.create_collection("journal_upload")
    with client.db.transaction() as conn:
        token = create_key(conn, "journal_upload", "admin").token
    headers = {"Authorization": f"Bearer {token}"}
    url = "/v1/collections/journal_upload/documents"
    # one event loop for every request, as a server has: without the lifespan each request
    # ran on a loop of its own, and the async pool one of them opened hung another's shutdown
    api = TestClient(create_app(client=client, config=ServiceConfig(warm_up=False)))
    try:
        with api:
            plain = api.post(url, headers=headers, files={"files": ("journal.txt", JOURNAL)})
            assert plain.status_code == 201, plain.text
            assert plain.json()["report"]["undated"] == 1
            read = api.post(url, headers=headers, data={"entries": "true"},
                            files={"files": ("journal.txt", JOURNAL)})
            assert read.status_code == 201, read.text
            snapshot = read.json()["snapshotId"]
            hits = client.collection("journal_upload").search(
                "kitchen door water", mode="keyword", top_k=3, snapshot_id=snapshot).hits
            assert hits[0].date_start == D(1852, 4, 2)
            bad = api.post(url, headers=headers, data={"entries": "perhaps"},
                           files={"files": ("journal.txt", JOURNAL)})
            assert bad.status_code == 422  # a form value that is no boolean: a 4xx, never a 5xx
    finally:
        client.drop_collection("journal_upload")
