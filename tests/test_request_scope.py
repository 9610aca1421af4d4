"""One request resolves one snapshot and one set of models, and passes them down."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import pgcite
import pgcite._client
import pgcite.retrieve._pipeline as pipeline
from pgcite import lifecycle
from pgcite.config import Settings
from pgcite.service import ServiceConfig
from pgcite.service._state import ServiceState

FIXTURES = Path(__file__).parent / "fixtures"
DIARY = FIXTURES / "diary" / "entries.jsonl"
GUIDE = FIXTURES / "sources" / "guide.md"


@pytest.fixture()
def two_snapshots(client: pgcite.Client) -> Iterator[tuple[pgcite.Collection, int, int]]:
    """A collection whose active snapshot holds the diary, and an inactive newer one that also
    holds the guide."""
    col = client.create_collection("scope_two")
    first = col.ingest([DIARY])
    second = col.ingest([GUIDE], activate=False)
    assert first.snapshot_id is not None and second.snapshot_id is not None
    yield col, first.snapshot_id, second.snapshot_id
    client.drop_collection("scope_two")


def test_a_staged_search_reads_one_snapshot_during_an_activation(
        two_snapshots: tuple[pgcite.Collection, int, int],
        monkeypatch: pytest.MonkeyPatch) -> None:
    col, old, new = two_snapshots
    real_split = pipeline.split_heuristic

    def split_during_an_activation(query: str) -> list[str] | None:
        # Another process activates the new snapshot after the request began (between the
        # resolution of its embedder and its sub-searches).
        lifecycle.activate(col.client.collection(col.name), new)
        assert col.active_snapshot().snapshot_id == new
        return real_split("the fire and the plague") or ["the fire", "the plague"]

    monkeypatch.setattr(pipeline, "split_heuristic", split_during_an_activation)
    result = col.search("the fire and the plague", top_k=5,
                        stages={"route": False, "decompose": True})
    assert [e.stage for e in result.stages] == ["decompose"]
    assert result.snapshot_id == old  # every sub-search read the snapshot the request began on
    with col.client.connection() as conn:
        guide_chunks = {row[0] for row in conn.execute(
            "SELECT id FROM pgc_scope_two.chunks WHERE source LIKE %s", ("%guide.md",))}
    assert guide_chunks and not guide_chunks & {h.id for h in result.hits}


def test_total_time_covers_the_whole_search_when_boosting(diary: pgcite.Collection) -> None:
    result = diary.search("the fire began in the City", top_k=3, stages={"route": False, "boosts": [
        {"kind": "field", "field": "corpus", "equals": "B", "multiplier": 10}]})
    timings = result.timings_ms
    # total was measured from the start of the boost only: less than the database call before it
    assert timings["total"] >= timings["database"] + timings["boost"]


def test_the_service_builds_models_once_per_process(
        settings: Settings, diary: pgcite.Collection, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Settings] = []

    class Chat:
        name = "counted"
        timeout_s = 1.0
        closed = False

        def chat(self, system: str, user: str, *, max_tokens: int = 256) -> str:
            return "keyword"

        def close(self) -> None:
            self.closed = True

    def chat_model_from(s: Settings) -> Chat:
        built.append(s)
        return Chat()

    monkeypatch.setattr(pgcite._client, "chat_model_from", chat_model_from)
    base = pgcite.Client(settings)
    state = ServiceState(client=base, config=ServiceConfig(warm_up=False), owns_client=False)
    info = state.lookup(diary.name)
    models = set()
    for _ in range(3):  # three requests
        reader = state.reader(info)
        view = reader.view()
        models.add(id(view.models.chat))
        reader.search("the fire", top_k=1)
    assert len(built) == 1 and len(models) == 1
    chat = base.llm()
    base.close()  # and the client closes what it built
    assert isinstance(chat, Chat) and chat.closed


def test_an_async_client_of_a_stopped_loop_is_let_go(settings: Settings) -> None:
    """A test client serves requests from loops of its own: the async client made on a loop
    that has stopped stops its model threads when another loop asks, instead of leaving them
    behind."""
    base = pgcite.Client(settings)
    state = ServiceState(client=base, config=ServiceConfig(warm_up=False), owns_client=False)
    earlier, later = asyncio.new_event_loop(), asyncio.new_event_loop()
    first = earlier.run_until_complete(state.async_client())
    try:
        second = later.run_until_complete(state.async_client())
        assert second is not first
        with pytest.raises(RuntimeError, match="shutdown"):
            first.offload._pool.submit(lambda: None)
        assert later.run_until_complete(state.offload(lambda: 42)) == 42  # this one works
    finally:
        later.run_until_complete(state.close_async())  # the current one, on its loop
        later.close()
        earlier.run_until_complete(first.pool.close())  # only its own loop can close it
        earlier.close()
        base.close()


def test_a_bad_collection_name_is_refused_before_any_model_loads(
        client: pgcite.Client) -> None:
    # an unknown embedder would fail too, but only after (slowly) trying to load it
    with pytest.raises(pgcite.ConfigError, match="invalid collection name"):
        client.create_collection("Not A Name", embedder="no-such-model")


def test_the_old_search_keywords_are_gone(diary: pgcite.Collection) -> None:
    """cutoff=, fusion= ... went a release after filters= and options= came (with a warning
    meanwhile); a misspelt or removed keyword is a TypeError, as any unknown argument is."""
    for old in ({"cutoff": "1666-09-10"}, {"fusion": "rrf"}, {"fusoin": "rrf"}):
        with pytest.raises(TypeError, match=next(iter(old))):
            diary.search("fire", top_k=3, **old)  # type: ignore[arg-type]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the spelling that stays warns about nothing
        diary.search("fire", top_k=1, filters={"cutoff": "1666-09-10"}, options={"ef_search": 50})


def test_search_options_are_validated(diary: pgcite.Collection) -> None:
    with pytest.raises(pgcite.ConfigError, match="fusion"):
        diary.search("fire", options={"fusion": "borda"})
    with pytest.raises(pgcite.ConfigError, match="mode"):
        diary.search("fire", mode="semantic")  # type: ignore[arg-type]


@pytest.fixture()
def built_chats(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every OpenAI-compatible chat model constructed while the test runs."""
    from pgcite.llm import _http

    built: list[object] = []
    real_init = _http.OpenAIChat.__init__

    def counting_init(self: _http.OpenAIChat, *args: object, **kwargs: object) -> None:
        built.append(self)
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_http.OpenAIChat, "__init__", counting_init)
    return built


def test_ask_builds_one_chat_model(diary: pgcite.Collection, settings: Settings,
                                   built_chats: list[object]) -> None:
    from typer.testing import CliRunner

    from pgcite.cli import app
    from tests.llm_server import chat_completion, serve

    with serve(lambda _: (200, chat_completion("The fire [d-1666-09-02-a]."), 0.0)) as server:
        result = CliRunner().invoke(app, [
            "--data-dir", str(settings.data_dir), "ask", diary.name, "Where did the great fire begin?",
            "--generator", "openai", "--llm-base-url", server.base_url, "--llm-model", "m",
            "--grade", "--json"])
    assert result.exit_code == 0, result.output
    # generation, the stages and the self-checks' judge share one model
    assert len(built_chats) == 1 and server.requests


def test_a_bound_searcher_reads_its_view(two_snapshots: tuple[pgcite.Collection, int, int]) -> None:
    col, old, new = two_snapshots
    search = col.view().searcher(filters=pgcite.Filters(corpora=["A"]), options={"top_k": 3})
    lifecycle.activate(col.client.collection(col.name), new)
    first = search("the fire")
    assert first.snapshot_id == old and len(first.hits) <= 3
    assert {h.corpus for h in first.hits} <= {"A"}
    wider = search("the fire", top_k=5, filters=pgcite.Filters())
    assert wider.snapshot_id == old and len(wider.hits) == 5


def test_serve_builds_one_chat_model(settings: Settings, built_chats: list[object]) -> None:
    from pgcite.answer._llm import ChatGenerator, GeneratorConfig
    from pgcite.service import ServiceConfig, create_app

    config = ServiceConfig(warm_up=False, generator=GeneratorConfig(
        kind="openai", base_url="http://127.0.0.1:9/v1", model="m"))
    app = create_app(settings, config=config)
    state = app.state.pgcite
    # the answer generator, the stages and the self-checks' judge: one model, built once
    assert isinstance(state.generator, ChatGenerator)
    assert state.generator.chat is state.client.llm()
    assert len(built_chats) == 1
    state.client.close()
