"""A second, one-passage collection: what key-scoping tests need beside the diary fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pgcite


def one_passage_collection(client: pgcite.Client, folder: Path, name: str) -> pgcite.Collection:
    """``name`` created afresh with one dated passage (id ``<name>-1#…``), ingested and live."""
    path = folder / f"{name}.jsonl"
    path.write_text(json.dumps({"_id": f"{name}-1", "date": "1700-01-01",
                                "text": "A ledger of the harbour and the East India trade."}))
    client.drop_collection(name, missing_ok=True)
    col = client.create_collection(name)
    assert col.ingest([path]).activated
    return col
