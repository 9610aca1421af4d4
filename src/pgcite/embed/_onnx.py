"""A sentence-transformers BERT model (mean pooling + normalise) run by ONNX Runtime.

The ONNX graph is exported on this machine from the weights the package ships (no download):
``torch.onnx.export`` of the transformer with pooling and normalisation inside, then
onnxruntime's transformer optimizer fuses attention, GELU and layer norms (a naive export is
slower than torch on long batches). The file is cached under ``Settings.models_dir`` keyed by the
weights' sha256, so a new weights version never meets an old graph.

Same function as the torch backend in fp32 (tests/test_onnx_embedder.py: cosine ≥ 0.9999 on real
texts), hence the same ``model_key``: a snapshot embedded by either backend is queried by either.

The opt-in int8 variant (``PGCITE_EMBED_BACKEND=onnx-int8``) is that fp32 graph after onnxruntime's
dynamic quantisation (int8 weights per channel, activations quantised at run time), cached by the
weights' hash and a digest of :data:`INT8`. Its vectors are close to, not the same as, fp32
(cosine ≈ 0.995), so its spec carries ``variant = "int8"`` and its model key differs: a snapshot
embedded with it is queried with it, and never mixed with fp32 vectors.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from pgcite._errors import EmbedderError
from pgcite.embed._base import EmbedderSpec, Vectors

# Bump when the exported graph changes (inputs, pooling, optimizer settings): old files are
# then ignored, never loaded.
EXPORT_VERSION = "1"
_OPSET = 17
_export_lock = threading.Lock()


class QuantSettings(BaseModel):
    """How the fp32 graph is quantised (onnxruntime.quantization.quantize_dynamic's arguments).

    Per-channel int8 weights: per-tensor scales lose too much (cosine to fp32 ≈ 0.94, measured on
    SciFact abstracts). MatMul and Attention only: the word-embedding Gather stays fp32 (a table
    lookup, no compute to save; quantised it only adds error). ``reduce_range`` off: this
    machine's CPUs have VNNI, where the full range does not saturate.
    """

    model_config = ConfigDict(frozen=True)

    weight_type: str = "QInt8"
    per_channel: bool = True
    reduce_range: bool = False
    op_types: tuple[str, ...] = ("MatMul", "Attention")

    def digest(self) -> str:
        """The settings' hash: part of the cached file's name, so other settings never meet
        this file."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:12]


# The one int8 configuration the product offers. Its vectors are recorded under the variant
# name below: settings that change the vectors need a new variant name (a test pins the digest),
# or snapshots embedded before would be queried with other vectors under the same key.
INT8 = QuantSettings()
INT8_VARIANT = "int8"


def _pooling_mode(folder: Path) -> None:
    """Refuse a model whose sentence-transformers pipeline is not BERT + mean pooling
    (+ normalise): the exported graph computes exactly that."""
    modules = json.loads((folder / "modules.json").read_text()) if (
        folder / "modules.json").exists() else []
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    pooling = folder / "1_Pooling" / "config.json"
    mean = pooling.exists() and json.loads(pooling.read_text()).get("pooling_mode_mean_tokens")
    if kinds[:2] != ["Transformer", "Pooling"] or not mean or len(kinds) > 3:
        raise EmbedderError(
            f"{folder}: only transformer + mean pooling models run on the onnx backend",
            hint="set PGCITE_EMBED_BACKEND=torch for this model",
        )


def _max_seq_length(folder: Path) -> int:
    config = folder / "sentence_bert_config.json"
    if config.exists():
        return int(json.loads(config.read_text()).get("max_seq_length", 512))
    return 512


def onnx_path(models_dir: Path, model_id: str, version: str) -> Path:
    """Where the graph for these weights lives (one place for the naming)."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in model_id)[-80:]
    return models_dir / f"{safe}-{version[:16]}-fp32-v{EXPORT_VERSION}.onnx"


def int8_path(models_dir: Path, model_id: str, version: str,
              quant: QuantSettings = INT8) -> Path:
    """Where the quantised graph for these weights and these settings lives."""
    fp32 = onnx_path(models_dir, model_id, version)
    return fp32.with_name(fp32.name.replace("-fp32-", f"-int8-{quant.digest()}-"))


def quantize_int8(fp32: Path, target: Path, quant: QuantSettings = INT8) -> Path:
    """Quantise ``fp32`` to ``target`` (dynamic int8) unless it is already there; written
    whole, then renamed, like the export."""
    with _export_lock:
        if target.exists():
            return target
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            out = Path(tmp) / "int8.onnx"
            # DefaultTensorType: the fused graph's contrib ops leave some tensor types
            # unknown to the quantiser's shape inference; they are fp32.
            quantize_dynamic(
                str(fp32), str(out), weight_type=QuantType[quant.weight_type],
                per_channel=quant.per_channel, reduce_range=quant.reduce_range,
                op_types_to_quantize=list(quant.op_types),
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
            os.replace(out, target)
    return target


def export_onnx(folder: Path, target: Path) -> Path:
    """Export and optimise the model in ``folder`` to ``target`` unless it is already there.

    Written to a temporary file and renamed: a killed export leaves no half file, and two
    processes exporting at once both end with a whole one.
    """
    with _export_lock:
        if target.exists():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            raw = Path(tmp) / "raw.onnx"
            _torch_export(folder, raw)
            fused = Path(tmp) / "fused.onnx"
            _optimize(raw, fused, folder)
            os.replace(fused, target)
    return target


def _torch_export(folder: Path, out: Path) -> None:
    import warnings

    import torch
    from transformers import AutoModel

    # eager attention: the graph onnxruntime's optimizer recognises and fuses
    model = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()

    class Pooled(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.inner(input_ids=input_ids, attention_mask=attention_mask)[0]
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1)

    sample = torch.ones((2, 8), dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer chatter about python bools in HF code
        torch.onnx.export(
            Pooled(model), (sample, sample), str(out),
            input_names=["input_ids", "attention_mask"], output_names=["embedding"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "embedding": {0: "batch"}},
            opset_version=_OPSET, dynamo=False,
        )


def _optimize(raw: Path, out: Path, folder: Path) -> None:
    from onnxruntime.transformers import optimizer

    config = json.loads((folder / "config.json").read_text())
    model = optimizer.optimize_model(
        str(raw), model_type="bert", num_heads=int(config["num_attention_heads"]),
        hidden_size=int(config["hidden_size"]), opt_level=1,
    )
    model.save_model_to_file(str(out))


class OnnxEmbedder:
    """The sentence-transformers model in ``folder`` on ONNX Runtime's CPU provider.

    One session on one intra-op thread serves everything: each text runs alone (no padding, no
    attention mask over pad tokens), documents on ``threads`` worker threads at once (all cores
    by default), queries on the caller's thread, so concurrent callers run side by side; runs
    are thread-safe in onnxruntime. Measured against padded length-bucketed batches of 32 on an
    all-core session (bench/embedding.py, 185 SciFact chunks, 2 cores): int8 ≈ 2.0× and fp32
    ≈ 1.5× the chunks/s. A batch of 32 × 256 tokens keeps 12 heads' 256 × 256 attention scores
    per row (≈ 100 MB) out of cache, and an all-core session waits at every kernel for its
    slowest thread. With ``int8`` the graph is the quantised one and the spec says so
    (``variant``), hence another model key; run alone, an int8 text's activation scales are its
    own, so its vector no longer depends on which texts shared its batch.
    """

    def __init__(
        self, spec: EmbedderSpec, folder: Path, models_dir: Path, *,
        threads: int | None = None, int8: bool = False,
    ) -> None:
        try:
            import onnxruntime
        except ImportError as exc:  # pragma: no cover - a core dependency
            raise EmbedderError("the onnx embedding backend needs onnxruntime",
                                hint="pip install onnxruntime, or PGCITE_EMBED_BACKEND=torch"
                                ) from exc
        from tokenizers import Tokenizer

        _pooling_mode(folder)
        self.spec = spec.model_copy(update={"variant": INT8_VARIANT if int8 else ""})
        self._threads = max(1, threads or os.cpu_count() or 1)
        path = export_onnx(folder, onnx_path(models_dir, spec.id, spec.version))
        if int8:
            path = quantize_int8(path, int8_path(models_dir, spec.id, spec.version))
        self._path = path
        self._session = _session(onnxruntime, path, 1)
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(min(_max_seq_length(folder), spec.max_tokens))
        self._counter = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._counter.no_padding()
        self._counter.no_truncation()

    def _run(self, session: Any, texts: Sequence[str]) -> Vectors:
        """One padded run of ``texts`` together (queries and documents run one text at a
        time; bench/embedding.py compares batches with this)."""
        encoded = self._tokenizer.encode_batch(list(texts))
        width = max(len(e.ids) for e in encoded)
        ids = np.zeros((len(encoded), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, enc in enumerate(encoded):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        out: Vectors = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        return out.astype(np.float32, copy=False)

    def _run_one(self, token_ids: Sequence[int]) -> Vectors:
        ids = np.asarray([token_ids], dtype=np.int64)
        out: Vectors = self._session.run(
            None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0]
        row: Vectors = out[0].astype(np.float32, copy=False)
        return row

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.spec.dim), dtype=np.float32)
        # One tokenizer call for all (it runs in parallel, in Rust), then one run per text.
        encoded = self._tokenizer.encode_batch(
            [self.spec.document_prefix + text for text in texts])
        workers = min(self._threads, len(encoded))
        if workers == 1:
            return np.stack([self._run_one(enc.ids) for enc in encoded])
        with ThreadPoolExecutor(workers, thread_name_prefix="pgcite-onnx") as pool:
            return np.stack(list(pool.map(lambda enc: self._run_one(enc.ids), encoded)))

    def embed_query(self, text: str) -> Vectors:
        # One run per call on the caller's thread, concurrent callers side by side (runs are
        # thread-safe). Batching the callers that arrive together was measured and dropped:
        # a 16-caller batch pads and costs about 16 runs, and holding callers back for it only
        # added their wait (bench/embedding.py keeps the variants).
        return self._run_one(self._tokenizer.encode(self.spec.query_prefix + text).ids)

    def count_tokens(self, text: str) -> int:
        return len(self._counter.encode(text, add_special_tokens=False).ids)


def _session(onnxruntime: Any, path: Path, threads: int) -> Any:
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # A waiting thread that spins burns a core another caller (or helper process) needs.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # a corrupt cache file: say where it is
        raise EmbedderError(f"cannot load the ONNX graph {path}: {exc}",
                            hint="delete that file; it is re-exported on next use") from exc
