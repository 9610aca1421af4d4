"""Switching the embedding model (MiniLM → multilingual e5) through a new snapshot, while the old
one keeps answering; a query is only ever embedded with its snapshot's model."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pgcite
from pgcite import lifecycle
from pgcite.config import Settings
from pgcite.embed._registry import load_embedder
from pgcite.store._collections import vector_index_name
from pgcite.store._snapshots import activations

from .conftest import DIARY
from .test_snapshots import SECRET, cli, visible_chunks, write_lines

E5 = "multilingual-e5-small"


class Spy:
    """Counts embed_query calls per model."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, settings: Settings) -> None:
        self.calls: Counter[str] = Counter()
        for model in ("all-MiniLM-L6-v2", E5):
            embedder = load_embedder(model, settings)
            real = embedder.embed_query

            def counted(text: str, _real: Any = real, _model: str = model) -> Any:
                self.calls[_model] += 1
                return _real(text)

            monkeypatch.setattr(embedder, "embed_query", counted)


@pytest.mark.slow
def test_minilm_to_e5_switch(client: pgcite.Client, settings: Settings, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    col = client.create_collection("e5_switch")
    assert col.ingest([DIARY]).activated
    old = col.active_snapshot()
    e5_key = load_embedder(E5, settings).spec.model_key
    spy = Spy(monkeypatch, settings)

    # Queries keep running while the new model's snapshot is built and activated.
    stop, errors, answers = threading.Event(), [], []

    def query() -> None:
        while not stop.is_set():
            try:
                r = col.search("the great fire", top_k=3)
                answers.append((r.snapshot_id, r.embedding_model))
            except Exception as exc:
                errors.append(repr(exc))
            time.sleep(0.02)  # leave the CPU to the re-embedding

    runner = threading.Thread(target=query)
    runner.start()
    try:
        out = cli(settings, "snapshot", "build", col.name, "--embedder", E5, "--json",
                  "--no-progress")
        assert out.exit_code == 0, out.output
        built = json.loads(out.stdout)
        new = built["snapshot_id"]
        assert not built["activated"] and built["embedded"] + built["cached"] == 15
        # the old snapshot still serves, the collection still records MiniLM
        assert col.active_snapshot().snapshot_id == old.snapshot_id
        assert client.collection(col.name).info.embedder.model_key == old.embed_model
        result = lifecycle.activate(col, new)
    finally:
        stop.set()
        runner.join(30)
    assert errors == [] and answers
    models = {snap: model for snap, model in answers}
    assert models[old.snapshot_id] == old.embed_model
    assert all(model == {old.snapshot_id: old.embed_model, new: e5_key}[snap]
               for snap, model in answers)

    # the switch: same citation ids and bodies, new vectors, new partial index, new record
    assert result.embedder == e5_key
    assert visible_chunks(col, new) == visible_chunks(col, old.snapshot_id)
    assert client.collection(col.name).info.embedder.model_key == e5_key
    with client.connection() as conn:
        indexes = {r[0] for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (col.info.schema_name,))}
        log = activations(conn, col.info)
    assert {vector_index_name(old.embed_model), vector_index_name(e5_key)} <= indexes
    assert log[-1].detail["embedder"] == {"from": old.embed_model, "to": e5_key}

    # after the switch the same Collection object embeds with e5, and only e5
    spy.calls.clear()
    after = col.search("Where did he bury the cheese?", top_k=3)
    assert after.embedding_model == e5_key and after.snapshot_id == new
    assert spy.calls == Counter({E5: 1})
    e5_vector = load_embedder(E5, settings).embed_query("Where did he bury the cheese?")
    same = col.search("Where did he bury the cheese?", top_k=3, query_vector=e5_vector)
    assert [h.id for h in same.hits] == [h.id for h in after.hits]
    assert after.hits[0].document_id in {"d-1666-09-04", "e-1666-09-05"}
    with pytest.raises(pgcite.EmbedderError, match="768 dimensions"):
        col.search("cheese", mode="vector", query_vector=np.ones(768, dtype=np.float32))

    # ingest now embeds with the recorded e5; rollback brings MiniLM back, record included
    added = col.ingest([write_lines(tmp_path / "s.jsonl", [json.dumps(SECRET)])])
    assert added.activated and col.active_snapshot().embed_model == e5_key
    back = lifecycle.rollback(col)
    assert back.snapshot_id == new  # the previous of the post-ingest snapshot
    lifecycle.activate(col, old.snapshot_id)
    assert client.collection(col.name).info.embedder.model_key == old.embed_model
    assert col.search("fire", top_k=1).embedding_model == old.embed_model
    client.drop_collection(col.name)
