"""Judged query sets: the project's ``golden.jsonl`` and BEIR folders, read into one model.

Two layouts are accepted (docs/evaluation.md documents both, with the kinds and an example):

* ``golden.jsonl`` -- one object a line: ``id, query, kind, relevant[], cutoff, must_not[], note``.
  Every relevant id gets grade 1.
* a BEIR folder -- ``queries.jsonl`` (``_id, text``) and ``qrels/<split>.tsv`` (header, then
  ``query-id corpus-id score``). Only queries with at least one judgment are kept, in the order of
  ``queries.jsonl``; their kind is ``"query"``.

``GoldenSet.sha256`` identifies the judgments a result was computed against: for ``golden.jsonl``
it equals ``sha256sum golden.jsonl``; for BEIR it is the SHA-256 of ``queries.jsonl``'s bytes
followed by the qrels file's bytes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from pgcite._errors import ConfigError
from pgcite.evaluate._base import Frozen

GOLDEN_KINDS = ("fact", "keyword", "paraphrase", "cutoff", "absent")
"""Kinds a ``golden.jsonl`` line may have (the README's list)."""

BEIR_KIND = "query"
"""The kind given to every BEIR query: BEIR does not classify its queries."""


class GoldenQuery(Frozen):
    """One judged query."""

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    kind: str = BEIR_KIND
    relevant: dict[str, int] = Field(default_factory=dict)  # document id -> grade; > 0 is relevant
    cutoff: dt.date | None = None  # nothing dated after this may be returned
    must_not: list[str] = Field(default_factory=list)  # documents that must never be returned
    note: str | None = None
    # Gold answer strings: a correct answer contains one (answer benchmark, docs/answers.md).
    answers: list[str] = Field(default_factory=list)

    @property
    def relevant_ids(self) -> frozenset[str]:
        """Documents with a positive grade (grade 0 means judged and not relevant)."""
        return frozenset(doc for doc, grade in self.relevant.items() if grade > 0)

    @property
    def answerable(self) -> bool:
        """Whether a right answer exists: the set has at least one relevant document for it."""
        return self.kind != "absent" and bool(self.relevant_ids)


class GoldenSet(Frozen):
    """A named list of judged queries plus the hash of the files they came from."""

    name: str
    path: str
    sha256: str
    queries: list[GoldenQuery]

    def kinds(self) -> list[str]:
        """The kinds present, in order of first appearance (stable for tables and plots)."""
        return list(dict.fromkeys(q.kind for q in self.queries))


def load_golden(path: Path, *, split: str | None = None, name: str | None = None) -> GoldenSet:
    """Read a ``golden.jsonl`` file, a folder holding one, or a BEIR folder.

    ``split`` picks ``qrels/<split>.tsv`` in a BEIR folder (default ``test`` if present, else the
    only one). ``name`` overrides the set's name (default: the data folder's name).
    """
    path = Path(path)
    if path.is_file():
        if path.suffix != ".jsonl":
            raise ConfigError(
                f"{path}: not a judged query set",
                hint="give a golden.jsonl file or a BEIR folder (queries.jsonl + qrels/)",
            )
        return _load_golden_jsonl(path, name)
    if path.is_dir():
        if (path / "queries.jsonl").is_file() and (path / "qrels").is_dir():
            return _load_beir(path, split, name)
        if (path / "golden.jsonl").is_file():
            return _load_golden_jsonl(path / "golden.jsonl", name)
        raise ConfigError(
            f"{path}: no golden.jsonl and no BEIR layout (queries.jsonl + qrels/) in this folder"
        )
    raise ConfigError(f"{path}: no such file or folder")


# --- golden.jsonl -------------------------------------------------------------------------------


def _load_golden_jsonl(path: Path, name: str | None) -> GoldenSet:
    data = path.read_bytes()
    queries: list[GoldenQuery] = []
    seen: set[str] = set()
    for n, obj in _json_lines(path, data):
        query = _golden_line(path, n, obj)
        if query.id in seen:
            raise ConfigError(f"{path}:{n}: duplicate query id {query.id!r}")
        seen.add(query.id)
        queries.append(query)
    if not queries:
        raise ConfigError(f"{path}: no queries")
    return GoldenSet(
        name=name or path.parent.name or path.stem,
        path=str(path),
        sha256=hashlib.sha256(data).hexdigest(),
        queries=queries,
    )


def _golden_line(path: Path, line: int, obj: dict[str, Any]) -> GoldenQuery:
    where = f"{path}:{line}"
    kind = obj.get("kind")
    if kind not in GOLDEN_KINDS:
        raise ConfigError(
            f"{where}: unknown kind {kind!r}", hint=f"use one of {', '.join(GOLDEN_KINDS)}"
        )
    relevant = obj.get("relevant") or []
    if not isinstance(relevant, list) or not all(isinstance(r, str) for r in relevant):
        raise ConfigError(f"{where}: 'relevant' must be a list of document ids")
    try:
        query = GoldenQuery.model_validate(
            {
                "id": obj.get("id"),
                "text": obj.get("query"),
                "kind": kind,
                "relevant": dict.fromkeys(relevant, 1),
                "cutoff": obj.get("cutoff"),
                "must_not": obj.get("must_not") or [],
                "note": obj.get("note"),
                "answers": obj.get("answers") or [],
            }
        )
    except ValidationError as exc:
        raise ConfigError(f"{where}: {_first_error(exc)}") from None
    _check_kind_consistency(where, query)
    return query


def _check_kind_consistency(where: str, query: GoldenQuery) -> None:
    # These would silently score as nonsense (an "absent" query with answers, a cutoff query
    # that checks nothing), so they are data errors, not edge cases.
    if query.kind == "absent" and query.relevant:
        raise ConfigError(f"{where}: an 'absent' query cannot list relevant documents")
    if query.kind != "absent" and not query.relevant_ids:
        raise ConfigError(f"{where}: a {query.kind!r} query needs at least one relevant document")
    if query.kind == "cutoff" and query.cutoff is None:
        raise ConfigError(f"{where}: a 'cutoff' query needs a cutoff date")


# --- BEIR ---------------------------------------------------------------------------------------


def _load_beir(folder: Path, split: str | None, name: str | None) -> GoldenSet:
    qrels_path = _qrels_file(folder, split)
    queries_path = folder / "queries.jsonl"
    queries_bytes = queries_path.read_bytes()
    qrels_bytes = qrels_path.read_bytes()
    judgments = _parse_qrels(qrels_path, qrels_bytes)
    texts: dict[str, str] = {}
    answers: dict[str, list[str]] = {}
    for n, obj in _json_lines(queries_path, queries_bytes):
        qid, text = obj.get("_id"), obj.get("text")
        if not isinstance(qid, str) or not qid or not isinstance(text, str) or not text:
            raise ConfigError(f"{queries_path}:{n}: needs a non-empty string '_id' and 'text'")
        if qid in texts:
            raise ConfigError(f"{queries_path}:{n}: duplicate query id {qid!r}")
        texts[qid] = text
        answers[qid] = _beir_answers(queries_path, n, obj)
    unknown = sorted(set(judgments) - set(texts))
    if unknown:
        # Usually the qrels of another collection or language: refuse rather than score less.
        raise ConfigError(
            f"{qrels_path}: {len(unknown)} judged query id(s) not in {queries_path.name}, "
            f"e.g. {unknown[0]!r}"
        )
    queries = [
        GoldenQuery(id=qid, text=text, relevant=judgments[qid], answers=answers[qid])
        for qid, text in texts.items()
        if qid in judgments
    ]
    hasher = hashlib.sha256(queries_bytes)
    hasher.update(qrels_bytes)
    return GoldenSet(
        name=name or f"{folder.name}:{qrels_path.stem}",
        path=str(folder),
        sha256=hasher.hexdigest(),
        queries=queries,
    )


def _beir_answers(path: Path, line: int, obj: dict[str, Any]) -> list[str]:
    """Gold answer strings from ``metadata.answers`` (XQuAD, SQuAD-style sets), if any."""
    metadata = obj.get("metadata")
    found = metadata.get("answers") if isinstance(metadata, dict) else None
    if found is None:
        return []
    if not isinstance(found, list) or not all(isinstance(a, str) for a in found):
        raise ConfigError(f"{path}:{line}: 'metadata.answers' must be a list of strings")
    return found


def _qrels_file(folder: Path, split: str | None) -> Path:
    available = sorted(p.stem for p in (folder / "qrels").glob("*.tsv"))
    if split is None:
        if "test" in available:
            split = "test"
        elif len(available) == 1:
            split = available[0]
        else:
            raise ConfigError(
                f"{folder}/qrels: choose a split",
                hint=f"available: {', '.join(available) or 'none'}",
            )
    if split not in available:
        raise ConfigError(
            f"{folder}/qrels/{split}.tsv: no such split",
            hint=f"available: {', '.join(available) or 'none'}",
        )
    return folder / "qrels" / f"{split}.tsv"


def _parse_qrels(path: Path, data: bytes) -> dict[str, dict[str, int]]:
    judgments: dict[str, dict[str, int]] = {}
    for n, line in enumerate(_decode(path, data).splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if n == 1 and fields[0] == "query-id":
            continue
        if len(fields) != 3 or not fields[0] or not fields[1]:
            raise ConfigError(f"{path}:{n}: expected 'query-id<TAB>corpus-id<TAB>score'")
        try:
            grade = int(fields[2])
        except ValueError:
            raise ConfigError(f"{path}:{n}: score {fields[2]!r} is not an integer") from None
        judgments.setdefault(fields[0], {})[fields[1]] = grade
    if not judgments:
        raise ConfigError(f"{path}: no judgments")
    return judgments


# --- shared -------------------------------------------------------------------------------------


def _json_lines(path: Path, data: bytes) -> Iterator[tuple[int, dict[str, Any]]]:
    for n, line in enumerate(_decode(path, data).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise ConfigError(f"{path}:{n}: expected a JSON object")
        yield n, obj


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 (byte {exc.start})") from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or "line"
    return f"{field}: {err['msg']}"
