"""Parallel ingest into ONE snapshot (docs/snapshots.md, "Parallel ingest"): real OS processes
stage documents into one collection at once, without building snapshots; one build then makes a
single snapshot whose BM25 scores equal a full rebuild's; a worker killed with -9 leaves what it
committed for the build and nothing else; re-running it stores nothing twice."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql
from typer.testing import CliRunner

import pgcite
from pgcite.cli import app
from pgcite.config import Settings
from pgcite.lifecycle import gc

from .conftest import DIARY
from .test_segments import (
    _assert_same_top,
    _doc,
    _lexemes,
    _live_chunks,
    _queries,
    _search_scores,
    _write,
    exhaustive_bm25,
)
from .test_snapshots import cli, diary_lines, gate_on, write_lines

# A staging worker that goes through the Python API, one file per ingest call (so one batch,
# one commit, per file), pausing between files so that a kill lands between commits.
WORKER = r"""
import sys, time
import pgcite
url, name, pause = sys.argv[1], sys.argv[2], float(sys.argv[3])
with pgcite.Client(pgcite.Settings(database_url=url)) as client:
    col = client.collection(name)
    for path in sys.argv[4:]:
        report = col.ingest([path], stage=True)
        assert report.snapshot_id is None and not report.failed, report
        print("STAGED " + report.model_dump_json(), flush=True)
        time.sleep(pause)
print("DONE", flush=True)
"""

# The `pgcite` command, as a worker process runs it.
CLI = "import sys; from pgcite.cli import main; sys.argv[0] = 'pgcite'; main()"


def _files(folder: Path, prefix: str, n_files: int, per_file: int,
           rng: random.Random) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [_write(folder / f"{prefix}-{f}.jsonl",
                   [_doc(rng, f"{prefix}-{f}-{i}", 1700 + f) for i in range(per_file)])
            for f in range(n_files)]


def _ids(paths: list[Path]) -> set[str]:
    return {json.loads(line)["_id"] for p in paths for line in p.read_text().splitlines()}


def _cli_worker(url: str, name: str, paths: list[Path]) -> subprocess.Popen[str]:
    env = {**os.environ, "PGCITE_DATABASE_URL": url}
    return subprocess.Popen(
        [sys.executable, "-c", CLI, "ingest", name, *map(str, paths), "--stage-only",
         "--no-progress", "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


def _api_worker(url: str, name: str, paths: list[Path],
                pause: float = 0.0) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", WORKER, url, name, str(pause),
                             *map(str, paths)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen[str], timeout: float = 300.0) -> str:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return out


def _staged_ids(col: pgcite.Collection, like: str = "%") -> set[str]:
    with col.client.connection() as conn:
        return {r[0] for r in conn.execute(sql.SQL(
            "SELECT document_id FROM {s}.staged WHERE document_id LIKE %s").format(
            s=col.info.schema_id), (like,))}


def _live_ids(col: pgcite.Collection) -> set[str]:
    return {d.id for d in col.documents()}


def _no_half_versions(col: pgcite.Collection) -> None:
    """Every stored version has all its chunks, and every staged one its segment's postings."""
    with col.client.connection() as conn:
        bad = conn.execute(sql.SQL(
            "SELECT v.document_id FROM {s}.versions v LEFT JOIN {s}.chunks c USING (version_pk)"
            " GROUP BY v.version_pk HAVING count(c.chunk_pk) <> max(v.n_chunks)").format(
            s=col.info.schema_id)).fetchall()
        unindexed = conn.execute(sql.SQL(
            "SELECT st.document_id FROM {s}.staged st WHERE st.segment_id IS NULL"
            " OR NOT EXISTS (SELECT 1 FROM {s}.segment_postings p"
            " WHERE p.segment_id = st.segment_id)").format(s=col.info.schema_id)).fetchall()
    assert not bad and not unindexed, (bad, unindexed)


def _gc_now(col: pgcite.Collection) -> None:
    """gc with no grace period; a killed worker's backend may hold gc's lock for a moment."""
    for _ in range(40):
        try:
            gc(col, older_than=dt.timedelta(0), keep_retired=0)
            return
        except pgcite.PgciteError:
            time.sleep(0.25)
    raise AssertionError("gc never got its lock")


def _keyword_scores_equal_a_full_rebuild(col: pgcite.Collection, sid: int,
                                         ref: pgcite.Collection, ref_sid: int) -> None:
    """The built snapshot scores every chunk as an exhaustive BM25 over its chunks and as a
    collection ingested the plain way from the same files."""
    rng = random.Random(3)
    with col.client.connection() as conn:
        chunks = _live_chunks(conn, col, sid)
        assert chunks.keys() == _live_chunks(conn, ref, ref_sid).keys()
        for query in _queries(rng, 15):
            got = _search_scores(col, query, sid)
            _assert_same_top(got, exhaustive_bm25(chunks, _lexemes(conn, col, query)))
            want = _search_scores(ref, query, ref_sid)
            assert got.keys() == want.keys()
            for cid, score in got.items():
                assert score == pytest.approx(want[cid], rel=1e-6, abs=1e-6), cid


def test_three_processes_stage_then_one_build(client: pgcite.Client, tmp_path: Path) -> None:
    rng = random.Random(21)
    base = _files(tmp_path / "base", "base", 1, 5, rng)
    workers = [_files(tmp_path / f"w{w}", f"w{w}", 2, 3, rng) for w in range(3)]
    # worker 0 also brings a new version of a live document: it must replace the old one
    changed = _write(tmp_path / "w0" / "changed.jsonl", [_doc(rng, "base-0-0", 1800)])
    workers[0].append(changed)
    col = client.create_collection("staged_three")
    ref = client.create_collection("staged_three_ref")
    try:
        assert col.ingest(base).activated
        before = col.active_snapshot().snapshot_id
        procs = [_cli_worker(client.db.url, col.name, paths) for paths in workers]
        reports = [json.loads(_finish(p)) for p in procs]
        assert [r["snapshot_id"] for r in reports] == [None, None, None]
        assert sum(r["staged"] for r in reports) == 3 * 6 + 1

        # staged, committed, and invisible: same snapshot, same documents, no hit from them
        assert [s.snapshot_id for s in col.snapshots()] == [before]
        assert _live_ids(col) == _ids(base)
        hits = col.search("harbour lantern copper", mode="keyword", top_k=100).hits
        assert {h.document_id for h in hits} <= _ids(base)
        assert col.staged().versions == 19 and col.staged().segments == 3
        _no_half_versions(col)

        built = col.build_staged()
        assert built.snapshot_id is not None and built.activated and built.segments == 3
        assert (built.staged, built.superseded) == (19, 0)
        assert [s.snapshot_id for s in col.snapshots()] == [before, built.snapshot_id]
        assert col.active_snapshot().snapshot_id == built.snapshot_id
        assert _live_ids(col) == _ids(base) | set().union(*map(_ids, workers))
        assert col.staged().versions == 0
        with client.connection() as conn:  # the workers' segments were taken over, not redone
            segs = {r[0] for r in conn.execute(sql.SQL(
                "SELECT segment_id FROM {s}.snapshot_segments WHERE snapshot_id = %s").format(
                s=col.info.schema_id), (built.snapshot_id,))}
            n_segments = conn.execute(sql.SQL("SELECT count(*) FROM {s}.segments").format(
                s=col.info.schema_id)).fetchone()
        assert len(segs) == 4 and n_segments == (4,)
        live_new = col.search("x", top_k=1)  # searchable through the active pointer
        assert live_new.snapshot_id == built.snapshot_id

        # the same documents the plain way: base, then everything in one ingest
        assert ref.ingest(base).activated
        full = ref.ingest([p for paths in workers for p in paths])
        assert full.snapshot_id is not None
        _keyword_scores_equal_a_full_rebuild(col, built.snapshot_id, ref, full.snapshot_id)
    finally:
        client.drop_collection(col.name)
        client.drop_collection(ref.name)


def test_a_killed_worker_keeps_what_it_committed(client: pgcite.Client, tmp_path: Path) -> None:
    rng = random.Random(22)
    base = _files(tmp_path / "base", "base", 1, 4, rng)
    others = [_files(tmp_path / f"o{w}", f"o{w}", 2, 3, rng) for w in range(2)]
    doomed = _files(tmp_path / "k", "k", 6, 2, rng)
    col = client.create_collection("staged_killed")
    ref = client.create_collection("staged_killed_ref")
    try:
        assert col.ingest(base).activated
        before = col.active_snapshot().snapshot_id
        url = client.db.url
        procs = [_api_worker(url, col.name, paths) for paths in others]
        killed = _api_worker(url, col.name, doomed, pause=1.5)
        deadline = time.monotonic() + 240
        while not _staged_ids(col, "k-%"):
            assert killed.poll() is None, killed.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the worker never staged"
            time.sleep(0.05)
        killed.send_signal(signal.SIGKILL)
        killed.communicate(timeout=30)
        for proc in procs:
            _finish(proc)
        committed = _staged_ids(col, "k-%")
        assert committed and committed < _ids(doomed)  # killed mid-way, after a commit

        # nothing of it is visible before the build, and nothing is half-written
        assert [s.snapshot_id for s in col.snapshots()] == [before]
        assert _live_ids(col) == _ids(base)
        _no_half_versions(col)
        # gc leaves staged versions and their segments alone
        _gc_now(col)
        assert _staged_ids(col, "k-%") == committed
        _no_half_versions(col)

        first = col.build_staged()
        assert first.activated
        assert _live_ids(col) == _ids(base) | set().union(*map(_ids, others)) | committed

        # re-running the killed worker's files stores only what it had not committed
        again = col.ingest(doomed, stage=True)
        assert again.new_versions == len(_ids(doomed) - committed)
        assert again.unchanged == len(committed) and again.staged == len(_ids(doomed))
        second = col.build_staged()
        assert second.snapshot_id is not None and second.activated
        assert second.unchanged == len(committed)
        assert len(col.snapshots()) == 3
        assert _live_ids(col) == _ids(base) | set().union(*map(_ids, others)) | _ids(doomed)
        with client.connection() as conn:
            twice = conn.execute(sql.SQL(
                "SELECT document_id FROM {s}.versions GROUP BY document_id HAVING count(*) > 1"
            ).format(s=col.info.schema_id)).fetchall()
        assert twice == []
        _no_half_versions(col)

        assert ref.ingest(base).activated
        full = ref.ingest([p for paths in [*others, doomed] for p in paths])
        assert full.snapshot_id is not None
        _keyword_scores_equal_a_full_rebuild(col, second.snapshot_id, ref, full.snapshot_id)
    finally:
        client.drop_collection(col.name)
        client.drop_collection(ref.name)


def test_building_with_nothing_staged_is_an_error(
        client: pgcite.Client, settings: Settings, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(23)
    files = _files(tmp_path, "n", 2, 2, rng)
    col = client.create_collection("staged_nothing")
    try:
        with pytest.raises(pgcite.PgciteError, match="nothing is staged"):
            col.build_staged()
        monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
        monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)
        result = CliRunner().invoke(app, ["snapshot", "build", col.name, "--staged"])
        assert result.exit_code == 1 and "nothing is staged" in result.output

        assert col.ingest(files, stage=True).staged == 4
        built = col.build_staged(activate=False)
        assert built.snapshot_id is not None and not built.activated
        with pytest.raises(pgcite.PgciteError, match="nothing is staged"):
            col.build_staged()  # the build took everything
        # the same content staged again: the same snapshot, not a new one
        col.ingest(files, stage=True)
        assert col.build_staged(activate=False).snapshot_id == built.snapshot_id
        assert [s.snapshot_id for s in col.snapshots()] == [built.snapshot_id]
        col.activate(built.snapshot_id)
        # ... and once it is live, staging it again builds nothing
        col.ingest(files, stage=True)
        result = CliRunner().invoke(app, ["snapshot", "build", col.name, "--staged",
                                          "--activate", "--json"])
        assert result.exit_code == 0, result.output
        report: dict[str, Any] = json.loads(result.stdout)
        assert report["snapshot_id"] is None and report["unchanged"] == 4
        assert len(col.snapshots()) == 1
        with pytest.raises(pgcite.ConfigError, match="staged"):
            col.ingest(files, stage=True, replace=True)
    finally:
        client.drop_collection(col.name)


def test_the_version_staged_last_wins(client: pgcite.Client, tmp_path: Path) -> None:
    """Two versions of a document staged one after the other: the later is live, the earlier is
    deleted inside its worker's segment, and the statistics leave it out."""
    rng = random.Random(24)
    first = _files(tmp_path / "a", "a", 1, 4, rng)
    second = [_write(tmp_path / "b.jsonl",
                     [_doc(rng, "a-0-1", 1900), _doc(rng, "b-0", 1901)])]
    col = client.create_collection("staged_last_wins")
    try:
        assert col.ingest(first, stage=True).staged == 4
        assert col.ingest(second, stage=True).staged == 2
        built = col.build_staged()
        assert (built.staged, built.documents, built.superseded) == (6, 5, 1)
        assert built.snapshot_id is not None and built.segments == 2
        with client.connection() as conn:
            chunks = _live_chunks(conn, col, built.snapshot_id)
            body = conn.execute(sql.SQL(
                "SELECT c.body FROM {s}.chunks c JOIN {s}.snapshot_members m USING (version_pk)"
                " WHERE m.snapshot_id = %s AND c.document_id = 'a-0-1'").format(
                s=col.info.schema_id), (built.snapshot_id,)).fetchall()
            rng_q = random.Random(5)
            for query in _queries(rng_q, 15):
                _assert_same_top(_search_scores(col, query, built.snapshot_id),
                                 exhaustive_bm25(chunks, _lexemes(conn, col, query)))
        new_text = json.loads(second[0].read_text().splitlines()[0])["text"]
        assert [b for (b,) in body] == [new_text]
        assert col.active_snapshot().n_chunks == len(chunks)
        assert _live_ids(col) == _ids(first) | {"b-0"}
    finally:
        client.drop_collection(col.name)


def test_a_gated_collection_builds_through_the_gate(
        client: pgcite.Client, settings: Settings, tmp_path: Path) -> None:
    """With a golden set, the one build is activated only if it passes the gate; refused, it
    stays built and inactive, and the build has taken the staged rows."""
    col = client.create_collection("staged_gated")
    try:
        gate_on(settings, col, tmp_path)
        assert col.ingest([DIARY], stage=True).staged == 12 and col.snapshots() == []
        first = col.build_staged()
        assert first.activated and first.gate is not None and first.gate.startswith("passed")
        # new versions that no longer say what the golden queries ask for
        gone = {"d-1665-06-07", "d-1663-08-10", "d-1661-04-23", "d-1660-03-15"}
        junk = [json.dumps({**record, "text": "Nothing of note today; to bed."})
                for record in map(json.loads, diary_lines()) if record["_id"] in gone]
        assert col.ingest([write_lines(tmp_path / "junk.jsonl", junk)], stage=True).staged == 4
        out = cli(settings, "snapshot", "build", col.name, "--staged", "--activate")
        assert out.exit_code == 1 and "gate refused" in out.output, out.output
        assert col.active_snapshot().snapshot_id == first.snapshot_id
        assert len(col.snapshots()) == 2 and col.staged().versions == 0
    finally:
        client.drop_collection(col.name)


def test_builds_while_a_worker_stages(client: pgcite.Client, tmp_path: Path) -> None:
    """A build takes what is committed when it runs; what a worker commits meanwhile waits for
    the next build. Builds and the worker never deadlock, and nothing is lost or doubled."""
    rng = random.Random(25)
    files = _files(tmp_path, "c", 6, 2, rng)
    col = client.create_collection("staged_during_build")
    try:
        worker = _api_worker(client.db.url, col.name, files, pause=0.3)
        built: list[int] = []
        while worker.poll() is None:
            try:
                report = col.build_staged()
            except pgcite.PgciteError as exc:
                assert "nothing is staged" in exc.message
                time.sleep(0.1)
                continue
            assert report.snapshot_id is not None and report.activated
            built.append(report.snapshot_id)
        _finish(worker)
        if col.staged().versions:
            built.append(col.build_staged().snapshot_id or -1)
        assert len(built) >= 2  # at least one build ran while the worker was staging
        assert [s.snapshot_id for s in col.snapshots()] == built
        assert _live_ids(col) == _ids(files)
        with client.connection() as conn:
            versions = conn.execute(sql.SQL("SELECT count(*) FROM {s}.versions").format(
                s=col.info.schema_id)).fetchone()
        assert versions == (12,)
        _no_half_versions(col)
    finally:
        client.drop_collection(col.name)
