"""Snapshot lifecycle against the real server: visibility, the gate, rollback, gc, the CLI."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from psycopg import sql
from typer.testing import CliRunner

import pgcite
from pgcite import lifecycle
from pgcite.cli import app
from pgcite.config import Settings
from pgcite.ingest import _pipeline
from pgcite.ingest._pipeline import ingest
from pgcite.lifecycle._gate import GateRefused
from pgcite.store._snapshots import activations

from .conftest import DIARY

# Judged queries over the diary fixture (tests/fixtures/diary/entries.jsonl).
DIARY_GOLDEN = [
    {"id": "fire", "query": "What did he see of the great fire in the City?", "kind": "fact",
     "relevant": ["d-1666-09-02", "d-1666-09-04", "e-1666-09-05"]},
    {"id": "cheese", "query": "Parmazan", "kind": "keyword", "relevant": ["d-1666-09-04"]},
    {"id": "plague", "query": "houses marked with a red cross", "kind": "paraphrase",
     "relevant": ["d-1665-06-07"]},
    {"id": "lens", "query": "looking at tiny creatures through a lens", "kind": "paraphrase",
     "relevant": ["d-1663-08-10"]},
    {"id": "crown", "query": "the coronation of the King", "kind": "fact",
     "relevant": ["d-1661-04-23"]},
    {"id": "sea", "query": "sailing to Holland", "kind": "fact", "relevant": ["d-1660-03-15"]},
    {"id": "early", "query": "the fire in Pudding Lane", "kind": "cutoff",
     "relevant": ["d-1666-09-02"], "cutoff": "1666-09-03", "must_not": ["d-1666-09-04"]},
    {"id": "absent", "query": "What did he think of the steam engine?", "kind": "absent",
     "relevant": []},
]
# Floors the full fixture meets and its second half (a "broken" re-ingest) does not.
TEST_FLOORS = ["recall@10=0.8", "mrr@10=0.6", "pass_rate=0.6", "precision@10=none"]


def write_golden(folder: Path) -> Path:
    path = folder / "golden.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in DIARY_GOLDEN))
    return path


def diary_lines() -> list[str]:
    return [line for line in DIARY.read_text().splitlines() if line.strip()]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def cli(settings: Settings, *args: str) -> Any:
    return CliRunner().invoke(app, ["--data-dir", str(settings.data_dir), *args])


def visible_chunks(col: pgcite.Collection, snapshot_id: int) -> set[tuple[str, str]]:
    """(citation id, body) of every chunk in a snapshot."""
    with col.client.connection() as conn:
        rows = conn.execute(sql.SQL(
            "SELECT c.id, c.body FROM {s}.chunks c JOIN {s}.snapshot_members m"
            " USING (version_pk) WHERE m.snapshot_id = %s").format(s=col.info.schema_id),
            (snapshot_id,)).fetchall()
    return {(r[0], r[1]) for r in rows}


@pytest.fixture
def fresh(client: pgcite.Client, request: pytest.FixtureRequest) -> Iterator[pgcite.Collection]:
    """A new collection per test, with the diary fixture ingested (snapshot 1, active)."""
    name = "s_" + request.node.name.removeprefix("test_")[:40].lower()
    col = client.create_collection(name)
    assert col.ingest([DIARY]).activated
    yield col
    client.drop_collection(name)


def gate_on(settings: Settings, col: pgcite.Collection, tmp_path: Path) -> None:
    floors = [arg for f in TEST_FLOORS for arg in ("--floor", f)]
    out = cli(settings, "collection", "set", col.name, "--golden",
              str(write_golden(tmp_path)), *floors)
    assert out.exit_code == 0, out.output


# --- visibility ---------------------------------------------------------------------------------

SECRET = {"_id": "z-secret", "date": "1666-09-03", "corpus": "A", "author": "Samuel Pepys",
          "text": "A quagga and a zebroid played the xylophone in Pudding Lane."}


def _assert_only_active(col: pgcite.Collection) -> None:
    active = col.active_snapshot().snapshot_id
    allowed = visible_chunks(col, active)
    for mode in ("keyword", "vector", "hybrid"):
        result = col.search("quagga zebroid xylophone Pudding Lane", mode=mode, top_k=20)
        assert result.snapshot_id == active
        assert {(h.id, h.body) for h in result.hits} <= allowed
        assert all(h.document_id != "z-secret" for h in result.hits)


def test_nothing_outside_the_active_snapshot_is_visible_during_and_after_a_build(
    fresh: pgcite.Collection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = write_lines(tmp_path / "secret.jsonl", [json.dumps(SECRET)])
    inside, release = threading.Event(), threading.Event()
    real_build = _pipeline.build_snapshot

    def slow_build(*args: Any, **kwargs: Any) -> int:
        snapshot_id = real_build(*args, **kwargs)
        inside.set()  # versions, chunks, snapshot and postings written, not committed
        assert release.wait(30)
        return snapshot_id

    monkeypatch.setattr(_pipeline, "build_snapshot", slow_build)
    reports: list[Any] = []
    worker = threading.Thread(target=lambda: reports.append(fresh.ingest([source], activate=False)))
    worker.start()
    try:
        assert inside.wait(60)
        _assert_only_active(fresh)  # mid-build
    finally:
        release.set()
        worker.join(60)
    built = reports[0].snapshot_id
    assert built is not None and not reports[0].activated
    _assert_only_active(fresh)  # built, committed, inactive
    pinned = fresh.search("quagga xylophone", mode="keyword", snapshot_id=built)
    assert pinned.hits[0].document_id == "z-secret"  # it is there, just not live


def test_wrong_dimension_query_vector_is_refused(diary: pgcite.Collection) -> None:
    with pytest.raises(pgcite.EmbedderError, match="768 dimensions.*384-dim"):
        diary.search("fire", mode="vector", query_vector=np.zeros(768, dtype=np.float32))


# --- building -----------------------------------------------------------------------------------


def test_build_is_inactive_and_idempotent(fresh: pgcite.Collection, tmp_path: Path,
                                          settings: Settings) -> None:
    half = write_lines(tmp_path / "half.jsonl", diary_lines()[:6])
    out = cli(settings, "snapshot", "build", fresh.name, str(half), "--replace", "--json",
              "--no-progress")
    assert out.exit_code == 0, out.output
    first = json.loads(out.stdout)
    assert first["snapshot_id"] == 2 and not first["activated"]
    assert fresh.active_snapshot().snapshot_id == 1
    # A second identical build (e.g. resumed after a crash) finds the same snapshot.
    again = ingest(fresh.client.db, fresh.name, [half], replace=True, activate=False,
                   progress=False, settings=settings)
    assert again.snapshot_id == 2 and again.embedded == 0
    listed = json.loads(cli(settings, "snapshot", "list", fresh.name, "--json").stdout)
    assert [(s["snapshot_id"], s["status"]) for s in listed] == [(1, "active"),
                                                                 (2, "never active")]


def test_build_needs_paths_or_embedder(fresh: pgcite.Collection, settings: Settings) -> None:
    out = cli(settings, "snapshot", "build", fresh.name)
    assert out.exit_code == 1 and "--embedder" in out.output


def test_other_model_without_replace_is_refused(fresh: pgcite.Collection,
                                                settings: Settings) -> None:
    out = cli(settings, "snapshot", "build", fresh.name, str(DIARY), "--embedder",
              "multilingual-e5-small", "--no-progress")
    assert out.exit_code == 2 and "must hold every document" in out.output


# --- the gate -----------------------------------------------------------------------------------


def test_gate_refuses_a_broken_snapshot_naming_the_figures(
    fresh: pgcite.Collection, tmp_path: Path, settings: Settings
) -> None:
    gate_on(settings, fresh, tmp_path)
    broken = write_lines(tmp_path / "broken.jsonl", diary_lines()[6:])
    built = ingest(fresh.client.db, fresh.name, [broken], replace=True, activate=False,
                   progress=False, settings=settings)
    out = cli(settings, "snapshot", "activate", fresh.name, str(built.snapshot_id),
              "--no-progress")
    assert out.exit_code == 1
    assert "refused by the gate" in out.output and "recall@10 0." in out.output
    assert "< floor 0.80" in out.output
    assert fresh.active_snapshot().snapshot_id == 1
    # both evaluations were stored: the candidate's (with its verdict) and the baseline's
    snaps = {s.snapshot_id: s for s in fresh.snapshots()}
    assert snaps[1].evaluation and snaps[1].evaluation["figures"]["recall@10"] >= 0.8
    verdict = snaps[built.snapshot_id].evaluation["verdict"]  # type: ignore[index]
    assert verdict["baseline"] == 1 and not all(c["passed"] for c in verdict["checks"])


def test_force_activates_logs_what_it_skipped_and_rollback_returns(
    fresh: pgcite.Collection, tmp_path: Path, settings: Settings
) -> None:
    gate_on(settings, fresh, tmp_path)
    broken = write_lines(tmp_path / "broken.jsonl", diary_lines()[6:])
    sid = ingest(fresh.client.db, fresh.name, [broken], replace=True, activate=False,
                 progress=False, settings=settings).snapshot_id
    assert sid is not None
    out = cli(settings, "snapshot", "activate", fresh.name, str(sid), "--force", "--json",
              "--no-progress")
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["forced"] and any(s.startswith("recall@10") for s in result["skipped"])
    assert eventually(lambda: fresh.active_snapshot().snapshot_id == sid)
    with fresh.client.connection() as conn:
        log = activations(conn, fresh.info)
    assert log[-1].forced and log[-1].detail["skipped"] == result["skipped"]

    back = cli(settings, "snapshot", "rollback", fresh.name, "--json")
    assert back.exit_code == 0 and json.loads(back.stdout)["snapshot_id"] == 1
    # another process switched it: this client learns by NOTIFY, within moments, not at once
    assert eventually(lambda: fresh.active_snapshot().snapshot_id == 1)
    again = lifecycle.rollback(fresh)  # a second rollback undoes the first
    assert again.snapshot_id == sid and again.previous_id == 1


def test_regression_against_the_active_snapshot_is_refused(
    fresh: pgcite.Collection, tmp_path: Path, settings: Settings
) -> None:
    gate_on(settings, fresh, tmp_path)
    cli(settings, "collection", "set", fresh.name, "--floor", "recall@10=0",
        "--floor", "mrr@10=0", "--floor", "pass_rate=0")
    lines = diary_lines()
    worse = write_lines(tmp_path / "worse.jsonl", lines[:1] + lines[2:])  # loses 'sea'
    sid = ingest(fresh.client.db, fresh.name, [worse], replace=True, activate=False,
                 progress=False, settings=settings).snapshot_id
    assert sid is not None
    with pytest.raises(GateRefused, match=r"recall@10 0\.\d+ < 0\.\d+ \(active 1\.00 - "):
        lifecycle.activate(fresh, sid)


def test_gated_ingest_activates_only_what_passes(
    client: pgcite.Client, tmp_path: Path, settings: Settings
) -> None:
    col = client.create_collection("s_gated_ingest")
    gate_on(settings, col, tmp_path)
    first = col.ingest([DIARY])  # the first snapshot: judged on the floors alone
    assert first.activated and first.gate and first.gate.startswith("passed")
    broken = write_lines(tmp_path / "broken.jsonl", diary_lines()[6:])
    out = cli(settings, "ingest", col.name, str(broken), "--replace", "--no-progress")
    assert out.exit_code == 1 and "gate refused" in out.output and "recall@10" in out.output
    assert col.active_snapshot().snapshot_id == first.snapshot_id
    client.drop_collection(col.name)


def test_activation_without_golden_is_ungated(fresh: pgcite.Collection, tmp_path: Path,
                                              settings: Settings) -> None:
    half = write_lines(tmp_path / "half.jsonl", diary_lines()[:6])
    sid = ingest(fresh.client.db, fresh.name, [half], replace=True, activate=False,
                 progress=False, settings=settings).snapshot_id
    assert sid is not None
    result = lifecycle.activate(fresh, sid)
    assert not result.gated and fresh.active_snapshot().snapshot_id == sid
    again = lifecycle.activate(fresh, sid)  # idempotent: nothing changes, nothing is logged
    assert not again.changed and again.previous_id == 1
    with fresh.client.connection() as conn:
        assert len(activations(conn, fresh.info)) == 2


def test_eval_command_stores_the_summary(fresh: pgcite.Collection, tmp_path: Path,
                                         settings: Settings) -> None:
    out = cli(settings, "snapshot", "eval", fresh.name, "1", "--golden",
              str(write_golden(tmp_path)), "--json", "--no-progress")
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout)
    assert summary["cutoff_violations"] == 0 and summary["queries"] == len(DIARY_GOLDEN)
    assert fresh.snapshots()[0].evaluation == summary


# --- gc -----------------------------------------------------------------------------------------


def _stored(col: pgcite.Collection) -> dict[str, int]:
    return col.stats()["stored"]  # type: ignore[no-any-return]


def test_gc_removes_what_no_snapshot_can_reach(
    fresh: pgcite.Collection, tmp_path: Path, settings: Settings
) -> None:
    lines = diary_lines()
    db = fresh.client.db
    s2 = ingest(db, fresh.name, [write_lines(tmp_path / "a.jsonl", lines[:4])], replace=True,
                progress=False, settings=settings).snapshot_id  # active, 1 is previous
    s3 = ingest(db, fresh.name, [write_lines(tmp_path / "b.jsonl", lines[:5])], replace=True,
                activate=False, progress=False, settings=settings).snapshot_id
    assert (s2, s3) == (2, 3)
    edited = json.loads(lines[0]) | {"text": "An edited entry, never activated."}
    ingest(db, fresh.name, [write_lines(tmp_path / "c.jsonl", [json.dumps(edited)])],
           replace=True, activate=False, progress=False, settings=settings)  # 4
    before = _stored(fresh)

    dry = cli(settings, "snapshot", "gc", fresh.name, "--older-than", "0", "--keep", "0",
              "--dry-run", "--json")
    assert json.loads(dry.stdout)["snapshots_removed"] == [3, 4]
    assert _stored(fresh) == before

    out = cli(settings, "snapshot", "gc", fresh.name, "--older-than", "0", "--keep", "0",
              "--json")
    report = json.loads(out.stdout)
    assert report["snapshots_removed"] == [3, 4]  # 2 is active, 1 the rollback target
    # versions are keyed by source file too: b.jsonl's five, and the edited one
    assert report["versions_removed"] == 6 and report["chunks_removed"] == 6
    assert [s.snapshot_id for s in fresh.snapshots()] == [1, 2]
    assert _stored(fresh)["versions"] == before["versions"] - 6
    assert fresh.search("coronation", mode="hybrid").hits  # still serving

    young = cli(settings, "snapshot", "gc", fresh.name, "--json")  # defaults: 7d, keep 3
    assert json.loads(young.stdout)["snapshots_removed"] == []


def test_gc_waits_for_a_committing_build(
    fresh: pgcite.Collection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inside, release = threading.Event(), threading.Event()
    real_build = _pipeline.build_snapshot

    def slow_build(*args: Any, **kwargs: Any) -> int:
        snapshot_id = real_build(*args, **kwargs)
        inside.set()
        assert release.wait(30)
        return snapshot_id

    monkeypatch.setattr(_pipeline, "build_snapshot", slow_build)
    source = write_lines(tmp_path / "s.jsonl", [json.dumps(SECRET)])
    worker = threading.Thread(target=lambda: fresh.ingest([source], activate=False))
    worker.start()
    try:
        assert inside.wait(60)
        with pytest.raises(pgcite.PgciteError, match="committing now"):
            lifecycle.gc(fresh, older_than=dt.timedelta(0), keep_retired=0)
    finally:
        release.set()
        worker.join(60)
    assert len(fresh.snapshots()) == 2


def test_vectors_of_another_dimension_are_refused(fresh: pgcite.Collection) -> None:
    import psycopg

    from pgcite._types import ChunkDraft
    from pgcite.embed._base import EmbedderSpec
    from pgcite.store._snapshots import build_snapshot, insert_version, plan_snapshot

    chunk = ChunkDraft(id="x-a", document_id="x", ordinal=0, body="odd", title=None, locator=None,
                       date_start=None, date_end=None, author=None, corpus=None, source="t",
                       citation="t", metadata={})

    def store(spec: EmbedderSpec, dim: int) -> None:
        with fresh.client.db.transaction() as conn:
            pk = insert_version(conn, fresh.info, document_id="x", content_hash=f"h{dim}",
                                source="t", chunks=[chunk],
                                vectors=np.ones((1, dim), dtype=np.float32), spec=spec,
                                corpus_version=None)
            plan = plan_snapshot(conn, fresh.info, [pk], spec=spec, content_id=None)
            build_snapshot(conn, fresh.info, plan, spec=spec)

    # the model's partial HNSW index (embedding::vector(384)) refuses them on insert …
    with pytest.raises(psycopg.errors.DataException, match="expected 384 dimensions, not 8"):
        store(fresh.info.embedder, 8)
    # … and a snapshot checks its members' dimension even for a model without an index
    unindexed = EmbedderSpec(id="test-model", version="0" * 16, dim=8, max_tokens=64)
    with pytest.raises(pgcite.PgciteError, match="has a 4-dim vector but test-model"):
        store(unindexed, 4)
    assert [s.snapshot_id for s in fresh.snapshots()] == [1]


def eventually(check: Callable[[], bool], seconds: float = 5.0) -> bool:
    """Poll ``check`` until it holds or ``seconds`` pass (for NOTIFY-driven caches)."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_gate_without_absent_queries_stores_an_infinite_threshold(
    fresh: pgcite.Collection, tmp_path: Path, settings: Settings
) -> None:
    """No `absent` query: the calibrated threshold is -inf ("never abstain"); storing the
    summary must not fail on it (PostgreSQL's jsonb has no -Infinity)."""
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps(q) + "\n" for q in DIARY_GOLDEN
                              if q["kind"] != "absent"))
    floors = [arg for f in TEST_FLOORS for arg in ("--floor", f)]
    out = cli(settings, "collection", "set", fresh.name, "--golden", str(golden), *floors)
    assert out.exit_code == 0, out.output
    extra = write_lines(tmp_path / "extra.jsonl", [json.dumps(SECRET)])
    out = cli(settings, "ingest", fresh.name, str(extra), "--no-progress")
    assert out.exit_code == 0, out.output
    latest = fresh.snapshots()[-1]
    assert latest.active and latest.evaluation is not None
    assert latest.evaluation["threshold_used"] == "-Infinity"
    out = cli(settings, "snapshot", "activate", fresh.name, "1")
    assert out.exit_code == 0, out.output
