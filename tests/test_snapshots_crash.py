"""kill -9 of a real ingest subprocess, at a random moment and inside its final transaction; the
resumed build must equal an uninterrupted one (same member versions, chunk ids, bodies)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from psycopg import sql

import pgcite
from pgcite.config import Settings
from pgcite.ingest._pipeline import ingest

from .conftest import DIARY

N_ENTRIES = 24  # entries of Pepys, autumn 1666 (the packaged sample)
LONG = (0, 5)  # these stay whole (several chunks each); the rest are cut short to keep it quick

# The child: the same ingest `pgcite snapshot build --replace` runs. "hold" stops inside the
# final transaction (everything written, nothing committed) so the kill lands exactly there.
CHILD = r"""
import sys, time
from pathlib import Path
import pgcite
from pgcite.embed._registry import load_embedder
from pgcite.ingest import _pipeline
from pgcite.store import Database

url, name, source, mode = sys.argv[1:5]
settings = pgcite.Settings(database_url=url, embed_batch_size=4)
db = Database.open(settings)
load_embedder("all-MiniLM-L6-v2", settings)
if mode == "hold":
    real = _pipeline.build_snapshot
    def held(*args, **kwargs):
        sid = real(*args, **kwargs)
        print("IN_TRANSACTION", flush=True)
        time.sleep(600)
        return sid
    _pipeline.build_snapshot = held
print("START", flush=True)
report = _pipeline.ingest(db, name, [Path(source)], replace=True, activate=False,
                          progress=False, settings=settings)
print("DONE " + report.model_dump_json(), flush=True)
"""


def fixture_file(folder: Path) -> Path:
    """Pepys, autumn 1666, with a per-run title so no earlier run's embeddings are cached."""
    sample = Path(str(resources.files("pgcite") / "data" / "pepys-1666-autumn.jsonl"))
    salt = f"run {os.getpid()} {time.time_ns()}"
    records = [json.loads(line) for line in sample.read_text(encoding="utf-8").splitlines()]
    for i, record in enumerate(records[:N_ENTRIES]):
        record["title"] = salt
        if i not in LONG:
            record["text"] = record["text"][:400]
    out = folder / "autumn.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in records[:N_ENTRIES]), encoding="utf-8")
    return out


class Child:
    def __init__(self, url: str, name: str, source: Path, mode: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, url, name, str(source), mode],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_for(self, marker: str, timeout: float = 120.0) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith(marker):
                return line
            if not line and self.proc.poll() is not None:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise AssertionError(f"child exited {self.proc.returncode}: {err[-2000:]}")
        raise AssertionError(f"child never printed {marker}")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def build_state(col: pgcite.Collection, snapshot_id: int) -> dict[str, Any]:
    """What must be identical: member versions and every chunk (ids, bodies); and vectors equal
    up to float noise (the reference collection embeds for itself -- the cache is per
    collection -- in other batches, and padding in a batch moves the last digits)."""
    with col.client.connection() as conn:
        members = conn.execute(sql.SQL(
            "SELECT v.document_id, v.content_hash, v.n_chunks FROM {s}.snapshot_members m"
            " JOIN {s}.versions v USING (version_pk) WHERE m.snapshot_id = %s ORDER BY 1"
        ).format(s=col.info.schema_id), (snapshot_id,)).fetchall()
        chunks = conn.execute(sql.SQL(
            "SELECT c.id, c.document_id, c.ordinal, c.body, c.citation, c.date_end,"
            " c.embedding::text FROM {s}.chunks c JOIN {s}.snapshot_members m USING"
            " (version_pk) WHERE m.snapshot_id = %s ORDER BY c.id").format(
            s=col.info.schema_id), (snapshot_id,)).fetchall()
        # the snapshot's keyword index: its terms and their document frequencies, summed
        postings = conn.execute(sql.SQL(
            "SELECT count(*), sum(df) FROM (SELECT p.term, sum(cardinality(p.chunk_pks))"
            " - coalesce(max(d.df), 0) AS df FROM {s}.snapshot_segments ss"
            " JOIN {s}.segment_postings p USING (segment_id) LEFT JOIN {s}.snapshot_deleted_df d"
            " ON d.snapshot_id = ss.snapshot_id AND d.term = p.term WHERE ss.snapshot_id = %s"
            " GROUP BY p.term) t WHERE df > 0").format(s=col.info.schema_id),
            (snapshot_id,)).fetchone()
    return {"members": members, "chunks": [row[:-1] for row in chunks],
            "vectors": np.array([json.loads(row[-1]) for row in chunks]), "postings": postings}


def state(col: pgcite.Collection) -> tuple[int, list[int], dict[str, int]]:
    """The active snapshot, every snapshot, and the stored counts."""
    return (col.active_snapshot().snapshot_id, [s.snapshot_id for s in col.snapshots()],
            col.stats()["stored"])


@pytest.mark.slow
def test_kill_9_then_resume_equals_an_uninterrupted_build(
    client: pgcite.Client, settings: Settings, tmp_path: Path
) -> None:
    seed = int(os.environ.get("PGCITE_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    source = fixture_file(tmp_path)
    col = client.create_collection("crash_killed")
    assert col.ingest([DIARY]).activated  # the live snapshot the crashes must not touch
    before = state(col)
    url = client.db.url

    # 1. kill -9 at a random moment of the run (loading, chunking, embedding, writing)
    child = Child(url, col.name, source, "plain")
    child.wait_for("START")
    delay = rng.uniform(0.0, 3.0)
    time.sleep(delay)
    child.kill()
    after = state(col)
    # Either nothing changed (no partial snapshot, version or chunk), or the kill came after the
    # commit and the whole inactive snapshot is there.
    assert after == before or (after[0] == before[0] and len(after[1]) == len(before[1]) + 1)
    print(f"[crash] seed {seed}: killed {delay:.2f} s into the run, "
          f"{'after' if after != before else 'before'} its commit")
    before = after

    # 2. kill -9 inside the final transaction: everything written, nothing committed
    child = Child(url, col.name, source, "hold")
    child.wait_for("IN_TRANSACTION")
    child.kill()
    assert state(col) == before
    assert col.search("the fire in the City", top_k=3).snapshot_id == before[0]

    # 3. resume (what re-running the command does) to the end
    resumed = ingest(client.db, col.name, [source], replace=True, activate=False,
                     progress=False, settings=settings)
    assert resumed.embedded == 0  # every embedding survived the kills, in the cache
    assert resumed.snapshot_id is not None and col.active_snapshot().snapshot_id == before[0]
    assert len(col.snapshots()) == 2  # the live one and the build: no duplicate, no partial

    reference = client.create_collection("crash_reference")
    ref = ingest(client.db, reference.name, [source], replace=True, activate=False,
                 progress=False, settings=settings)
    assert ref.snapshot_id is not None
    got, want = build_state(col, resumed.snapshot_id), build_state(reference, ref.snapshot_id)
    assert got["members"] == want["members"], f"seed {seed}, killed after {delay:.2f} s"
    assert got["chunks"] == want["chunks"], f"seed {seed}, killed after {delay:.2f} s"
    assert np.allclose(got["vectors"], want["vectors"], atol=1e-4)
    assert got["postings"] == want["postings"]
    assert len(got["chunks"]) > N_ENTRIES  # long entries were split: a real build
    client.drop_collection(col.name)
    client.drop_collection(reference.name)
