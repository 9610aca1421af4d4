"""Reports: results.json, report.md, report.html, TREC runs, and compare_results."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from pgcite._errors import ConfigError
from pgcite.evaluate import (
    EvalResult,
    GoldenQuery,
    ScoredHit,
    Searcher,
    SearchOutcome,
    compare_results,
    evaluate,
    load_golden,
    load_result,
    read_trec_run,
    save_runs,
    score_external_run,
    write_reports,
)
from pgcite.evaluate._report import safe_name, signed

FIXTURES = Path(__file__).parent / "fixtures" / "eval"


def _searcher(miss: set[str]) -> Searcher:
    def search(query: GoldenQuery) -> SearchOutcome:
        if query.kind == "absent":
            return SearchOutcome(
                hits=[ScoredHit("x-a", "x", 0.1)], confidence=0.1, timings_ms={"database": 2.0}
            )
        docs = ["x"] if query.id in miss else [*sorted(query.relevant), "x"]
        hits = [ScoredHit(f"{d}-a", d, 1.0 - i / 10) for i, d in enumerate(docs)]
        return SearchOutcome(hits=hits, confidence=0.9, timings_ms={"database": 3.0})

    return search


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> tuple[EvalResult, EvalResult]:
    golden = load_golden(FIXTURES / "golden.jsonl")
    a = evaluate(
        golden, {"hybrid": _searcher({"g1"}), "vector a|b": _searcher(set())}, progress=False
    )
    b = evaluate(golden, {"hybrid": _searcher(set())}, progress=False)
    return a, b


def test_write_reports_writes_three_files(
    results: tuple[EvalResult, EvalResult], tmp_path: Path
) -> None:
    a, _ = results
    paths = write_reports(a, tmp_path / "out")
    assert {p.name for p in paths.values()} == {"results.json", "report.md", "report.html"}
    without_runs = {"configurations": {"__all__": {"run"}}}
    loaded = load_result(paths["json"])
    assert loaded.model_dump(exclude=without_runs) == a.model_dump(exclude=without_runs)
    assert all(c.run == {} for c in loaded.configurations.values())  # runs go to TREC files
    assert load_result(tmp_path / "out") == loaded  # the folder works too
    with pytest.raises(ConfigError, match="has no run to save"):
        save_runs(loaded, tmp_path / "runs")
    with_runs = write_reports(a, tmp_path / "full", include_runs=True)
    assert load_result(with_runs["json"]) == a

    markdown = paths["markdown"].read_text()
    for heading in ("## Metrics by configuration", "## ndcg@10 by query kind", "## Safety",
                    "## Abstention thresholds", "## Latency", "## Latency budgets"):  # fmt: skip
        assert heading in markdown
    assert (
        "| metric | hybrid | vector a\\|b |" in markdown
    )  # a pipe in a name cannot break the table
    assert "PASS  database p50 <= 4 ms (goal)" in markdown

    page = paths["html"].read_text()
    images = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)">', page)
    assert len(images) == 3  # metrics, per kind, latency
    assert all(base64.b64decode(img).startswith(b"\x89PNG\r\n\x1a\n") for img in images)
    assert "<table>" in page and "vector a|b" in page and "<script" not in page


def test_report_for_a_run_file_has_no_latency(
    results: tuple[EvalResult, EvalResult], tmp_path: Path
) -> None:
    golden = load_golden(FIXTURES / "golden.jsonl")
    run_path = save_runs(results[0], tmp_path)["hybrid"]
    paths = write_reports(score_external_run(golden, run_path), tmp_path / "ext")
    markdown = paths["markdown"].read_text()
    assert "## Latency" not in markdown and "## Safety" not in markdown
    assert "IR metrics only" in markdown
    assert paths["html"].read_text().count("data:image/png;base64,") == 2


def test_save_runs_writes_trec_files_in_rank_order(
    results: tuple[EvalResult, EvalResult], tmp_path: Path
) -> None:
    a, _ = results
    paths = save_runs(a, tmp_path / "runs")
    assert {p.name for p in paths.values()} == {"hybrid.trec", "vector_a_b.trec"}
    for name, path in paths.items():
        back = read_trec_run(path)
        assert {q: [d for d, _ in r] for q, r in back.items()} == {
            q: [d for d, _ in r] for q, r in a.configurations[name].run.items() if r
        }
    assert path.read_text().split()[5] == "vector_a_b"


def test_compare_results_shows_signed_deltas(
    results: tuple[EvalResult, EvalResult], tmp_path: Path
) -> None:
    a, b = results
    pa = write_reports(a, tmp_path / "a")["json"]
    pb = write_reports(b, tmp_path / "b")["json"]
    text = compare_results(pa, pb)
    ha, hb = a.configurations["hybrid"], b.configurations["hybrid"]
    delta = hb.overall["ndcg@10"] - ha.overall["ndcg@10"]
    assert delta > 0
    assert re.search(
        rf"overall\s+ndcg@10\s+{ha.overall['ndcg@10']:.3f}\s+{hb.overall['ndcg@10']:.3f}\s+\+{delta:.3f}",
        text,
    )
    assert re.search(r"fact\s+ndcg@10\s+0\.000\s+1\.000\s+\+1\.000", text)
    assert re.search(r"keyword\s+ndcg@10\s+1\.000\s+1\.000\s+\+0\.000", text)
    assert re.search(r"latency ms\s+database p50\s+", text)
    assert "only in A: vector a|b" in text
    backwards = compare_results(pb, pa)
    assert re.search(r"fact\s+ndcg@10\s+1\.000\s+0\.000\s+-1\.000", backwards)


def test_signed_and_safe_name() -> None:
    assert signed(0.0123) == "+0.012"
    assert signed(-0.0031) == "-0.003"
    assert signed(-0.0001) == "+0.000"  # no "-0.000"
    assert safe_name("bm25 + dense/v2") == "bm25_dense_v2"
