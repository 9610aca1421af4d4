"""Errors a user can act on.

Every error pgcite raises on purpose is a :class:`PgciteError` with a one-line message saying what
is wrong and, where we know it, a ``hint`` saying what to do. The CLI prints both and exits non-zero;
the HTTP service maps them to 4xx answers.
"""

from __future__ import annotations


class PgciteError(Exception):
    """Base class: something the user can fix."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"


class ConfigError(PgciteError):
    """Bad settings, bad arguments, bad names."""

    exit_code = 2


class InvalidInput(ConfigError):
    """A value no surface accepts, whoever sends it: text with a NUL or a lone surrogate, text
    or a list over its bound, a date that is not one, a number that is not finite
    (``pgcite/_inputs.py`` has the rules; HTTP answers 422, MCP a tool error, the CLI one line)."""


class AccessDenied(PgciteError):
    """The caller may not do this (``pgcite/service/_access.py``): a reader key administering,
    or naming a snapshot that is not the active one. HTTP answers 403."""


class SnapshotNotFound(PgciteError):
    """The collection has no snapshot of that id (an error that lists no other ids)."""


class TimeBudgetExceeded(PgciteError):
    """Work given a time budget (an upload's ingest: ``ServiceConfig.upload_budget_s``) needed
    more; nothing of it was stored. HTTP answers 413."""


class DatabaseError(PgciteError):
    """The database cannot be reached or lacks what pgcite needs (pgvector)."""


class CollectionOutdated(DatabaseError):
    """A collection's schema is of another version than this pgcite reads (an older one needs
    ``pgcite collection upgrade``)."""


class CollectionNotFound(PgciteError):
    """The named collection does not exist."""


class CollectionExists(PgciteError):
    """A collection of that name exists already."""


class FilterError(PgciteError):
    """A search filter names an unknown field or has a value of the wrong type."""

    exit_code = 2


class InvalidFilter(InvalidInput, FilterError):
    """A filter that is malformed whatever the collection (a cutoff that is no date, a NUL in a
    corpus name, a key over 200 characters): an :class:`InvalidInput` and a :class:`FilterError`."""


class EmbedderError(PgciteError):
    """An embedder cannot be loaded, or does not match the collection."""


class LoadError(PgciteError):
    """A source file cannot be read. Ingests report it and go on with the other files;
    ``kind`` says why in one word (the ingest report's ``failed[].kind``)."""

    kind = "unreadable"

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class MissingDependency(LoadError):
    """Reading the file needs an optional part that is not installed here (the ``ocr`` extra,
    the tesseract program or its language data); the reason says what to install."""

    kind = "missing_dependency"


class ScanLimitExceeded(LoadError):
    """A scan over one of the OCR limits (``Settings.ocr_max_pages``, ``ocr_max_page_pixels``,
    ``ocr_max_seconds``), refused whole before the work it would cost: ``limit`` names which.
    HTTP: 413 (content too large to process)."""

    kind = "too_large"

    def __init__(self, path: str, reason: str, *, limit: str) -> None:
        super().__init__(path, reason)
        self.limit = limit


class ExhibitNotFound(PgciteError):
    """The named exhibit does not exist (or was deleted)."""


class ExhibitExists(PgciteError):
    """An exhibit of that name exists already."""
