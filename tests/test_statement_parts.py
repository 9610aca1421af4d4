"""Each named part of the search statement and of the keyword index's writer, rendered, against
its golden file (tests/golden/parts/): a change to one shows in review as the diff of that part.
To accept one: PGCITE_UPDATE_GOLDEN=1 pytest tests/test_statement_parts.py, then read the diff.

The keyword leg's parts are rendered for its three shapes: exact and unfiltered (the skipping
parts, kw_scored's four branches each on its own: completed from tsvectors, probed through
sparse postings and dense rows, long lists added, every posting summed), exact and filtered (the
best-first reads of kw_head and kw_top), and term_depth (each list's prefix summed)."""

from __future__ import annotations

import math
import os
import random
import re
from pathlib import Path

import pytest
from psycopg import sql

from pgcite.index import K1, B, KeywordLeg, densify, idf_value, weight_value
from pgcite.index._writer import finish_snapshot, segment_sql
from pgcite.retrieve import _sql

PARTS = Path(__file__).parent / "golden" / "parts"
SCHEMA = sql.Identifier("pgc_diary")
FILTER = sql.SQL("JOIN {s}.chunks c USING (chunk_pk) WHERE c.date_end <= %(cutoff)s ").format(
    s=SCHEMA)
LEGS = {
    "exact": KeywordLeg(schema=SCHEMA, ts_config="english", fetch=30),
    "filtered": KeywordLeg(schema=SCHEMA, ts_config="english", fetch=30, join=FILTER),
    "term_depth": KeywordLeg(schema=SCHEMA, ts_config="english", fetch=30, term_depth=1000),
    # a snapshot whose lists are all short and which deleted no chunk: no skipping parts, no
    # check for deleted chunks
    "short": KeywordLeg(schema=SCHEMA, ts_config="english", fetch=30, longest_list=10_000,
                        deletions=False),
}


def _rendered() -> dict[str, sql.Composable]:
    parts: dict[str, sql.Composable] = {}
    exact_parts = {cte.name: cte.render().as_string(None) for cte in LEGS["exact"].ctes()}
    for shape, leg in LEGS.items():
        for cte in leg.ctes():  # the other shapes: the parts they render otherwise
            if shape == "exact" or cte.render().as_string(None) != exact_parts.get(cte.name):
                parts[f"keyword/{shape}/{cte.name}"] = cte.render()
    exact = LEGS["exact"]
    for branch in ("completed", "probed", "added", "every"):
        parts[f"keyword/exact/kw_scored.{branch}"] = getattr(exact, branch)()
    for cte in _sql.evidence(SCHEMA, "english"):
        parts[f"statement/{cte.name}"] = cte.render()
    for halfvec in (False, True):
        for cte in _sql.vector_leg(schema=SCHEMA, model_key="minilm@1", dim=384,
                                   halfvec=halfvec, filters=sql.SQL("true"),
                                   constraint=sql.SQL(""), fetch=30):
            parts[f"statement/{cte.name}{'.halfvec' if halfvec else ''}"] = cte.render()
    for fusion in ("convex", "rrf"):
        parts[f"statement/fuse.{fusion}"] = _sql.fuse(SCHEMA, fusion, 10)  # type: ignore[arg-type]
    parts["writer/segment"] = segment_sql(SCHEMA)
    return parts


def _text(part: sql.Composable) -> str:
    text = part.as_string(None)
    return "\n".join(line.rstrip() for line in text.strip().splitlines()) + "\n"


@pytest.mark.parametrize("name", sorted(_rendered()))
def test_each_part_matches_its_golden_file(name: str) -> None:
    path = PARTS / f"{name}.sql"
    rendered = _text(_rendered()[name])
    if os.environ.get("PGCITE_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rendered)
    assert path.exists(), f"no golden file {path}: run with PGCITE_UPDATE_GOLDEN=1"
    assert rendered == path.read_text()


def test_no_golden_file_is_left_over() -> None:
    """A part renamed or removed takes its golden file with it."""
    names = {f"{n}.sql" for n in _rendered()}
    assert sorted(str(p.relative_to(PARTS)) for p in PARTS.rglob("*.sql")) == sorted(names)


def test_the_statement_is_its_parts() -> None:
    """The whole statement is the parts above, in order, and the fusion: nothing is spliced in
    beside them."""
    statement = _sql.build_search_sql(
        schema=SCHEMA, ts_config="english", model_key="minilm@1", dim=384, halfvec=False,
        mode="hybrid", filters=sql.SQL("true"), constraint=False, filtered=False,
        fetch=30, limit=10)
    ctes = [*LEGS["exact"].ctes(), *_sql.evidence(SCHEMA, "english"),
            *_sql.vector_leg(schema=SCHEMA, model_key="minilm@1", dim=384, halfvec=False,
                             filters=sql.SQL("true"), constraint=sql.SQL(""), fetch=30)]
    whole = sql.SQL("WITH {}\n{}").format(sql.SQL(", ").join(c.render() for c in ctes),
                                         _sql.fuse(SCHEMA, "convex", 10))
    assert statement.as_string(None) == whole.as_string(None)


def test_the_bm25_weight_is_written_once() -> None:
    """Every statement that weighs a posting, bounds a block or orders a list renders the
    weight from pgcite/index/_bm25.py: its shape (tf + base + slope * len) appears in the
    parts and the writer, and the textbook form nowhere."""
    texts = {name: re.sub(r"--[^\n]*", "", _text(part)) for name, part in _rendered().items()}
    weighing = [n for n, t in texts.items() if " + st.slope * " in t or "(SELECT slope FROM"
                in t or "%(k1)s * %(b)s / st.avgdl" in t]
    assert {"keyword/exact/kw_long", "keyword/exact/kw_scored.completed",
            "keyword/exact/kw_scored.probed", "keyword/exact/kw_scored.every",
            "keyword/term_depth/kw_scored", "writer/segment"} <= set(weighing)
    assert not [n for n, t in texts.items() if "(1 - b + b *" in t.replace("p_b", "b")]
    src = Path(__file__).parent.parent / "src" / "pgcite"
    assert not [p for p in src.rglob("*.py") if re.search(r"1 - b\w* \+ b", p.read_text(),
                                                          re.IGNORECASE)
                and p.name != "_bm25.py"]


def test_the_python_twins_agree_with_the_textbook_formula() -> None:
    rng = random.Random(5)
    for _ in range(200):
        n, df = rng.randint(1, 10**6), rng.randint(1, 1000)
        tf, length, avgdl = rng.randint(1, 40), rng.randint(1, 400), rng.uniform(5, 300)
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        assert idf_value(n, df) == pytest.approx(idf, rel=1e-12)
        textbook = idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avgdl))
        assert weight_value(idf, tf, length, avgdl) == pytest.approx(textbook, rel=1e-12)


def test_densify_and_finish_compose() -> None:
    """The other writer statements compose without error (their SQL runs in test_segments)."""
    assert callable(densify) and callable(finish_snapshot)
