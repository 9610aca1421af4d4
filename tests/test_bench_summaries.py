"""A lean repository: benchmarks commit small summaries, and the README's tables come from them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from pgcite.evaluate import evaluate, load_golden, load_result, write_summary
from tests.test_eval_report import FIXTURES, _searcher

ROOT = Path(__file__).parent.parent


def test_a_summary_keeps_every_figure_and_no_per_query_row(tmp_path: Path) -> None:
    result = evaluate(load_golden(FIXTURES / "golden.jsonl"), {"hybrid": _searcher({"g1"})},
                      progress=False)
    paths = write_summary(result, tmp_path)
    data = json.loads(paths["summary"].read_text())
    config = data["configurations"]["hybrid"]
    assert not {"queries", "latency_samples_ms", "run"} & set(config)
    back = load_result(paths["summary"])  # pgcite eval --compare reads summaries too
    assert back.configurations["hybrid"].overall == result.configurations["hybrid"].overall
    assert back.configurations["hybrid"].queries == []
    assert (tmp_path / "report.md").exists() and not (tmp_path / "results.json").exists()


def test_the_readme_tables_regenerate_from_the_committed_summaries() -> None:
    readme = ROOT / "bench" / "README.md"
    code = ("import sys; sys.path.insert(0, 'bench'); import make_readme; "
            "print(make_readme.tables())")
    tables = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, check=True, timeout=120).stdout.strip()
    assert tables.count("\n") > 40 and f"<!-- results:start -->\n{tables}\n" in readme.read_text()


def test_the_suites_table_is_run_py_and_every_script_is_in_a_suite() -> None:
    """bench/README.md's suites table is bench/run.py's SUITES, and every benchmark script in
    bench/ is a step of some suite (a script no suite runs is an experiment kept by mistake)."""
    code = ("import sys, json; sys.path.insert(0, 'bench'); import make_readme, run; "
            "print(json.dumps([make_readme.suites(), sorted({s.script for suite in "
            "run.SUITES.values() for s in suite.steps})]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True, timeout=120).stdout
    table, steps = json.loads(out)
    assert f"<!-- suites:start -->\n{table}\n<!-- suites:end -->" in (
        ROOT / "bench" / "README.md").read_text()
    scripts = {p.name for p in (ROOT / "bench").glob("*.py")
               if not p.name.startswith("_") and p.name not in {"run.py", "make_readme.py"}}
    assert scripts == set(steps)


def test_a_smoke_run_runs_only_the_scripts_own_small_modes() -> None:
    done = subprocess.run([sys.executable, "bench/run.py", "answers", "--smoke", "--dry-run"],
                          cwd=ROOT, capture_output=True, text=True, check=True, timeout=120)
    lines = done.stderr.splitlines()
    assert "$ python bench/selfcheck.py --quick --out bench/.smoke/selfcheck" in lines
    assert "skip bench/narrative.py: no smoke mode" in lines
    assert not any(line.startswith("$ python bench/answers.py") for line in lines)


def test_no_per_query_detail_is_tracked() -> None:
    tracked = subprocess.run(["git", "ls-files", "bench/results"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    if not tracked:  # not a git checkout (an sdist): nothing to check
        return
    heavy = [p for p in tracked if p.endswith(("results.json", "report.html", "stage_events.json"))
             or "/runs/" in p]
    assert not heavy


def test_the_readmes_figures_are_their_summaries() -> None:
    """Every figure README.md quotes is marked and written from its benchmark's summary
    (bench/make_readme.py FIGURES): rewriting them changes nothing, and none is left unmarked
    in the section that quotes them."""
    code = ("import sys; sys.path.insert(0, 'bench'); import make_readme; "
            "print(make_readme.readme_figures(open('README.md').read()), end='')")
    readme = (ROOT / "README.md").read_text()
    written = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                             text=True, check=True, timeout=120).stdout
    assert written == readme
    measured = readme[readme.index("## Measured"):readme.index("## How it is built")]
    bare = re.sub(r"<!-- fig:[a-z0-9-]+ -->.*?<!-- /fig -->", "", measured)
    assert not re.findall(r"\b0\.\d{2,3}\b", bare), "a figure README quotes without its marker"
    assert measured.count("<!-- fig:") >= 20
