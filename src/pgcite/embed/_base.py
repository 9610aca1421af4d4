"""The Embedder protocol and the record of a model that a collection and a snapshot keep."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

Vectors = npt.NDArray[np.float32]


class EmbedderSpec(BaseModel):
    """What a collection records about its embedder, so queries use exactly the same model.

    ``version`` is a hash of the weights (or a label for remote models); ``variant`` names a
    computation that gives other vectors from the same weights (``int8``: the quantised ONNX
    graph), empty for the model as trained. Two embedders are interchangeable only when
    ``model_key`` (id@version, then +variant if any) is equal.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    version: str
    dim: int = Field(gt=0, le=16000)
    max_tokens: int = Field(gt=0)
    query_prefix: str = ""
    document_prefix: str = ""
    note: str = ""
    variant: str = Field(default="", pattern=r"^[a-z0-9]*$")

    @property
    def model_key(self) -> str:
        key = f"{self.id}@{self.version[:16]}"
        return f"{key}+{self.variant}" if self.variant else key


def key_variant(model_key: str) -> str:
    """The variant a model key records ("" for the model as trained): the part after the
    version's ``+`` (versions are hex digests or labels without one)."""
    _, _, version = model_key.rpartition("@")
    return version.partition("+")[2]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit-length vectors. Prefixes/instructions are applied inside."""

    spec: EmbedderSpec

    def embed_documents(self, texts: Sequence[str]) -> Vectors: ...

    def embed_query(self, text: str) -> Vectors: ...

    def count_tokens(self, text: str) -> int: ...


def normalize(vectors: npt.ArrayLike) -> Vectors:
    """L2-normalise rows so that cosine distance and inner product agree."""
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim == 1:
        array = array[None, :]
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return (array / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def as_array(value: Any) -> Vectors:
    """A pgvector value from the database (``Vector``/``HalfVector`` or ndarray) as float32."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


def file_digest(path: Path, *, chunk: int = 1 << 20) -> str:
    """sha256 of a weights file: the model's version."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def text_sha256(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()
