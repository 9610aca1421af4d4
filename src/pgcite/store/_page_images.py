"""Page images of scans, stored with their document version (docs/exhibits.md, "Scanned pages").

Written in the ingest's transaction, beside the version's chunks, so a page image exists exactly
when its passages do; removed with the version (gc). Read by version and page: what a caller may
see is decided by the passages on that page (retrieve/_sources.py), never by the image alone.
"""

from __future__ import annotations

from collections.abc import Iterable

import psycopg
from psycopg import sql
from pydantic import BaseModel, ConfigDict

from pgcite._types import PageImage
from pgcite.store._collections import CollectionInfo


class StoredPage(BaseModel):
    """A stored page image: the encoded image and the sizes to draw OCR boxes on it."""

    model_config = ConfigDict(frozen=True)

    page: int
    media_type: str
    width: int
    height: int
    ocr_width: int
    ocr_height: int
    data: bytes


def store_page_images(conn: psycopg.Connection, info: CollectionInfo, version_pk: int,
                      pages: Iterable[tuple[int, PageImage]]) -> int:
    """Store ``(page number, image)`` pairs of one version (a page stored already is kept);
    returns how many were written."""
    written = 0
    for page, image in pages:
        cur = conn.execute(sql.SQL(
            "INSERT INTO {s}.page_images (version_pk, page, media_type, width, height,"
            " ocr_width, ocr_height, data) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT DO NOTHING").format(s=info.schema_id),
            (version_pk, page, image.media_type, image.width, image.height, image.ocr_width,
             image.ocr_height, image.data))
        written += cur.rowcount
    return written


def page_image(conn: psycopg.Connection, info: CollectionInfo, version_pk: int,
               page: int) -> StoredPage | None:
    row = conn.execute(sql.SQL(
        "SELECT page, media_type, width, height, ocr_width, ocr_height, data"
        " FROM {s}.page_images WHERE version_pk = %s AND page = %s").format(s=info.schema_id),
        (version_pk, page)).fetchone()
    if row is None:
        return None
    return StoredPage.model_validate(dict(zip(StoredPage.model_fields, row, strict=True)))


def has_page_image(conn: psycopg.Connection, info: CollectionInfo, version_pk: int,
                   page: int) -> bool:
    row = conn.execute(sql.SQL(
        "SELECT 1 FROM {s}.page_images WHERE version_pk = %s AND page = %s").format(
        s=info.schema_id), (version_pk, page)).fetchone()
    return row is not None
