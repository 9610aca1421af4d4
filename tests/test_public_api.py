"""The public surface: every pgcite type a public signature names is exported by ``pgcite``."""

from __future__ import annotations

import inspect
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
