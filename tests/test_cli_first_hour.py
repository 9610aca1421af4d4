"""What a new user saw in their first hour (issue 35, item 6), each fixed: install hints that keep
their brackets, one name for the date field, a readable `documents list` at 80 columns, plurals,
no "route applied: hyde" without a model, no stray pypdf line, the demo's calendar."""

from __future__ import annotations

import datetime as dt
import io
import json
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import pgcite
from pgcite.cli import app
from pgcite.cli._common import fail
from pgcite.cli._demo import CALENDAR, pepys_day
from pgcite.cli._documents import document_table
from pgcite.cli._ingest import print_report
from pgcite.config import Settings
from pgcite.ingest._pipeline import IngestReport
from pgcite.store._documents import DocumentInfo

runner = CliRunner()


def cli(settings: Settings, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--data-dir", str(settings.data_dir), *args])
    return result.exit_code, result.stdout, result.stderr


def test_install_hints_keep_their_brackets(settings: Settings,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pgcite.mcp", None)  # the mcp extra not installed
    code, _, err = cli(settings, "mcp")
    assert code == 2 and "hint: pip install 'pgcite[mcp]'" in err, err


def test_every_message_and_hint_prints_brackets_as_written(
        capsys: pytest.CaptureFixture[str]) -> None:
    fail("file [draft].md is unreadable", hint="pip install 'pgcite[local-llm]'")
    err = capsys.readouterr().err
    assert "file [draft].md is unreadable" in err and "pgcite[local-llm]" in err


def test_one_name_for_the_date(diary: pgcite.Collection, settings: Settings) -> None:
    code, out, _ = cli(settings, "documents", "list", diary.name, "--json", "--limit", "1")
    (doc,) = json.loads(out)
    assert code == 0 and "date" in doc and "dateStart" not in doc and "dateEnd" in doc
    code, out, _ = cli(settings, "search", diary.name, "fire", "--json", "--top-k", "1")
    (hit,) = json.loads(out)["hits"]
    assert "date" in hit and "dateStart" not in hit and "date_start" not in hit
    listed = diary.documents(limit=1)[0]
    assert listed.date == listed.date_start == dt.date.fromisoformat(doc["date"])
    found = diary.search("fire", top_k=1).hits[0]
    assert found.date == found.date_start
    # read back from either spelling
    assert DocumentInfo.model_validate({**doc, "dateStart": doc["date"]}).date == listed.date


def test_documents_list_reads_at_80_columns() -> None:
    docs = [
        DocumentInfo(id="field-notes-arthington-valley-md",
                     title="Field notes > Arthington valley and the Wharfe",
                     date_start=dt.date(1851, 5, 2), date_end=dt.date(1851, 5, 3),
                     author="John Hartley of Leeds, surveyor", corpus="letters", source="x",
                     chunks=12),
        DocumentInfo(id="scan-png", title=None, date_start=None, date_end=None, author=None,
                     corpus=None, source="scan.png", chunks=3),
    ]
    console = Console(width=80, file=io.StringIO(), soft_wrap=True)
    console.print(document_table(docs, console.width))
    lines = console.file.getvalue().rstrip("\n").split("\n")  # type: ignore[attr-defined]
    assert len(lines) == 2 + len(docs)  # a header, its rule, one line per document
    assert all(len(line.rstrip()) <= 80 for line in lines), lines
    assert lines[2].startswith("field-notes-arthington-valley-md  Field notes")  # id whole
    assert "1851-05-02–03" in lines[2] and "undated" in lines[3]
    wide = Console(width=160, file=io.StringIO(), soft_wrap=True)
    wide.print(document_table(docs, wide.width))
    assert "John Hartley of Leeds, surveyor" in wide.file.getvalue()  # type: ignore[attr-defined]


def test_one_page_read_by_ocr_is_singular(capsys: pytest.CaptureFixture[str]) -> None:
    print_report(IngestReport(collection="c", ocr_pages=1))
    print_report(IngestReport(collection="c", ocr_pages=3))
    out = capsys.readouterr().out
    assert "1 page read by OCR" in out and "3 pages read by OCR" in out


def test_no_hyde_route_is_claimed_without_a_model(diary: pgcite.Collection, settings: Settings,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PGCITE_LLM", raising=False)
    question = "what did the man do to keep his belongings safe from the spreading flames"
    result = diary.search(question)
    (route,) = [e for e in result.stages if e.stage == "route"]
    assert route.detail.startswith("direct (heuristic)") and "not HyDE (no LLM" in route.detail
    code, out, _ = cli(settings, "search", diary.name, question)
    assert code == 0 and "route applied: direct" in out and "route applied: hyde" not in out


def test_the_hyde_route_without_a_model_is_the_plain_hybrid(
        diary: pgcite.Collection, monkeypatch: pytest.MonkeyPatch) -> None:
    # It used to weigh the legs 0.2 / 0.8, which lowered these questions on every Pepys set.
    monkeypatch.delenv("PGCITE_LLM", raising=False)
    question = "what did the man do to keep his belongings safe from the spreading flames"
    routed = diary.search(question, top_k=10, snippets=False)
    plain = diary.search(question, top_k=10, snippets=False, stages={"route": False})
    assert [(h.id, round(h.score, 6)) for h in routed.hits] == [
        (h.id, round(h.score, 6)) for h in plain.hits]


def test_the_demo_states_its_calendar() -> None:
    assert "New Style (Gregorian)" in CALENDAR and "Old Style (Julian)" in CALENDAR
    sample = Path(pgcite.__file__).parent / "data" / "pepys-1666-autumn.jsonl"
    records = [json.loads(line) for line in sample.read_text().splitlines()]
    fire = next(r for r in records if r["date"] == "1666-09-12")

    class Hit:  # what the demo's hits carry: the record's keys as metadata
        metadata = {k: v for k, v in fire.items() if k in ("date_label", "section")}

    assert pepys_day(Hit()) == "O.S. 2nd (Lord’s day), September 1666"  # 1666-09-12 N.S.
