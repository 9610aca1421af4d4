"""The admin plane: snapshots, activation, document upload. Runs as the owning role."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path as FsPath
from typing import Annotated, Any

import psycopg
from fastapi import APIRouter, Depends, File, Form, Path, UploadFile

from pgcite import Collection, GateRefused, IngestReport, Overrides, ScanLimitExceeded, SnapshotInfo
from pgcite._inputs import excerpt
from pgcite.ingest import Failure
from pgcite.service._auth import Access, admin_access
from pgcite.service._errors import ApiError
from pgcite.service._models import ActivationOut, ErrorOut, SnapshotOut, UploadOut
from pgcite.service._routes import ERRORS
from pgcite.service._state import ServiceState, get_state
from pgcite.service._upload import new_folder, save
from pgcite.store import list_snapshots

router = APIRouter(tags=["admin"])
_log = logging.getLogger("pgcite.service")
TOO_LARGE = ScanLimitExceeded.kind  # a failure's kind for a file over a reading limit (HTTP 413)
State = Annotated[ServiceState, Depends(get_state)]
Admin = Annotated[Access, Depends(admin_access)]


def _snapshot_out(snap: SnapshotInfo) -> SnapshotOut:
    return SnapshotOut(
        snapshot_id=snap.snapshot_id, state=snap.state, active=snap.active,
        embedding_model=snap.embed_model, corpus_version=snap.corpus_version,
        created_at=snap.created_at, documents=snap.n_documents, chunks=snap.n_chunks,
        note=snap.note, evaluation=snap.evaluation,
    )


@router.get("/v1/collections/{collection}/snapshots", response_model=list[SnapshotOut],
            responses=ERRORS)
def snapshots(access: Admin, state: State) -> Any:
    """Every snapshot of the collection, oldest first; ``active`` marks the live one."""
    with state.client.connection() as conn:
        return [_snapshot_out(s) for s in list_snapshots(conn, access.info)]


@router.post("/v1/collections/{collection}/snapshots/{snapshot_id}/activate",
             response_model=ActivationOut, responses={**ERRORS, 409: {"model": ErrorOut}})
def activate(
    snapshot_id: Annotated[int, Path(ge=1, le=2**31 - 1)], access: Admin, state: State,
) -> Any:
    """Make a ready snapshot the live one, through the evaluation gate when the collection has a
    golden set (one transaction; queries switch atomically). A refusal is a 409 naming the
    failing figures."""
    from pgcite import lifecycle

    with state.client.connection() as conn:
        known = {s.snapshot_id for s in list_snapshots(conn, access.info)}
    if snapshot_id not in known:
        raise ApiError(404, f"collection {access.info.name!r} has no snapshot {snapshot_id}")
    try:
        result = lifecycle.activate(Collection(state.client, access.info), snapshot_id)
    except GateRefused as exc:
        raise ApiError(409, exc.message, hint=exc.hint) from None
    return ActivationOut(collection=access.info.name, active_snapshot=snapshot_id,
                         previous_snapshot=result.previous_id)


Text = Annotated[str | None, Form(max_length=200)]


@router.post("/v1/collections/{collection}/documents", response_model=UploadOut,
             status_code=201, responses={**ERRORS, 415: ERRORS[400]})
def upload(
    access: Admin, state: State,
    files: Annotated[list[UploadFile], File(description="documents (.jsonl .txt .md .html "
                                                        ".pdf; scans .png .jpg .tif by OCR)")],
    author: Text = None, corpus: Text = None, corpus_version: Text = None,
    entries: Annotated[bool, Form(description="read a .txt/.md journal as its dated entries "
                                              "(docs/ingest.md, 'A journal in one file')")] = False,
) -> Any:
    """Ingest files into a NEW, inactive snapshot (the live one is untouched); activate it with
    ``POST …/snapshots/{id}/activate`` once checked."""
    if len(files) > state.config.max_upload_files:
        raise ApiError(413, f"at most {state.config.max_upload_files} files per upload")
    for value in (author, corpus, corpus_version):
        if value is not None and "\x00" in value:
            raise ApiError(400, "form fields must not contain NUL characters")
    folder = new_folder()
    try:
        names = save(files, folder, state.config.max_upload_bytes)
        # Each file is loaded once, by the ingest, which fails a bad file alone (the loaders
        # check what PostgreSQL could not store): no screening pass before it, which read (and
        # OCR'd) every file twice.
        report = _ingest(state.client.collection(access.info.name), folder, names,
                         Overrides(author=author, corpus=corpus), corpus_version,
                         state.config.upload_budget_s, entries)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for failure in report.failed:  # the temporary folder is nobody's business
        failure.path = FsPath(failure.path).name
        failure.reason = excerpt(failure.reason, 200)
    if report.failed and report.snapshot_id is None:
        raise _nothing_ingested(report.failed)
    return UploadOut(collection=access.info.name, snapshot_id=report.snapshot_id,
                     activated=False, files=names, report=report.model_dump(mode="json"))


def _nothing_ingested(failed: list[Failure]) -> ApiError:
    """400, or 413 when every file was refused for what it would cost to read (a scan over an
    OCR limit: the ingest reports those with kind 'too_large')."""
    too_large = bool(failed) and all(f.kind == TOO_LARGE for f in failed)
    return ApiError(413 if too_large else 400, "no document could be ingested: " + "; ".join(
        f"{f.path}: {f.reason}" for f in failed)[:1000],
        hint="split the scans, or raise PGCITE_OCR_MAX_* on the server" if too_large else None)


def _ingest(collection: Collection, folder: FsPath, names: list[str], overrides: Overrides,
            corpus_version: str | None, budget_s: float, entries: bool) -> IngestReport:
    """The saved files into a new inactive snapshot. Content the loaders let through and the
    database still refused is the upload's fault (422), never a 500; a lost connection is 503."""
    try:
        return collection.ingest([folder / n for n in names], overrides=overrides,
                                 corpus_version=corpus_version, entries=entries, activate=False,
                                 time_budget_s=budget_s)  # past it: TimeBudgetExceeded, a 413
    except (psycopg.DataError, ValueError, RecursionError) as exc:
        # the database's text may quote the content: the server log has it, the client not
        _log.warning("an upload's content was refused: %s", exc)
        raise ApiError(422, "the upload's content cannot be stored (nothing was stored)",
                       hint="the server log has the database's reason") from None
    except psycopg.OperationalError as exc:
        raise ApiError(503, f"database unavailable: {type(exc).__name__}") from None
