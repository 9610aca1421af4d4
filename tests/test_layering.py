"""The architecture stays true: the import contract, and the hybrid statement read whole."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from psycopg import sql

from pgcite.retrieve._filters import Filters, compile_filters
from pgcite.retrieve._sql import build_search_sql

ROOT = Path(__file__).parent.parent
GOLDEN = Path(__file__).parent / "golden"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=300)


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """A copy of the sources and the contract (pyproject.toml) to break."""
    shutil.copytree(ROOT / "src", tmp_path / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is in the dev extra")
def test_the_contract_fails_on_an_upward_import(tree: Path) -> None:
    before = _lint(tree)
    # lint-imports wraps its report at the terminal's width: compare with whitespace collapsed
    assert "pgcite.store is not allowed to import pgcite.retrieve" not in _flat(before.stdout)
    database = tree / "src" / "pgcite" / "store" / "_database.py"
    database.write_text(database.read_text() + "\nfrom pgcite.retrieve import Filters  # noqa\n")
    after = _lint(tree)
    assert after.returncode != 0, after.stdout
    assert "pgcite.store is not allowed to import pgcite.retrieve" in _flat(after.stdout)


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is in the dev extra")
def test_a_new_top_level_module_must_be_placed_in_a_layer(tree: Path) -> None:
    (tree / "src" / "pgcite" / "_helpers.py").write_text('"""Unplaced."""\n')
    result = _lint(tree)
    assert result.returncode != 0 and "pgcite._helpers" in _flat(result.stdout)


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is in the dev extra")
def test_a_front_door_may_not_import_a_private_module(tree: Path) -> None:
    """service, cli, mcp, ui and integrations go through `pgcite` and the packages' __init__s:
    a private module of a package below, or of another front door, breaks a contract."""
    assert _lint(tree).returncode == 0
    routes = tree / "src" / "pgcite" / "ui" / "_routes.py"
    routes.write_text(routes.read_text() + "\nfrom pgcite.store._snapshots import activations"
                      "  # noqa\nfrom pgcite._client import Client  # noqa\n")
    key = tree / "src" / "pgcite" / "cli" / "_key.py"
    key.write_text(key.read_text() + "\nfrom pgcite.service._keys import list_keys  # noqa\n")
    after = _flat(_lint(tree).stdout)
    assert "pgcite.ui is not allowed to import pgcite.store._snapshots" in after
    assert "pgcite.ui is not allowed to import pgcite._client" in after
    assert "pgcite.cli._key -> pgcite.service._keys" in after


def test_the_architecture_picture_is_drawn_from_the_real_graph() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    result = subprocess.run([sys.executable, str(ROOT / "docs" / "make_architecture.py"),
                             "--check"], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


# --- the hybrid statement, whole ----------------------------------------------------------------

CASES = {
    # the default: convex fusion, filtered, with a quoted-phrase constraint
    "hybrid_convex": dict(mode="hybrid", fusion="convex", constraint=True, filtered=True,
                          term_depth=None),
    "hybrid_rrf_term_depth": dict(mode="hybrid", fusion="rrf", constraint=False, filtered=False,
                                  term_depth=1000),
    "keyword": dict(mode="keyword", fusion="convex", constraint=False, filtered=True,
                    term_depth=None),
    "vector_halfvec": dict(mode="vector", fusion="convex", constraint=False, filtered=True,
                           term_depth=None),
}


def _render(case: str) -> str:
    opts = CASES[case]
    compiled = compile_filters(Filters(cutoff=dt.date(1666, 9, 30), corpora=["A", "B"]), {})
    statement = build_search_sql(
        schema=sql.Identifier("pgc_diary"), ts_config="english", model_key="minilm@1",
        dim=384, halfvec=case.endswith("halfvec"), mode=opts["mode"],  # type: ignore[arg-type]
        filters=compiled.sql() if opts["filtered"] else sql.SQL("true"),
        constraint=bool(opts["constraint"]), filtered=bool(opts["filtered"]),
        fusion=opts["fusion"], fetch=30, limit=10,  # type: ignore[arg-type]
        term_depth=opts["term_depth"])  # type: ignore[arg-type]
    text = statement.as_string(None)
    return "\n".join(line.rstrip() for line in text.strip().splitlines()) + "\n"


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_rendered_statement_matches_its_golden_file(case: str) -> None:
    """A change to the SQL shows in review as a diff of tests/golden/*.sql. To accept one:
    PGCITE_UPDATE_GOLDEN=1 pytest tests/test_layering.py, then read the diff."""
    path = GOLDEN / f"{case}.sql"
    rendered = _render(case)
    if os.environ.get("PGCITE_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(rendered)
    assert path.exists(), f"no golden file {path.name}: run with PGCITE_UPDATE_GOLDEN=1"
    assert rendered == path.read_text()
