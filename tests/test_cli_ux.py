"""What users expect of the command line: eval --strict failing CI, skipped stages said out
loud, the demo's data found (or refused before anything is created)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import pgcite
from pgcite.cli import app
from pgcite.config import Settings

from .test_snapshots import write_golden

runner = CliRunner()


def cli(settings: Settings, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--data-dir", str(settings.data_dir), *args])
    return result.exit_code, result.stdout, result.stderr


def test_eval_strict_exits_1_naming_the_failed_floor(diary: pgcite.Collection,
                                                     settings: Settings,
                                                     tmp_path: Path) -> None:
    golden = str(write_golden(tmp_path))
    args = ("eval", diary.name, "--golden", golden, "--modes", "keyword", "--no-progress")
    # the house floors ask precision@10 >= 0.70: one relevant entry per query cannot reach it
    code, out, _ = cli(settings, *args)
    assert code == 0 and "keyword" in out  # without --strict, a report and exit 0
    code, out, err = cli(settings, *args, "--strict")
    assert code == 1 and "floors failed" in err and "keyword: precision@10 0." in err, err
    assert "keyword" in out  # the report is still printed
    code, out, err = cli(settings, *args, "--strict", "--json", "--floor", "precision@10=none",
                         "--floor", "recall@10=0.5", "--floor", "mrr@10=0.5",
                         "--floor", "pass_rate=0.5")
    assert code == 0, err
    assert json.loads(out)["configurations"]["keyword"] and "every floor met" in err
    code, _, err = cli(settings, *args, "--strict", "--floor", "ndcg@10=1")
    assert code == 1 and "ndcg@10" in err and "< floor 1.00" in err
    code, _, err = cli(settings, *args, "--strict", "--floor", "recall=2")
    assert code == 2 and "bad floor" in err and "Traceback" not in err


def test_a_stage_asked_for_but_skipped_says_so(diary: pgcite.Collection, settings: Settings,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("PGCITE_LLM", "PGCITE_LLM_BASE_URL", "PGCITE_RERANKER"):
        monkeypatch.delenv(var, raising=False)
    # the router is on by default: a long question without names is not the keyword route
    code, out, _ = cli(settings, "search", diary.name, "fire", "--hyde")
    assert code == 0 and "note: hyde skipped: no LLM configured" in out, out
    code, out, _ = cli(settings, "search", diary.name, "fire", "--hyde", "--no-route")
    assert code == 0 and "note: hyde skipped: no LLM configured" in out, out
    code, out, _ = cli(settings, "search", diary.name, "fire", "--rerank")
    assert "note: rerank skipped: no reranker configured" in out, out
    code, out, _ = cli(settings, "ask", diary.name, "What burned?", "--hyde", "--no-trace")
    assert code == 0 and "note: hyde skipped: no LLM configured" in out, out
