"""Uploaded files: safe names on disk and a byte limit while saving.

What is in them is the ingest's business: its loaders fail a bad file alone (content PostgreSQL
cannot store, JSON nested 100,000 deep, a scan over an OCR limit, anything a loader did not
foresee) and the others are ingested, each file read once.

An upload's files live in a temporary folder named after the serving process
(``pgcite-upload-<pid>-…``), removed when the request ends whatever its outcome (a client gone
mid-way included: the route runs to its end). A process killed mid-upload cannot remove its
folder; the next service to start removes every folder whose process is gone
(:func:`remove_stale_folders`).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import unicodedata
from pathlib import Path

from fastapi import UploadFile

from pgcite._inputs import excerpt
from pgcite.ingest import SUPPORTED_SUFFIXES
from pgcite.service._errors import ApiError
from pgcite.store import process_alive

_UNSAFE = re.compile(r"[^\w.-]+")  # \w is Unicode-aware: ملف.jsonl keeps its name
_FOLDER = "pgcite-upload-"
_OWNED = re.compile(r"pgcite-upload-(\d+)-")
_log = logging.getLogger("pgcite.service")
MAX_STEM_BYTES = 120  # far below the 255-byte limit of file names, with room for "-N"
_CHUNK = 1 << 20


def safe_name(raw: str | None, index: int, taken: set[str]) -> str:
    """A plain file name (no directories, at most ~130 bytes) with a supported suffix, unique in
    the upload. The stem and the suffix are cleaned apart: a stem of nothing but unsafe
    characters becomes ``upload-N``, never a rejected suffix."""
    base = Path(unicodedata.normalize("NFC", raw or "").replace("\\", "/")).name
    suffix = Path(base).suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise ApiError(415, f"unsupported file type for {excerpt(raw, 80)!r}",
                       hint="upload " + ", ".join(SUPPORTED_SUFFIXES))
    stem = _UNSAFE.sub("_", base[: -len(suffix)]).strip("._")
    stem = stem.encode()[:MAX_STEM_BYTES].decode("utf-8", "ignore") or f"upload-{index}"
    candidate, n = stem + suffix, 1
    while candidate in taken:
        candidate, n = f"{stem}-{n}{suffix}", n + 1
    taken.add(candidate)
    return candidate


def save(files: list[UploadFile], folder: Path, limit: int) -> list[str]:
    """Write the uploads under ``folder``; 413 once their total passes ``limit`` bytes."""
    names: set[str] = set()
    saved, total = [], 0
    for index, upload in enumerate(files):
        name = safe_name(upload.filename, index, names)
        with (folder / name).open("wb") as out:
            while chunk := upload.file.read(_CHUNK):
                total += len(chunk)
                if total > limit:
                    raise ApiError(413, f"upload larger than {limit} bytes")
                out.write(chunk)
        saved.append(name)
    return saved


def new_folder() -> Path:
    """A temporary folder for one upload, named after this process."""
    return Path(tempfile.mkdtemp(prefix=f"{_FOLDER}{os.getpid()}-"))


def remove_stale_folders(root: Path | None = None) -> list[Path]:
    """Remove the upload folders of processes that no longer run (killed mid-upload); those of
    live processes, this one's included, are theirs. Returns what it removed."""
    removed = []
    for folder in (root or Path(tempfile.gettempdir())).glob(f"{_FOLDER}*"):
        owner = _OWNED.match(folder.name)
        if owner is None or not folder.is_dir() or process_alive(int(owner[1])):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    if removed:
        _log.warning("removed %d upload folder(s) left by killed processes", len(removed))
    return removed

