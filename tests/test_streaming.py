"""Streamed answers: text as the model writes it (against the scripted OpenAI-compatible
server in streaming mode), then the checked answer; a citation the guard drops is reported in
the final event, over the Python layer, HTTP (server-sent events) and `pgcite ask --stream`."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import pgcite
from pgcite._streaming import Delta, Final, sentences, stream_answer
from pgcite.answer._llm import GeneratorConfig, OpenAIChatGenerator
from pgcite.cli import app as cli_app
from pgcite.config import Settings
from pgcite.service import ServiceConfig, create_app
from pgcite.service._keys import create_key

from .llm_server import Reply, Served, chat_completion, chat_stream_events, serve

QUESTION = "Where did the great fire begin?"
_FIRST_ID = re.compile(r'<passage id="([^"]+)"')


def _first_id(request: Any) -> str:
    match = _FIRST_ID.search(request["messages"][1]["content"])
    assert match, "the prompt holds passages"
    return match[1]


def _script(request: Any) -> Reply:
    """Three pieces; the last cites a passage that was given and one that was not (the whole
    text at once when the request does not ask for a stream)."""
    pieces = ["The fire ", "began in Pudding Lane ", f"[{_first_id(request)}] [invented-id]."]
    if request.get("stream") is not True:
        return 200, chat_completion("".join(pieces)), 0.0
    return 200, chat_stream_events(pieces), 0.0


@pytest.fixture()
def llm() -> Iterator[Served]:
    with serve(_script) as served:
        yield served


def _generator(served: Served) -> OpenAIChatGenerator:
    return OpenAIChatGenerator(base_url=served.base_url, model="local", timeout_s=5)


def test_sentences_concatenate_back() -> None:
    text = "He went out. [a] Then home [b]. Was it late? Yes!"
    assert sentences(text) == ["He went out. [a] ", "Then home [b]. ", "Was it late? ", "Yes!"]
    assert "".join(sentences(text)) == text and sentences("") == []


def test_llm_answer_streams_and_reports_the_dropped_citation(
    diary: pgcite.Collection, llm: Served,
) -> None:
    events = list(stream_answer(diary, QUESTION, generator=_generator(llm)))
    deltas = [e.text for e in events if isinstance(e, Delta)]
    final = events[-1]
    assert isinstance(final, Final) and all(isinstance(e, Delta) for e in events[:-1])
    assert len(deltas) == 3 and "".join(deltas) == final.streamed_text
    assert final.removed_citations == ["invented-id"] and final.replaced
    answer = final.answer
    assert not answer.abstained and answer.generator == "openai"
    assert answer.citations and set(answer.citations) <= {s.id for s in answer.sources}
    assert "invented-id" not in answer.answer


def test_text_arrives_before_the_model_has_finished(diary: pgcite.Collection) -> None:
    """The server holds its last piece until the caller has seen the first one: only a stream
    that is really incremental can finish."""
    first_seen = threading.Event()

    def held(request: Any) -> Reply:
        passage = _first_id(request)

        def pieces() -> Iterator[bytes]:
            yield from list(chat_stream_events(["Pudding Lane "]))[:1]
            first_seen.wait(timeout=10)
            yield from chat_stream_events([f"[{passage}]."])
        return 200, pieces(), 0.0

    with serve(held) as served:
        events = stream_answer(diary, QUESTION, generator=_generator(served))
        first = next(events)
        assert isinstance(first, Delta) and first.text == "Pudding Lane "
        first_seen.set()
        final = list(events)[-1]
    assert isinstance(final, Final) and not final.replaced and final.answer.citations


def test_a_model_failing_mid_stream_is_replaced_and_said_so(diary: pgcite.Collection) -> None:
    def broken(request: Any) -> Reply:
        return 200, iter([*list(chat_stream_events(["Half a "]))[:1], b"data: {oops\n\n"]), 0.0

    with serve(broken) as served:
        events = list(stream_answer(diary, QUESTION, generator=_generator(served)))
    final = events[-1]
    assert isinstance(final, Final) and final.replaced and final.streamed_text == "Half a "
    assert [e.text for e in events if isinstance(e, Delta)][0] == "Half a "
    assert final.answer.generator == "extractive"
    assert any(t.step == "fallback" for t in final.answer.trace)


def test_a_server_that_ignores_stream_still_answers(diary: pgcite.Collection) -> None:
    def whole(request: Any) -> Reply:
        return 200, chat_completion(f"In Pudding Lane [{_first_id(request)}]."), 0.0

    with serve(whole) as served:
        events = list(stream_answer(diary, QUESTION, generator=_generator(served)))
    final = events[-1]
    assert isinstance(final, Final) and not final.replaced
    assert final.answer.generator == "openai" and final.streamed_text.startswith("In Pudding")


def test_extractive_answer_streams_its_sentences(diary: pgcite.Collection) -> None:
    events = list(stream_answer(diary, QUESTION))
    final = events[-1]
    assert isinstance(final, Final) and not final.answer.abstained
    deltas = [e.text for e in events if isinstance(e, Delta)]
    assert deltas and "".join(deltas) == final.streamed_text
    assert deltas == sentences(final.streamed_text)
    assert final.removed_citations == [] and final.answer.citations


def test_abstention_before_generation_streams_no_text(diary: pgcite.Collection) -> None:
    events = list(stream_answer(diary, QUESTION, filters={"cutoff": "1600-01-01"}))
    assert len(events) == 1 and isinstance(events[0], Final)
    assert events[0].answer.abstained and events[0].streamed_text == ""


def test_bad_filter_raises_before_any_event(diary: pgcite.Collection) -> None:
    with pytest.raises(pgcite.FilterError):
        next(stream_answer(diary, QUESTION, filters={"metadata": [{"key": "nope", "value": 1}]}))


# HTTP -----------------------------------------------------------------------------------------

def _sse(text: str) -> list[tuple[str, Any]]:
    out = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((fields["event"], json.loads(fields["data"])))
    return out


@pytest.fixture()
def api(client: pgcite.Client, diary: pgcite.Collection, llm: Served) -> Iterator[TestClient]:
    config = ServiceConfig(warm_up=False, generator=GeneratorConfig(
        kind="openai", base_url=llm.base_url, model="local", timeout_s=5))
    with TestClient(create_app(client=client, config=config)) as test_client:
        yield test_client


@pytest.fixture()
def reader(client: pgcite.Client, diary: pgcite.Collection) -> dict[str, str]:
    with client.db.transaction() as conn:
        return {"Authorization": f"Bearer {create_key(conn, diary.name, 'reader').token}"}


def test_http_answer_streams_server_sent_events(
    api: TestClient, reader: dict[str, str], diary: pgcite.Collection,
) -> None:
    url = f"/v1/collections/{diary.name}/answer"
    with api.stream("POST", url, headers=reader,
                    json={"question": QUESTION, "stream": True}) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = _sse(resp.read().decode())
    kinds = [kind for kind, _ in events]
    assert kinds == ["delta", "delta", "delta", "final"]
    final = events[-1][1]
    assert final["removedCitations"] == ["invented-id"] and final["replaced"] is True
    answer = final["answer"]
    assert set(answer["citations"]) <= {s["id"] for s in answer["sources"]}
    assert "invented-id" not in answer["answer"]
    # the streamed answer is counted like any other
    assert 'pgcite_answers_total{abstained="false",generator="openai"}' in api.get(
        "/metrics").text
    # the same request unstreamed: one JSON answer, the same checked text
    plain = api.post(url, headers=reader, json={"question": QUESTION}).json()
    assert plain["answer"] == answer["answer"] and plain["citations"] == answer["citations"]


def test_http_stream_bad_input_is_a_4xx(
    api: TestClient, reader: dict[str, str], diary: pgcite.Collection,
) -> None:
    url = f"/v1/collections/{diary.name}/answer"
    bad = api.post(url, headers=reader, json={
        "question": QUESTION, "stream": True,
        "filters": {"metadata": [{"key": "nope", "value": 1}]}})
    assert bad.status_code == 400 and "nope" in bad.json()["detail"]
    assert api.post(url, json={"question": QUESTION, "stream": True}).status_code == 401


# CLI ------------------------------------------------------------------------------------------

def test_cli_ask_stream_reports_the_removed_citation(
    settings: Settings, diary: pgcite.Collection, llm: Served, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PGCITE_DATA_DIR", str(settings.data_dir))
    monkeypatch.delenv("PGCITE_DATABASE_URL", raising=False)
    result = CliRunner().invoke(cli_app, [
        "ask", diary.name, QUESTION, "--stream", "--generator", "openai",
        "--llm-base-url", llm.base_url, "--llm-model", "local"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "The fire began in Pudding Lane" in out
    assert "removed [invented-id]" in out and "checked answer" in out
    checked = out.split("checked answer", 1)[1]
    assert "invented-id" not in checked.split("sources:")[0]

    lines = CliRunner().invoke(cli_app, [
        "ask", diary.name, QUESTION, "--stream", "--json"]).output.strip().splitlines()
    events = [json.loads(line) for line in lines]
    assert events[-1]["event"] == "final" and {e["event"] for e in events[:-1]} == {"delta"}
