"""The admin plane: snapshots, activation, document upload. Runs as the owning role."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path as FsPath
from typing import Annotated, Any

from fastapi import APIRouter, Depends, File, Form, Path, UploadFile

from pgcite.ingest._loaders import SUPPORTED_SUFFIXES, Overrides
from pgcite.service._auth import Access, admin_access
from pgcite.service._errors import ApiError
from pgcite.service._models import ActivationOut, ErrorOut, SnapshotOut, UploadOut
from pgcite.service._routes import ERRORS
from pgcite.service._state import ServiceState, get_state
from pgcite.store._gate import GateRefused
from pgcite.store._snapshots import SnapshotInfo, list_snapshots

router = APIRouter(tags=["admin"])
State = Annotated[ServiceState, Depends(get_state)]
Admin = Annotated[Access, Depends(admin_access)]
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_CHUNK = 1 << 20


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
    from pgcite import _lifecycle
    from pgcite._client import Collection

    with state.client.connection() as conn:
        known = {s.snapshot_id for s in list_snapshots(conn, access.info)}
    if snapshot_id not in known:
        raise ApiError(404, f"collection {access.info.name!r} has no snapshot {snapshot_id}")
    try:
        result = _lifecycle.activate(Collection(state.client, access.info), snapshot_id)
    except GateRefused as exc:
        raise ApiError(409, exc.message, hint=exc.hint) from None
    return ActivationOut(collection=access.info.name, active_snapshot=snapshot_id,
                         previous_snapshot=result.previous_id)


def _safe_name(raw: str | None, index: int, taken: set[str]) -> str:
    """A plain file name (no directories) with a supported suffix, unique in the upload."""
    name = _UNSAFE.sub("_", FsPath(raw or "").name).strip("._") or f"upload-{index}"
    suffix = FsPath(name).suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise ApiError(415, f"unsupported file type for {raw!r}",
                       hint="upload " + ", ".join(SUPPORTED_SUFFIXES))
    stem = FsPath(name).stem
    candidate, n = name, 1
    while candidate in taken:
        candidate, n = f"{stem}-{n}{suffix}", n + 1
    taken.add(candidate)
    return candidate


def _save(files: list[UploadFile], folder: FsPath, limit: int) -> list[str]:
    names: set[str] = set()
    saved, total = [], 0
    for index, upload in enumerate(files):
        name = _safe_name(upload.filename, index, names)
        with (folder / name).open("wb") as out:
            while chunk := upload.file.read(_CHUNK):
                total += len(chunk)
                if total > limit:
                    raise ApiError(413, f"upload larger than {limit} bytes")
                out.write(chunk)
        saved.append(name)
    return saved


Text = Annotated[str | None, Form(max_length=200)]


@router.post("/v1/collections/{collection}/documents", response_model=UploadOut,
             status_code=201, responses={**ERRORS, 413: ERRORS[400], 415: ERRORS[400]})
def upload(
    access: Admin, state: State,
    files: Annotated[list[UploadFile], File(description="documents (.jsonl .txt .md .html "
                                                        ".pdf; scans .png .jpg .tif by OCR)")],
    author: Text = None, corpus: Text = None, corpus_version: Text = None,
) -> Any:
    """Ingest files into a NEW, inactive snapshot (the live one is untouched); activate it with
    ``POST …/snapshots/{id}/activate`` once checked."""
    if len(files) > state.config.max_upload_files:
        raise ApiError(413, f"at most {state.config.max_upload_files} files per upload")
    for value in (author, corpus, corpus_version):
        if value is not None and "\x00" in value:
            raise ApiError(400, "form fields must not contain NUL characters")
    folder = FsPath(tempfile.mkdtemp(prefix="pgcite-upload-"))
    try:
        names = _save(files, folder, state.config.max_upload_bytes)
        collection = state.client.collection(access.info.name)
        report = collection.ingest(
            [folder / n for n in names], overrides=Overrides(author=author, corpus=corpus),
            corpus_version=corpus_version, activate=False)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if report.failed and report.snapshot_id is None:
        raise ApiError(400, "no document could be ingested: " + "; ".join(
            f"{FsPath(f.path).name}: {f.reason}" for f in report.failed)[:1000])
    for failure in report.failed:  # the temporary folder is nobody's business
        failure.path = FsPath(failure.path).name
    return UploadOut(collection=access.info.name, snapshot_id=report.snapshot_id,
                     activated=False, files=names, report=report.model_dump(mode="json"))
