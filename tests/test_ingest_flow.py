"""The write path's flow (ingest/_flow.py): groups of chunks are stored while later groups are
still being embedded, in the one transaction of the ingest, so a failure anywhere leaves nothing
visible; the report says where the time went, stage by stage."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

import pgcite
from pgcite.ingest import _flow
from pgcite.ingest._pipeline import ingest
from pgcite.ingest._stages import STAGES, StageClock

N_DOCS = 40


def _source(folder: Path, salt: str) -> Path:
    """Short dated records, one chunk each, text unique to this test run (cold caches)."""
    path = folder / "records.jsonl"
    path.write_text("".join(json.dumps({
        "_id": f"r-{i:02d}", "date": f"1666-09-{1 + i % 28:02d}",
        "text": f"Record {i} of {salt}: to the office, then by water to Deptford."}) + "\n"
        for i in range(N_DOCS)))
    return path


def _stored(client: pgcite.Client, name: str) -> tuple[int, int]:
    info = client.collection(name).info
    with client.db.connect() as conn:
        row = conn.execute(sql.SQL("SELECT (SELECT count(*) FROM {s}.versions),"
                                   " (SELECT count(*) FROM {s}.snapshots)").format(
            s=info.schema_id)).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_groups_are_stored_while_later_ones_are_embedded(
        client: pgcite.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of 1 make groups of 8 chunks, five groups: the first group is in the database
    before the last one is embedded (before the flow, nothing was stored until every chunk
    was), in document order, and the result is the same collection as ever."""
    events: list[tuple[str, float]] = []
    lock = threading.Lock()
    embed, store = _flow.embed_with_cache, _flow.insert_versions

    def slow_embed(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.2)  # a group's embedding takes a while, as it does on real data
        out = embed(*args, **kwargs)
        with lock:
            events.append(("embedded", time.monotonic()))
        return out

    def recorded_store(*args: Any, **kwargs: Any) -> Any:
        with lock:
            events.append(("stored", time.monotonic()))
        return store(*args, **kwargs)

    monkeypatch.setattr(_flow, "embed_with_cache", slow_embed)
    monkeypatch.setattr(_flow, "insert_versions", recorded_store)
    client.drop_collection("flow_overlap", missing_ok=True)
    col = client.create_collection("flow_overlap")
    report = ingest(client.db, "flow_overlap", [_source(tmp_path, f"overlap {time.time_ns()}")],
                    progress=False, settings=client.settings.model_copy(
                        update={"embed_batch_size": 1}))
    assert report.activated and report.chunks_added == N_DOCS == report.embedded
    kinds = [kind for kind, _ in events]
    assert kinds.count("embedded") == kinds.count("stored") == N_DOCS // 8
    first_stored = kinds.index("stored")
    assert first_stored < len(kinds) - 1 - kinds[::-1].index("embedded"), kinds
    hits = col.search("Deptford", top_k=N_DOCS, options=pgcite.SearchOptions(mode="keyword"))
    assert sorted(h.id for h in hits.hits) == [f"r-{i:02d}-a" for i in range(N_DOCS)]
    client.drop_collection("flow_overlap")


@pytest.mark.parametrize("where", ["store", "embed"])
def test_a_failure_mid_flow_leaves_nothing_and_resumes_from_the_cache(
        client: pgcite.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        where: str) -> None:
    """The third group fails (in the database, or in the embedder) after two were stored: the
    ingest raises that error, nothing of it is visible (no version, no snapshot: they were in
    the one transaction), and a rerun embeds only what the cache lacks."""
    name = f"flow_fail_{where}"
    client.drop_collection(name, missing_ok=True)
    client.create_collection(name)
    source = _source(tmp_path, f"failure {where} {time.time_ns()}")
    calls = {"n": 0}
    target = "insert_versions" if where == "store" else "embed_with_cache"
    real = getattr(_flow, target)

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError(f"{where} failed")
        return real(*args, **kwargs)

    settings = client.settings.model_copy(update={"embed_batch_size": 1})
    with monkeypatch.context() as patch:
        patch.setattr(_flow, target, failing)
        with pytest.raises(RuntimeError, match=f"{where} failed"):
            ingest(client.db, name, [source], progress=False, settings=settings)
    assert _stored(client, name) == (0, 0)
    report = ingest(client.db, name, [source], progress=False, settings=settings)
    assert report.activated and report.chunks_added == N_DOCS
    assert report.cached >= 8 and report.embedded == N_DOCS - report.cached
    assert _stored(client, name) == (N_DOCS, 1)
    client.drop_collection(name)


def test_the_report_says_where_the_time_went(client: pgcite.Client, tmp_path: Path) -> None:
    client.drop_collection("flow_stages", missing_ok=True)
    col = client.create_collection("flow_stages")
    report = col.ingest([_source(tmp_path, f"stages {time.time_ns()}")], progress=False)
    stages = report.stages
    assert list(stages) == [s for s in STAGES if s in stages]  # in the order data flows
    assert {"load", "chunk", "embed", "store", "snapshot", "commit", "statistics"} <= set(stages)
    assert all(t.wall_s >= 0 and t.cpu_s >= 0 for t in stages.values())
    assert stages["embed"].cpu_s > 0 and stages["embed"].wall_s > 0
    # the embedded server runs here: its CPU on the stages that run in it is read
    assert stages["store"].db_cpu_s is not None and stages["store"].db_cpu_s >= 0
    assert stages["load"].db_cpu_s is None
    assert max(t.wall_s for t in stages.values()) <= report.seconds + 0.01
    assert json.loads(report.model_dump_json())["stages"]["store"]["wall_s"] >= 0
    client.drop_collection("flow_stages")


def test_stage_clock_adds_up_across_threads() -> None:
    clock = StageClock()
    threads = [threading.Thread(target=lambda: clock.add("embed", wall=0.5, cpu=0.25))
               for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with clock("chunk"):
        sum(i * i for i in range(200_000))
    times = clock.report()
    assert list(times) == ["chunk", "embed"]
    assert times["embed"].wall_s == 4.0 and times["embed"].cpu_s == 2.0
    assert times["chunk"].cpu_s > 0 and times["chunk"].db_cpu_s is None
    assert clock.cpu_s("embed", "missing") == 2.0
