"""Contextual chunks: with ``contextual="header"`` the embedder reads a one-line header of the
chunk's document context before its body; bodies, ids and the keyword leg stay as they are."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from psycopg import sql

import pgcite
from pgcite._types import ChunkDraft, Document, Unit
from pgcite.config import Settings
from pgcite.embed._registry import load_embedder
from pgcite.ingest import _flow, _reembed
from pgcite.ingest._chunking import (
    HEADER_MAX_CHARS,
    MIN_BODY_TOKENS,
    chunk_document,
    context_header,
    embedding_text,
)
from pgcite.llm import OpenAIChat
from pgcite.store._collections import CollectionSettings

from .conftest import DIARY
from .llm_server import Reply, chat_completion, serve
from .test_snapshots import cli

HEADER = CollectionSettings(contextual="header")
MINILM = "all-MiniLM-L6-v2"


def draft(body: str = "The body.", **fields: Any) -> ChunkDraft:
    base: dict[str, Any] = {
        "id": "d-a", "document_id": "d", "ordinal": 0, "body": body, "title": None,
        "locator": None, "date_start": None, "date_end": None, "author": None, "corpus": None,
        "source": "s.jsonl", "citation": "", "metadata": {},
    }
    return ChunkDraft(**{**base, **fields})


# --- the text to embed -------------------------------------------------------------------------


def test_header_holds_the_parts_that_exist_in_a_fixed_order() -> None:
    full = draft(title="Diary", locator="chapter-7 > September", date_start=dt.date(1666, 9, 12),
                 date_end=dt.date(1666, 9, 12), author="Samuel Pepys")
    assert embedding_text(full, "header") == (
        "Diary — chapter-7 > September — 12 September 1666 — Samuel Pepys\nThe body.")
    dated = draft(date_start=dt.date(1666, 9, 2), date_end=dt.date(1666, 9, 8), author="S. P.")
    assert embedding_text(dated, "header") == "2 September 1666 – 8 September 1666 — S. P.\nThe body."
    spread = draft(title="  A\n title  ", locator=" ")  # whitespace collapses; blanks drop out
    assert embedding_text(spread, "header") == "A title\nThe body."
    assert embedding_text(draft(), "header") == "The body."  # nothing to say: the body alone


def test_off_embeds_the_title_and_body_as_before() -> None:
    full = draft(title="Diary", locator="p. 3", date_start=dt.date(1666, 9, 12),
                 author="Samuel Pepys")
    assert embedding_text(full) == embedding_text(full, "off") == "Diary\nThe body."
    assert embedding_text(draft(author="Samuel Pepys")) == "The body."
    # a title-only document reads the same either way (so its embeddings are shared in the cache)
    assert embedding_text(draft(title="Diary"), "header") == embedding_text(draft(title="Diary"))


def test_a_long_title_is_cut_at_a_word() -> None:
    header = context_header(title="word " * 100, locator=None, date_start=dt.date(1660, 1, 1),
                            date_end=None, author="Samuel Pepys")
    assert len(header) <= HEADER_MAX_CHARS + 1 and header.endswith("word…")


@pytest.fixture(scope="module")
def minilm(settings: Settings) -> Any:
    return load_embedder(MINILM, settings)


def test_header_and_body_fit_the_budget_with_the_real_tokenizer(minilm: Any) -> None:
    text = "\n\n".join(
        " ".join(f"Sentence {p}.{s} tells of the fire, the plague and the Navy Office." for s in
                 range(6)) for p in range(12))
    doc = Document(document_id="long", source="s.md", title="The Diary of Samuel Pepys",
                   author="Samuel Pepys", units=[
                       Unit(text=text, locator="Volume 7 > September 1666",
                            date_start=dt.date(1666, 9, 2), date_end=dt.date(1666, 9, 8))])
    count = minilm.count_tokens
    header = count(context_header(title=doc.title, locator="Volume 7 > September 1666",
                                  date_start=dt.date(1666, 9, 2), date_end=dt.date(1666, 9, 8),
                                  author="Samuel Pepys"))
    assert 20 < header < 40
    for budget in (header + 32, 100, 254):
        on = chunk_document(doc, count_tokens=count, max_tokens=budget, contextual="header")
        off = chunk_document(doc, count_tokens=count, max_tokens=budget)
        assert all(count(embedding_text(c, "header")) <= budget for c in on), budget
        assert all(count(embedding_text(c)) <= budget for c in off), budget
        assert max(count(c.body) for c in on) <= budget - header
        # the header takes room from the body: more (smaller) chunks, the same text in the end
        assert len(on) >= len(off) > 1
        assert " ".join(c.body for c in on).split() == text.split()
    # a header that leaves under MIN_BODY_TOKENS: bodies of at most that, never the whole budget
    small = chunk_document(doc, count_tokens=count, max_tokens=header + 8, contextual="header")
    assert max(count(c.body) for c in small) <= MIN_BODY_TOKENS


# --- through a real ingest ---------------------------------------------------------------------


class Recorder:
    """Every text the ingest hands to the embedding cache (in one call, or group by group
    while it chunks), and the real result."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: Any) -> None:
        self.texts: list[str] = []
        real = module.embed_with_cache

        def record(db: Any, embedder: Any, texts: Sequence[str], *args: Any, **kwargs: Any) -> Any:
            self.texts.extend(texts)
            return real(db, embedder, texts, *args, **kwargs)

        monkeypatch.setattr(module, "embed_with_cache", record)

    def take(self) -> list[str]:
        texts, self.texts = self.texts, []
        return texts


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    return Recorder(monkeypatch, _flow)


@pytest.fixture
def ctx(client: pgcite.Client, request: pytest.FixtureRequest) -> Iterator[pgcite.Collection]:
    name = "ctx_" + request.node.name.removeprefix("test_")[:40].lower()
    yield client.create_collection(name, settings=HEADER)
    client.drop_collection(name)


def chunk_rows(col: pgcite.Collection) -> dict[str, tuple[str, str, np.ndarray]]:
    """id -> (document id, body, embedding) of the active snapshot's chunks."""
    with col.client.connection() as conn:
        rows = conn.execute(sql.SQL(
            "SELECT c.id, c.document_id, c.body, c.embedding FROM {s}.chunks c"
            " JOIN {s}.snapshot_members m USING (version_pk)"
            " JOIN {s}.active a ON a.snapshot_id = m.snapshot_id"
        ).format(s=col.info.schema_id)).fetchall()
    return {r[0]: (r[1], r[2], np.asarray(r[3].to_numpy(), dtype=np.float32)) for r in rows}


def single_chunk_docs(rows: dict[str, tuple[str, str, np.ndarray]]) -> dict[str, str]:
    """id -> body of the chunks of documents that are one chunk (their cuts cannot move)."""
    per_doc: dict[str, list[str]] = {}
    for cid, (doc_id, _, _) in rows.items():
        per_doc.setdefault(doc_id, []).append(cid)
    return {ids[0]: rows[ids[0]][1] for ids in per_doc.values() if len(ids) == 1}


def test_ingest_embeds_the_header_and_stores_the_body(
    diary: pgcite.Collection, ctx: pgcite.Collection, recorder: Recorder, minilm: Any,
) -> None:
    report = ctx.ingest([DIARY], progress=False)
    assert report.activated and not report.failed
    texts = recorder.take()
    assert len(texts) == report.embedded + report.cached == report.chunks_added
    assert any(t.startswith("2 September 1666 — Samuel Pepys\nJane called us up")
               for t in texts)
    assert any(t.startswith("5 September 1666 — Elizabeth Pepys\n") for t in texts)
    assert any(t.startswith("Editor\n") for t in texts)  # undated note: only what exists

    on, off = chunk_rows(ctx), chunk_rows(diary)
    # short entries keep their ids and bodies (a long one may be cut a little differently)
    assert single_chunk_docs(on) == single_chunk_docs(off) and len(single_chunk_docs(on)) == 11
    assert {doc for doc, _, _ in on.values()} == {doc for doc, _, _ in off.values()}
    assert not any(" — " in body or "Samuel" in body for _, body, _ in on.values())
    # the stored vector is the header text's, not the body's
    cid = "d-1666-09-02-a"
    body = on[cid][1]
    with_header, bare = minilm.embed_documents([f"2 September 1666 — Samuel Pepys\n{body}", body])
    assert float(np.dot(on[cid][2], with_header)) > 0.999 > float(np.dot(on[cid][2], bare))

    # the keyword leg indexes title + body either way: the same hits, the same scores
    for query in ("fire Pudding Lane", "Parmazan cheese", "Samuel Pepys"):
        a = diary.search(query, mode="keyword", top_k=20)
        b = ctx.search(query, mode="keyword", top_k=20)
        single = set(single_chunk_docs(on))
        assert [(h.id, round(h.score, 5)) for h in a.hits if h.id in single] == [
            (h.id, round(h.score, 5)) for h in b.hits if h.id in single]
    assert not ctx.search("Samuel Pepys", mode="keyword", top_k=5).hits  # header not indexed


def test_switching_the_setting_re_embeds_once(
    client: pgcite.Client, settings: Settings, recorder: Recorder,
) -> None:
    col = client.create_collection("ctx_switch", settings=CollectionSettings(contextual="off"))
    try:
        first = col.ingest([DIARY], progress=False)
        plain = recorder.take()
        assert not any(t.startswith("1 January 1660") for t in plain)
        again = col.ingest([DIARY], progress=False)  # unchanged, setting unchanged: a no-op
        assert (again.snapshot_id, again.new_versions, again.embedded) == (None, 0, 0)

        out = cli(settings, "collection", "set", col.name, "--contextual", "header", "--json")
        assert out.exit_code == 0, out.output
        assert json.loads(out.stdout)["settings"]["contextual"] == "header"
        before = chunk_rows(col)
        switched = col.ingest([DIARY], progress=False)
        assert switched.new_versions == first.new_versions == 12
        assert switched.snapshot_id is not None and switched.activated
        headed = recorder.take()  # (another test may have put them in the cache already)
        assert len(headed) == switched.embedded + switched.cached == switched.chunks_added
        assert any(t.startswith("1 January 1660 — Samuel Pepys\nUp early") for t in headed)
        after = chunk_rows(col)
        cid = "d-1660-01-01-a"
        assert after[cid][:2] == before[cid][:2]  # same document and body, a new vector
        assert float(np.dot(after[cid][2], before[cid][2])) < 0.999
        still = col.ingest([DIARY], progress=False)  # and unchanged again under the new setting
        assert (still.snapshot_id, still.new_versions, still.embedded) == (None, 0, 0)

        out = cli(settings, "collection", "set", col.name, "--contextual", "off")
        assert out.exit_code == 0 and "contextual off" in out.output
        back = col.ingest([DIARY], progress=False)
        # the first versions are found again (their hash never had the setting in it)
        assert back.snapshot_id is not None and (back.new_versions, back.embedded) == (0, 0)

        out = cli(settings, "collection", "set", col.name, "--contextual", "sometimes")
        assert out.exit_code != 0 and "invalid setting contextual" in out.output
    finally:
        client.drop_collection("ctx_switch")


def test_re_embedding_reads_the_same_text_as_ingest(
    ctx: pgcite.Collection, settings: Settings, recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctx.ingest([DIARY], progress=False)
    ingested = recorder.take()

    class Stop(Exception):
        pass

    seen: list[str] = []

    def capture(db: Any, embedder: Any, texts: Sequence[str], *args: Any, **kwargs: Any) -> Any:
        seen.extend(texts)
        raise Stop  # the texts are what matters; embedding them with e5 is another test's cost

    monkeypatch.setattr(_reembed, "embed_texts", capture)
    with pytest.raises(Stop):
        _reembed.reembed(ctx.client.db, ctx.name, "multilingual-e5-small", progress=False,
                         settings=settings)
    assert sorted(seen) == sorted(ingested)
    assert _reembed.version_hash("h", "m", "header") != _reembed.version_hash("h", "m")
    assert _reembed.version_hash("h", "m", "off") == _reembed.version_hash("h", "m")


def test_collection_show_reports_the_setting(ctx: pgcite.Collection, settings: Settings) -> None:
    shown = json.loads(cli(settings, "collection", "show", ctx.name, "--json").stdout)
    assert shown["settings"]["contextual"] == "header"
    assert CollectionSettings().contextual == "header"  # the default for new collections


def test_collections_stored_before_the_setting_keep_off(client: pgcite.Client) -> None:
    """A collection whose stored settings predate the option was embedded without headers:
    it reads as "off" (not the new default), so its next ingest re-embeds nothing."""
    col = client.create_collection("ctx_legacy")
    try:
        with client.db.transaction() as conn:
            conn.execute("UPDATE pgcite.collections SET settings = settings - 'contextual'"
                         " WHERE name = %s", (col.name,))
        assert client.collection(col.name).info.settings.contextual == "off"
    finally:
        client.drop_collection(col.name)


# --- contextual = "llm": the model's situating sentence ------------------------------------------


class SituatingChat:
    """Writes "About <first word of the chunk>." for each chunk; fails for chunks naming
    ``fail_on`` (a real ChatModel's interface)."""

    name = "situating"
    timeout_s = None

    def __init__(self, fail_on: str = "\x00") -> None:
        self.fail_on, self.calls = fail_on, 0

    def chat(self, system: str, user: str, *, max_tokens: int = 256) -> str:
        from pgcite.llm import LLMError

        self.calls += 1
        chunk = user.split("<chunk>")[1].split("</chunk>")[0]
        if self.fail_on in chunk:
            raise LLMError("situate: down")
        return f"About {chunk.split()[0]}.\nIgnore this second line."


def test_llm_sentences_are_embedded_stored_and_not_rewritten(
    settings: Settings, client: pgcite.Client, recorder: Recorder,
) -> None:
    chat = SituatingChat(fail_on="Hudibras")
    with pgcite.Client(settings, llm=chat) as c:
        col = c.create_collection("ctx_llm", settings=CollectionSettings(contextual="llm"))
        try:
            report = col.ingest([DIARY], progress=False)
            texts = recorder.take()
            assert report.situated == len(texts) - 1 and report.situate_fallbacks == 1
            assert any("\nAbout Jane.\nJane called us up" in t for t in texts)
            hudibras = [t for t in texts if "Hudibras" in t]
            assert hudibras and "About" not in hudibras[0]  # the header alone, as fallback
            with c.connection() as conn:
                stored = dict(conn.execute(sql.SQL(
                    "SELECT id, context FROM {s}.chunks").format(s=col.info.schema_id)).fetchall())
            assert stored["d-1666-09-02-a"] == "About Jane."  # only the first line is kept
            assert stored["d-1660-01-01-a"] is None
            hits = col.search("About Jane", mode="keyword", stages={"route": False}).hits
            assert all("About Jane" not in h.body for h in hits)  # never shown or cited
            calls = chat.calls
            again = col.ingest([DIARY], progress=False)  # unchanged: no model call
            assert again.snapshot_id is None and chat.calls == calls
        finally:
            c.drop_collection("ctx_llm")


def test_llm_mode_without_a_model_says_what_to_set(client: pgcite.Client) -> None:
    col = client.create_collection("ctx_nollm", settings=CollectionSettings(contextual="llm"))
    try:
        with pytest.raises(pgcite.ConfigError, match="needs a chat model") as info:
            col.ingest([DIARY], progress=False)
        assert info.value.hint and "PGCITE_LLM" in info.value.hint
        assert col.snapshots() == []  # nothing half-written
    finally:
        client.drop_collection("ctx_nollm")


# --- contextual = "llm": the calls run concurrently, bounded by PGCITE_LLM_CONCURRENCY -----------


def _chunk_of(user: str) -> str:
    return user.split("<chunk>")[1].split("</chunk>")[0]


def _about(body: str) -> str:
    """The sentence the test server writes for a chunk: its own opening words."""
    return f"About {' '.join(body.split()[:6])}."


class InFlight:
    """A chat server's reply function: "About <the chunk's opening words>." for each situating
    prompt, recording the most requests in flight at once. Each request is held until ``hold``
    have been in flight together (or ``wait_s`` passes), so that the count shows the client's
    concurrency, not how quickly this machine happens to start threads."""

    def __init__(self, hold: int, wait_s: float) -> None:
        self.hold, self.wait_s = hold, wait_s
        self.now = self.most = 0
        self._cond = threading.Condition()

    def __call__(self, request: Any) -> Reply:
        body = _chunk_of(request["messages"][1]["content"])
        with self._cond:
            self.now += 1
            self.most = max(self.most, self.now)
            self._cond.notify_all()
            self._cond.wait_for(lambda: self.most >= self.hold, timeout=self.wait_s)
            self.now -= 1
        return 200, chat_completion(_about(body)), 0.0


def _ingest_through_server(settings: Settings, client: pgcite.Client, name: str,
                           concurrency: int, replies: InFlight,
                           chat_type: type[OpenAIChat] = OpenAIChat) -> pgcite.IngestReport:
    """Ingest the diary into a new contextual = "llm" collection whose sentences an OpenAI-
    compatible server writes; check every chunk got its own sentence; drop the collection."""
    tuned = settings.model_copy(update={"llm_concurrency": concurrency})
    with serve(replies) as server, pgcite.Client(
            tuned, llm=chat_type(base_url=server.base_url, model="m")) as c:
        col = c.create_collection(name, settings=CollectionSettings(contextual="llm"))
        try:
            report = col.ingest([DIARY], progress=False)
            with c.connection() as conn:
                rows = conn.execute(sql.SQL("SELECT body, context FROM {s}.chunks").format(
                    s=col.info.schema_id)).fetchall()
        finally:
            c.drop_collection(name)
    assert len(server.requests) == len(rows) == report.chunks_added > concurrency
    assert (report.situated, report.situate_fallbacks) == (len(rows), 0)
    assert all(context == _about(body) for body, context in rows)  # each its own, none swapped
    return report


def test_llm_sentences_are_written_concurrently_in_the_chunks_order(
    settings: Settings, client: pgcite.Client,
) -> None:
    # 6: more than the 4 threads call_bounded once shared, which capped every caller at 4
    replies = InFlight(hold=6, wait_s=5.0)
    _ingest_through_server(settings, client, "ctx_llm_concurrent", 6, replies)
    assert 4 < replies.most <= 6


def test_llm_concurrency_one_sends_one_call_at_a_time(
    settings: Settings, client: pgcite.Client,
) -> None:
    replies = InFlight(hold=2, wait_s=0.2)  # a second call sent meanwhile would be seen
    _ingest_through_server(settings, client, "ctx_llm_serial", 1, replies)
    assert replies.most == 1


class OneCallAtATime(OpenAIChat):
    max_concurrency = 1  # as in-process llama.cpp declares


def test_a_model_that_serves_one_call_at_a_time_gets_one(
    settings: Settings, client: pgcite.Client,
) -> None:
    replies = InFlight(hold=2, wait_s=0.2)
    _ingest_through_server(settings, client, "ctx_llm_one_model", 6, replies, OneCallAtATime)
    assert replies.most == 1


def test_situating_keeps_order_and_counts_and_advances_on_the_callers_thread() -> None:
    """Replies come back out of order (the first chunks answer last); the sentences do not."""
    from pgcite.ingest._situate import situate_documents
    from pgcite.llm import LLMError

    class Reversed:
        name, timeout_s = "reversed", None

        def chat(self, system: str, user: str, *, max_tokens: int = 256) -> str:
            n = int(_chunk_of(user).split()[1].rstrip("."))
            time.sleep(0.02 * (8 - n))
            if n == 5:
                raise LLMError("situate: down")
            return f"About {n}."

    def doc(name: str, numbers: range) -> tuple[Document, list[ChunkDraft]]:
        unit = Unit(text=" ".join(f"Chunk {n}." for n in numbers))
        document = Document(document_id=name, source="s.jsonl", units=[unit])
        return document, [draft(f"Chunk {n}.", id=f"{name}-{n}", document_id=name)
                          for n in numbers]

    threads: list[str] = []
    out = situate_documents(Reversed(), [doc("a", range(0, 3)), doc("b", range(3, 8))],
                            count_tokens=lambda text: len(text.split()), timeout_s=5,
                            workers=3, advance=lambda: threads.append(
                                threading.current_thread().name))
    assert [[c.context for c in chunks] for chunks, _ in out] == [
        ["About 0.", "About 1.", "About 2."], ["About 3.", "About 4.", None, "About 6.", "About 7."]]
    assert [failed for _, failed in out] == [0, 1]
    assert threads == [threading.current_thread().name] * 8
