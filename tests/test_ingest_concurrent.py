"""Concurrent ingests into one collection: each activation builds on the snapshot active when
it commits, so no ingest's documents drop out of the live snapshot because another ran beside
it (the final transactions serialise on the active pointer; the embedding before them does not)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pgcite


def _write(path: Path, worker: int, n: int) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            handle.write(json.dumps({"id": f"w{worker}-d{i}",
                                     "text": f"Worker {worker} wrote note {i} about ships."}) + "\n")
    return path


def test_concurrent_ingests_keep_every_document(client: pgcite.Client, tmp_path: Path) -> None:
    col = client.create_collection("ingest_concurrent")
    workers, rounds, per_file = 3, 3, 2
    errors: list[BaseException] = []
    start = threading.Barrier(workers)

    def run(worker: int) -> None:
        try:
            start.wait()
            for r in range(rounds):
                path = _write(tmp_path / f"w{worker}-r{r}.jsonl", worker * 10 + r, per_file)
                report = col.ingest([path], progress=False)
                assert report.activated and not report.failed
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(workers)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        live = {d.id for d in col.documents()}
        expected = {f"w{w * 10 + r}-d{i}" for w in range(workers) for r in range(rounds)
                    for i in range(per_file)}
        assert live == expected, f"missing from the live snapshot: {sorted(expected - live)}"
    finally:
        client.drop_collection("ingest_concurrent")
