"""The model clients: protocol shape (httpx.MockTransport) and real sockets on 127.0.0.1 (a
server that answers, one that hangs, one that returns garbage) with the extractive fallback."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

import pgcite
from pgcite.answer import (
    AnthropicGenerator,
    ContextPassage,
    GenerationRequest,
    GeneratorConfig,
    GeneratorError,
    OpenAIChatGenerator,
    make_generator,
)

REQUEST = GenerationRequest(
    question="Where did the great fire begin?", persona=None, abstention_text="No.",
    passages=[ContextPassage(id="d-1666-09-02-a", author="Samuel Pepys", date="1666-09-02",
                             text="The fire began in Pudding Lane.", rank=1)],
)


def test_openai_request_and_response_shape() -> None:
    seen: dict[str, Any] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["url"], seen["auth"] = str(request.url), request.headers.get("authorization")
        seen["body"] = json.loads(request.content)
        return httpx.Response(200, json={"choices": [{"message": {
            "role": "assistant", "content": "In Pudding Lane [d-1666-09-02-a]."}}]})

    gen = OpenAIChatGenerator(base_url="http://llm.test/v1/", model="m", api_key="k",
                              transport=httpx.MockTransport(handler))
    assert gen.generate(REQUEST) == "In Pudding Lane [d-1666-09-02-a]."
    assert seen["url"] == "http://llm.test/v1/chat/completions" and seen["auth"] == "Bearer k"
    system, user = seen["body"]["messages"]
    assert seen["body"]["model"] == "m" and system["role"] == "system"
    assert '<passage id="d-1666-09-02-a" author="Samuel Pepys" date="1666-09-02">' in \
        user["content"]
    assert "Where did the great fire begin?" in user["content"] and "[" in system["content"]


def test_anthropic_request_and_response_shape() -> None:
    seen: dict[str, Any] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["url"], seen["headers"] = str(request.url), request.headers
        seen["body"] = json.loads(request.content)
        return httpx.Response(200, json={"content": [
            {"type": "text", "text": "Pudding Lane "}, {"type": "text", "text": "[d-1666-09-02-a]"}]})

    gen = AnthropicGenerator(model="claude-x", api_key="secret", base_url="http://a.test",
                             transport=httpx.MockTransport(handler))
    assert gen.generate(REQUEST) == "Pudding Lane [d-1666-09-02-a]"
    assert seen["url"] == "http://a.test/v1/messages"
    assert seen["headers"]["x-api-key"] == "secret"
    assert seen["headers"]["anthropic-version"] == AnthropicGenerator.API_VERSION
    body = seen["body"]
    assert body["model"] == "claude-x" and body["max_tokens"] > 0 and "passage" in body["system"]
    assert body["messages"][0]["role"] == "user"


@pytest.mark.parametrize("response", [
    httpx.Response(200, text="<html>not json</html>"),
    httpx.Response(200, json={"choices": []}),
    httpx.Response(200, json={"choices": [{"message": {"content": 42}}]}),
    httpx.Response(500, text="boom"),
    httpx.Response(200, json=["a", "list"]),
])
def test_bad_responses_are_generator_errors(response: httpx.Response) -> None:
    for gen in (
        OpenAIChatGenerator(base_url="http://x.test", model="m",
                            transport=httpx.MockTransport(lambda r: response)),
        AnthropicGenerator(model="m", api_key=None, base_url="http://x.test",
                           transport=httpx.MockTransport(lambda r: response)),
    ):
        with pytest.raises(GeneratorError):
            gen.generate(REQUEST)


def test_config_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(GeneratorError, match="model name"):
        make_generator(GeneratorConfig(kind="openai"))
    # without llama-cpp-python installed (CI) the package is named; with it, the missing file
    missing = "llama-cpp-python" if importlib.util.find_spec("llama_cpp") is None else "m.gguf"
    with pytest.raises(GeneratorError, match=missing):
        make_generator(GeneratorConfig(kind="llama-cpp", model_path=tmp_path / "m.gguf"))
    assert make_generator(GeneratorConfig()) is None  # the pipeline builds its default answerer


# --- real sockets --------------------------------------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    mode = "ok"

    def log_message(self, *args: object) -> None:  # keep pytest output clean
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length))
        passage_id = body["messages"][1]["content"].split('id="')[1].split('"')[0]
        if self.server.mode == "hang":  # type: ignore[attr-defined]
            time.sleep(30)  # far past any timeout: a client that waited for it is unmistakable
        payload = (b"\x00garbage{{" if self.server.mode == "garbage"  # type: ignore[attr-defined]
                   else json.dumps({"choices": [{"message": {
                       "content": f"From the model [{passage_id}] and [invented-id]."}}]}).encode())
        try:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up first: that is what the hang test wants


@pytest.fixture
def llm_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _generator(server: ThreadingHTTPServer, mode: str) -> OpenAIChatGenerator:
    server.mode = mode  # type: ignore[attr-defined]
    host, port = server.server_address[:2]
    return OpenAIChatGenerator(base_url=f"http://{host!s}:{port}/v1", model="local",
                               timeout_s=0.5)


def test_local_server_answer_is_checked(diary: pgcite.Collection,
                                        llm_server: ThreadingHTTPServer) -> None:
    answer = diary.answer("Where did the great fire begin?", generator=_generator(llm_server, "ok"))
    assert answer.generator == "openai" and not answer.abstained
    assert answer.citations == [answer.sources[0].id] and "invented-id" not in answer.answer
    assert any(e.step == "citations" for e in answer.trace)


@pytest.mark.parametrize("mode", ["hang", "garbage"])
def test_failing_server_falls_back_to_extractive(diary: pgcite.Collection,
                                                 llm_server: ThreadingHTTPServer,
                                                 mode: str) -> None:
    started = time.monotonic()
    diary.answer("Where did the great fire begin?")  # the same work without the endpoint, on this load
    plain = time.monotonic() - started
    started = time.monotonic()
    answer = diary.answer("Where did the great fire begin?", generator=_generator(llm_server, mode))
    # the 0.5 s timeout held: far below the 30 s hang, whatever the machine's load
    assert time.monotonic() - started < 0.5 + 3 * plain + 2.0
    assert answer.generator == "extractive" and not answer.abstained and answer.citations
    fallback = [e for e in answer.trace if e.step == "fallback"]
    assert fallback and "openai failed" in fallback[0].detail
    assert ("no answer within 0.5 s" if mode == "hang" else "not JSON") in fallback[0].detail
