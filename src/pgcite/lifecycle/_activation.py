"""The snapshot lifecycle: evaluate a snapshot, activate it through the gate, roll back, gc.

The gate's comparisons live in :mod:`pgcite.lifecycle._gate` (pure); this module runs the evaluations
they compare (searches through a view pinned to one snapshot, by the evaluation harness) and
performs the activation in one transaction. See docs/snapshots.md for the rules.
"""

from __future__ import annotations

import datetime as dt
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, TypeVar

import psycopg
from pydantic import BaseModel, Field

from pgcite._errors import ConfigError, EmbedderError, PgciteError
from pgcite._gate_settings import GateSettings
from pgcite.config import Settings
from pgcite.embed._base import EmbedderSpec
from pgcite.embed._registry import embedder_for_key
from pgcite.evaluate import GoldenSet, evaluate, load_golden
from pgcite.evaluate._collection import collection_searcher
from pgcite.ingest._pipeline import IngestReport
from pgcite.lifecycle._gate import EvalSummary, GateRefused, Verdict, forced_skips, judge
from pgcite.retrieve._view import SearchView
from pgcite.store._active import ActivePointerCache
from pgcite.store._collections import CollectionInfo, get_collection
from pgcite.store._database import Database
from pgcite.store._documents import DocumentsRemoved
from pgcite.store._snapshots import (
    GcReport,
    SnapshotInfo,
    activate_snapshot,
    active_snapshot,
    collect_garbage,
    drop_index_concurrently,
    get_snapshot,
    previous_snapshot,
    store_evaluation,
    unused_vector_indexes,
)
from pgcite.store._staged import StagedBuild


class LifecycleClient(Protocol):
    """What the lifecycle needs of a client (:class:`pgcite.Client` is one)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def db(self) -> Database: ...
    def connection(self) -> AbstractContextManager[psycopg.Connection]: ...
    def active_pointers(self) -> ActivePointerCache[SnapshotInfo | None]: ...
    def collection(self, name: str) -> Collection: ...


class Collection(Protocol):
    """What the lifecycle needs of a collection (:class:`pgcite.Collection` is one): the API
    layer sits above the lifecycle, so the lifecycle names what it uses instead of importing it."""

    @property
    def name(self) -> str: ...
    @property
    def info(self) -> CollectionInfo: ...
    @property
    def client(self) -> LifecycleClient: ...
    def view(self, snapshot_id: int | None = None, *, embedder: bool = True) -> SearchView: ...


# What built an inactive snapshot for the gate: an ingest, a deletion of documents, or a build
# of staged versions.
BuildReport = TypeVar("BuildReport", IngestReport, DocumentsRemoved, StagedBuild)


class ActivationResult(BaseModel):
    """What an activation (or rollback) did, for the CLI and the log."""

    collection: str
    snapshot_id: int
    previous_id: int | None
    gated: bool  # False: the collection has no golden set (or this was a rollback)
    forced: bool = False
    skipped: list[str] = Field(default_factory=list)  # gate failures --force skipped
    verdict: Verdict | None = None
    embedder: str
    rollback: bool = False
    changed: bool = True  # False: it was the active snapshot already


# --- evaluating ---------------------------------------------------------------------------------


def fresh(col: Collection) -> Collection:
    """The collection re-read: settings and the recorded embedder may have changed elsewhere."""
    return col.client.collection(col.name)


def load_gate_golden(info: CollectionInfo, override: Path | None) -> GoldenSet | None:
    """The golden set that gates this collection: ``override``, else the configured one."""
    path = override or (Path(info.settings.golden) if info.settings.golden else None)
    return load_golden(path) if path is not None else None


def evaluate_snapshot(
    col: Collection,
    snapshot_id: int,
    golden: GoldenSet,
    gate: GateSettings,
    *,
    progress: bool = False,
) -> EvalSummary:
    """Run the golden set against one snapshot (searches pinned to it) and summarise."""
    searcher = collection_searcher(col.view(snapshot_id), mode=gate.mode, depth=gate.depth)
    result = evaluate(golden, {gate.mode: searcher}, k=gate.k, threshold=gate.threshold,
                      progress=progress, metadata={"snapshot_id": snapshot_id})
    config = result.configurations[gate.mode]
    safety = config.safety.total if config.safety is not None else None
    return EvalSummary(
        golden=golden.name, golden_path=golden.path, golden_sha256=golden.sha256,
        queries=len(golden.queries), mode=gate.mode, k=gate.k, depth=gate.depth,
        threshold=gate.threshold,
        threshold_used=config.threshold.value if config.threshold is not None else None,
        figures=dict(config.overall),
        cutoff_violations=safety.cutoff_violations if safety else 0,
        must_not_hits=safety.must_not_hits if safety else 0,
        evaluated_at=dt.datetime.now(dt.UTC),
    )


def stored_or_new_evaluation(
    col: Collection, snapshot: SnapshotInfo, golden: GoldenSet, gate: GateSettings,
    *, progress: bool = False,
) -> EvalSummary:
    """The snapshot's stored evaluation if it answers for this golden set and gate (a snapshot
    is immutable, so it does), else a new one, stored."""
    if snapshot.evaluation:
        stored = EvalSummary.model_validate(snapshot.evaluation)
        if stored.matches(golden.sha256, gate):
            return stored
    summary = evaluate_snapshot(col, snapshot.snapshot_id, golden, gate, progress=progress)
    _store(col, snapshot.snapshot_id, summary)
    return summary


def _store(col: Collection, snapshot_id: int, summary: EvalSummary) -> None:
    with col.client.db.transaction() as conn:
        store_evaluation(conn, col.info, snapshot_id, summary.to_jsonb())


def check_gate(
    col: Collection, snapshot: SnapshotInfo, golden: GoldenSet, *, progress: bool = False
) -> tuple[EvalSummary, Verdict, int | None]:
    """Evaluate the candidate (and the active snapshot, if not yet on this golden set) and
    judge; returns the candidate's summary (with the verdict recorded in it), the verdict and
    the active snapshot it was compared against."""
    col = fresh(col)  # the gate's settings as they are now, not when col was made
    gate = col.info.settings.gate
    with col.client.connection() as conn:
        current = active_snapshot(conn, col.info)
    summary = stored_or_new_evaluation(col, snapshot, golden, gate, progress=progress)
    baseline = None
    if current is not None and current.snapshot_id != snapshot.snapshot_id:
        baseline = stored_or_new_evaluation(col, current, golden, gate, progress=progress)
    baseline_id = current.snapshot_id if current is not None else None
    verdict = judge(summary, baseline, gate, candidate_id=snapshot.snapshot_id,
                    baseline_id=baseline_id if baseline is not None else None)
    summary = summary.model_copy(update={"verdict": verdict})
    _store(col, snapshot.snapshot_id, summary)
    return summary, verdict, baseline_id


def evaluate_command(
    col: Collection, snapshot_id: int, golden_path: Path | None, *, progress: bool = False
) -> EvalSummary:
    """``pgcite snapshot eval``: evaluate (always anew), store, and judge against the active."""
    col = fresh(col)
    golden = load_gate_golden(col.info, golden_path)
    if golden is None:
        raise ConfigError("--golden is required: the collection has no golden set configured",
                          hint=f"pgcite collection set {col.name} --golden PATH")
    with col.client.connection() as conn:
        snapshot = get_snapshot(conn, col.info, snapshot_id)
    summary = evaluate_snapshot(col, snapshot_id, golden, col.info.settings.gate,
                                progress=progress)
    _store(col, snapshot_id, summary)
    with col.client.connection() as conn:
        snapshot = get_snapshot(conn, col.info, snapshot_id)
    summary, _, _ = check_gate(col, snapshot, golden, progress=progress)
    return summary


# --- activating ---------------------------------------------------------------------------------


def snapshot_spec(col: Collection, snapshot: SnapshotInfo) -> EmbedderSpec | None:
    """The snapshot's embedder spec when it is not the recorded one (a model switch). Loading
    the model here also proves this process can embed queries for it before it goes live."""
    if snapshot.embed_model == col.info.embedder.model_key:
        return None
    spec = embedder_for_key(snapshot.embed_model, col.client.settings).spec
    if spec.dim != snapshot.embed_dim:
        raise EmbedderError(f"{spec.model_key} gives {spec.dim} dims but snapshot "
                            f"{snapshot.snapshot_id} holds {snapshot.embed_dim}-dim vectors")
    return spec


def activate(
    col: Collection,
    snapshot_id: int,
    *,
    golden_path: Path | None = None,
    force: bool = False,
    progress: bool = False,
) -> ActivationResult:
    """Activate through the gate (see module doc); raises :class:`GateRefused` naming the
    failing figures. ``force`` skips soft failures (logged), never a cutoff violation."""
    col = fresh(col)
    with col.client.connection() as conn:
        snapshot = get_snapshot(conn, col.info, snapshot_id)
        current = active_snapshot(conn, col.info)
        previous = previous_snapshot(conn, col.info)
    if current is not None and current.snapshot_id == snapshot_id:
        return ActivationResult(collection=col.name, snapshot_id=snapshot_id,
                                previous_id=previous, gated=False,
                                embedder=snapshot.embed_model, changed=False)
    spec = snapshot_spec(col, snapshot)
    golden = load_gate_golden(col.info, golden_path)
    verdict, skipped, baseline_id = None, [], current.snapshot_id if current else None
    detail: dict[str, Any] = {"gate": "not configured (no golden set)"}
    if golden is not None:
        summary, verdict, baseline_id = check_gate(col, snapshot, golden, progress=progress)
        detail = {"gate": verdict.model_dump(mode="json"), "golden": golden.path,
                  "golden_sha256": golden.sha256, "figures": summary.figures}
        if not verdict.passed and not force:
            raise GateRefused(
                f"snapshot {snapshot_id} of {col.name!r} refused by the gate: "
                + verdict.failure_text(),
                hint=f"fix the data, lower the floors (pgcite collection set {col.name} "
                "--floor METRIC=VALUE), or --force (logged; never skips cutoff violations)",
            )
        if not verdict.passed:
            skipped = forced_skips(verdict)  # raises on a hard failure
    if force:
        detail["skipped"] = skipped
    with col.client.db.transaction() as conn:
        previous = activate_snapshot(conn, col.info, snapshot_id, forced=force, detail=detail,
                                     spec=spec, expect_active=baseline_id)
    col.client.active_pointers().invalidate(col.name)
    return ActivationResult(
        collection=col.name, snapshot_id=snapshot_id, previous_id=previous,
        gated=golden is not None, forced=force, skipped=skipped, verdict=verdict,
        embedder=snapshot.embed_model,
    )


def rollback(col: Collection) -> ActivationResult:
    """Back to the snapshot that was active before the current one, without the gate: it passed
    (or was forced through) when it was live, is immutable, and a rollback must be fast. A second
    rollback undoes the first."""
    col = fresh(col)
    with col.client.connection() as conn:
        current = active_snapshot(conn, col.info)
        target_id = previous_snapshot(conn, col.info)
        if current is None or target_id is None:
            raise PgciteError(f"{col.name!r} has no previously active snapshot to roll back to")
        target = get_snapshot(conn, col.info, target_id)
    spec = snapshot_spec(col, target)
    with col.client.db.transaction() as conn:
        previous = activate_snapshot(
            conn, col.info, target_id, detail={"rollback_from": current.snapshot_id},
            spec=spec, expect_active=current.snapshot_id)
    col.client.active_pointers().invalidate(col.name)
    return ActivationResult(collection=col.name, snapshot_id=target_id, previous_id=previous,
                            gated=False, embedder=target.embed_model, rollback=True)


def gate_ingest(col: Collection, report: BuildReport) -> BuildReport:
    """After an ingest (or a deletion of documents) built an inactive snapshot of a gated
    collection: activate it if the gate passes; otherwise keep it (inactive) and say why in
    ``report.gate``."""
    assert report.snapshot_id is not None
    try:
        result = activate(col, report.snapshot_id)
    except GateRefused as exc:
        return report.model_copy(update={"activated": False, "gate": f"refused: {exc.message}"})
    figures = result.verdict.checks if result.verdict else []
    passed = "; ".join(c.describe() for c in figures if c.kind != "regression")
    return report.model_copy(update={"activated": True, "gate": f"passed: {passed}"})


# --- garbage collection -------------------------------------------------------------------------


def gc(
    col: Collection, *, older_than: dt.timedelta, keep_retired: int, dry_run: bool = False
) -> GcReport:
    """Remove unreachable snapshots and unreferenced versions/chunks (one transaction), then
    drop partial HNSW indexes no chunk uses any more (CONCURRENTLY: queries never wait)."""
    if keep_retired < 0:
        raise ConfigError("--keep must be >= 0")
    info = get_collection_fresh(col)
    with col.client.db.transaction() as conn:
        report = collect_garbage(conn, info, older_than=older_than, keep_retired=keep_retired,
                                 dry_run=dry_run)
    with col.client.db.connect(autocommit=True) as conn:
        unused = unused_vector_indexes(conn, info)
        if not dry_run:
            for name in unused:
                drop_index_concurrently(conn, info, name)
    return report.model_copy(update={"indexes_dropped": unused})


def get_collection_fresh(col: Collection) -> CollectionInfo:
    with col.client.connection() as conn:
        return get_collection(conn, col.name)
