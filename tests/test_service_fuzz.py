"""Schemathesis against /openapi.json: a few hundred generated requests (valid and invalid),
with and without a key, never a 5xx."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pgcite
from pgcite.service import ServiceConfig, create_app, create_key

schemathesis = pytest.importorskip("schemathesis")
from schemathesis import GenerationMode  # noqa: E402

DOCS = [
    {"_id": "f-1", "date": "1665-06-07", "corpus": "A", "author": "A. Writer", "year": 1665,
     "text": "The plague is come to the city; houses are shut up with a red cross."},
    {"_id": "f-2", "date": "1666-09-02", "corpus": "B", "author": "B. Writer", "year": 1666,
     "text": "A great fire burned for days, and we buried cheese and wine in the garden."},
]
MAX_EXAMPLES = 300


def test_no_5xx_under_fuzzing(client: pgcite.Client, tmp_path: Path) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    client.create_collection("fuzz").ingest([path])
    with client.db.transaction() as conn:
        token = create_key(conn, "fuzz", "admin").token
    app = create_app(client=client, config=ServiceConfig(warm_up=False))
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 9
    keyed = {"Authorization": f"Bearer {token}"}
    strategies = [
        op.as_strategy(mode, path_parameters={"collection": "fuzz"}, headers=keyed)
        for op in operations for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    ] + [op.as_strategy(GenerationMode.POSITIVE) for op in operations]  # random names, no key

    @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=st.one_of(strategies))
    def run(case: schemathesis.Case) -> None:
        response = case.call()
        assert response.status_code < 500, (
            f"{case.method} {case.formatted_path} -> {response.status_code}: "
            f"{response.text[:500]}")

    run()

