"""The public surface: every pgcite type a public signature names is exported by ``pgcite``."""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
import typing

import pytest

import pgcite

PUBLIC = [pgcite.Client, pgcite.Collection, pgcite.SearchView, pgcite.connect, pgcite.Exhibit,
          pgcite.citation_source, pgcite.citation_page]


def _pgcite_types(hint: object) -> set[type]:
    """The pgcite classes inside a (possibly generic or union) annotation."""
    found: set[type] = set()
    if isinstance(hint, type) and hint.__module__.startswith("pgcite"):
        found.add(hint)
    for arg in typing.get_args(hint):
        found |= _pgcite_types(arg)
    return found


def _signatures() -> dict[str, set[type]]:
    named: dict[str, set[type]] = {}
    for owner in PUBLIC:
        members = ([("", owner)] if inspect.isfunction(owner) else
                   [(n, m) for n, m in inspect.getmembers(owner, inspect.isfunction)
                    if not n.startswith("_") or n == "__init__"])
        for name, fn in members:
            # names the module imports only for type checking (deferred for import time) are
            # resolved among pgcite's exports, which is the point of the check
            exports = {n: getattr(pgcite, n) for n in pgcite.__all__}
            hints = typing.get_type_hints(
                fn, globalns={**exports, **inspect.unwrap(fn).__globals__})
            named[f"{owner.__name__}.{name}"] = set().union(*map(_pgcite_types, hints.values()))
    return named


def test_every_type_in_a_public_signature_is_exported() -> None:
    exported = {getattr(pgcite, n) for n in pgcite.__all__}
    missing = {f"{where}: {t.__name__}" for where, found in _signatures().items()
               for t in found if t not in exported}
    assert not missing


def test_mode_and_fusion_are_literals() -> None:
    assert typing.get_args(pgcite.Mode) == ("keyword", "vector", "hybrid")
    assert set(typing.get_args(pgcite.Fusion)) == {"convex", "rrf"}
    hints = typing.get_type_hints(pgcite.SearchOptions)
    assert hints["fusion"] == pgcite.Fusion | None and hints["mode"] == pgcite.Mode


def test_one_hit_class() -> None:
    import pgcite.evaluate as ev

    assert "Hit" not in ev.__all__
    with pytest.warns(DeprecationWarning, match="ScoredHit"):
        old = ev.Hit
    assert old is ev.ScoredHit and old is not pgcite.Hit


# Each package's front door (docs/architecture.md, "Front doors"): what other packages may import
PACKAGES = ["pgcite", "pgcite.answer", "pgcite.embed", "pgcite.evaluate", "pgcite.index",
            "pgcite.ingest", "pgcite.lifecycle", "pgcite.llm", "pgcite.retrieve", "pgcite.store",
            "pgcite.service", "pgcite.mcp", "pgcite.ui"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_name_a_front_door_exports_resolves(package: str) -> None:
    """Names re-exported on first use (PEP 562) are only checked when used: a wrong module in a
    package's map would fail in a front door at run time, not at import."""
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        if isinstance(value, type) or inspect.isfunction(value):
            # the object itself (some are aliases: bm25_idf is idf), as its module defines it
            home = importlib.import_module(value.__module__)
            assert getattr(home, value.__name__) is value, name


def test_streaming_is_public() -> None:
    from pgcite import _streaming

    for name in ("stream_answer", "astream_answer", "Delta", "Final", "StreamEvent"):
        assert name in pgcite.__all__ and getattr(pgcite, name) is getattr(_streaming, name)


def test_the_cli_help_does_not_load_the_library() -> None:
    """`pgcite --help` names the commands and stays fast: the front doors' re-exports are lazy,
    so it loads neither pydantic, psycopg nor numpy, nor any package but the CLI's and embed's
    constants (bench/cli.py times it)."""
    code = ("import contextlib, io, json, sys\n"
            "sys.argv = ['pgcite', '--help']\n"
            "from pgcite.cli import app\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "    app()\n"
            "print(json.dumps(sorted(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    loaded = set(json.loads(out))
    assert "pgcite.cli._search" in loaded  # the commands are there
    assert not loaded & {"pydantic", "psycopg", "numpy", "httpx", "fastapi", "onnxruntime"}
    packages = {m.split(".")[1] for m in loaded if m.startswith("pgcite.")}
    assert packages <= {"cli", "embed", "_errors", "_modes", "_lazy"}, packages
