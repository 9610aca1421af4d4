"""Uploaded files: safe names on disk, a byte limit while saving, and a screen of each file's
content before the ingest sees it.

The screen is why one bad file cannot fail the others or surface as a 500: each file is loaded
alone, and a file whose loader raises (JSON nested 100,000 deep: RecursionError) or whose text
PostgreSQL cannot store (a NUL byte, a lone surrogate) is reported as failed, with a short
reason, while the rest are ingested. It holds whatever the loaders do about such content.

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi import UploadFile

from pgcite._inputs import excerpt
from pgcite._types import Document
from pgcite.ingest._loaders import SUPPORTED_SUFFIXES, iter_documents
from pgcite.ingest._pipeline import Failure
from pgcite.service._errors import ApiError
from pgcite.store._keeper import process_alive

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


def screen(folder: Path, names: list[str]) -> tuple[list[str], list[Failure]]:
    """The files that load and hold only storable text, and a failure for each other one."""
    good: list[str] = []
    failed: list[Failure] = []
    for name in names:
        reason = _problem(folder / name)
        if reason is None:
            good.append(name)
        else:
            failed.append(Failure(path=name, reason=excerpt(reason, 200)))
    return good, failed


def _problem(path: Path) -> str | None:
    try:
        for item in iter_documents([path]):
            if not isinstance(item, Document):
                return item.reason
            if (bad := _unstorable(item)) is not None:
                return f"document {excerpt(item.document_id, 60)!r}: {bad}"
    except RecursionError:
        return "nested too deeply to read"
    except Exception as exc:  # a loader's bug must fail this file, not the upload
        return f"cannot be read ({type(exc).__name__}: {exc})"
    return None


def _unstorable(doc: Document) -> str | None:
    """Why PostgreSQL would refuse one of the document's strings, or None."""
    for text in _strings(doc.model_dump()):
        if "\x00" in text:
            return "text contains a NUL character"
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "text is not valid Unicode (a lone surrogate)"
    return None


def _strings(value: Any) -> Iterator[str]:
    """Every string in a nested structure, keys included; a stack, not recursion, so depth
    costs nothing."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
