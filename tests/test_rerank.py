"""The rerankers: a tiny real cross-encoder built on disk, the HTTP servers' protocols
(httpx.MockTransport) plus real sockets for timeouts, the LLM answer parser, and
``rerank_hits`` ordering."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from pgcite._errors import ConfigError
from pgcite.llm._types import ChatModel, LLMError
from pgcite.retrieve._hits import Hit
from pgcite.retrieve._rerank import (
    CrossEncoderReranker,
    HttpReranker,
    LLMReranker,
    Reranker,
    RerankerConfig,
    RerankError,
    make_reranker,
    parse_llm_scores,
    rerank_hits,
)

QUERY = "where did the great fire of london start"
PASSAGES = ["the fire began in pudding lane", "a ship sailed to the king", "plague in london"]

# --- a tiny cross-encoder ------------------------------------------------------------------------

TEXTS = [QUERY, *PASSAGES]  # every text the tiny model scores
WORDS = sorted({word for text in TEXTS for word in text.split()})


def _build_tiny_model(folder: Path, num_labels: int) -> Path:
    """A 1-layer BERT with random weights (seeded) and a WordPiece tokenizer whose vocabulary
    is the test texts' words: loads in well under a second, no download."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    # Positional: transformers 4 names it vocab_file, 5 names it vocab (as a keyword, 5
    # ignores vocab_file and builds an empty vocabulary: every token became [UNK]).
    tokenizer = BertTokenizerFast(str(vocab))
    torch.manual_seed(0)
    # initializer_range 0.5: the default 0.02 makes every score ~0.5, hiding order mistakes.
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32, num_labels=num_labels,
                        max_position_embeddings=64, initializer_range=0.5)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cross-encoder with one output label, as rerankers have."""
    return _build_tiny_model(tmp_path_factory.mktemp("tiny-cross-encoder"), num_labels=1)


def test_tiny_tokenizer_knows_every_word(tiny_model: Path) -> None:
    """As the cross-encoder loads it: each word of the test texts is its own token, none is
    [UNK] (else the cross-encoder tests would only ever score [UNK] input)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))
    assert tokenizer.vocab_size == 5 + len(WORDS)
    for text in TEXTS:
        assert tokenizer.tokenize(text) == text.split()
        ids = tokenizer(QUERY, text)["input_ids"]
        assert tokenizer.unk_token_id not in ids


def test_cross_encoder_refuses_a_classifier(tmp_path: Path) -> None:
    """Three labels (an NLI-style classifier) give three scores per pair: not a reranker."""
    reranker = CrossEncoderReranker(_build_tiny_model(tmp_path, num_labels=3), max_length=64)
    with pytest.raises(RerankError, match="3 scores per pair"):
        reranker.score(QUERY, PASSAGES)


def test_cross_encoder_scores_match_sentence_transformers(tiny_model: Path) -> None:
    from sentence_transformers import CrossEncoder

    reranker = CrossEncoderReranker(tiny_model, max_length=64)
    first = reranker.score(QUERY, PASSAGES)
    assert isinstance(reranker, Reranker) and reranker.name == f"cross-encoder:{tiny_model.name}"
    assert len(first) == len(PASSAGES)
    assert all(type(s) is float and math.isfinite(s) for s in first)
    assert reranker.score(QUERY, PASSAGES) == first  # deterministic (eval mode, no dropout)
    direct = CrossEncoder(str(tiny_model), max_length=64).predict([(QUERY, p) for p in PASSAGES])
    assert first == pytest.approx([float(x) for x in direct], abs=1e-6)
    assert len(set(first)) == len(first), "scores should differ, or the order checks are moot"
    assert reranker.score(QUERY, []) == []


def test_cross_encoder_order_is_per_passage(tiny_model: Path) -> None:
    """Reversing the passages reverses the scores: each score belongs to its passage."""
    reranker = CrossEncoderReranker(tiny_model, max_length=64)
    assert reranker.score(QUERY, PASSAGES[::-1]) == pytest.approx(
        reranker.score(QUERY, PASSAGES)[::-1], abs=1e-6)


def test_cross_encoder_loads_once_across_threads(tiny_model: Path) -> None:
    reranker = CrossEncoderReranker(tiny_model, max_length=64)
    results: list[list[float]] = []
    threads = [threading.Thread(target=lambda: results.append(reranker.score(QUERY, PASSAGES)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(r == pytest.approx(results[0]) for r in results)
    model = reranker._model
    reranker.score(QUERY, PASSAGES)
    assert reranker._model is model


def test_cross_encoder_missing_folder(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(RerankError) as info:
        CrossEncoderReranker(missing)
    assert str(missing) in info.value.message
    assert info.value.hint and "cross-encoder/ms-marco-MiniLM-L-6-v2" in info.value.hint


def test_cross_encoder_folder_without_config(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(RerankError, match="config.json") as info:
        CrossEncoderReranker(tmp_path)
    assert str(tmp_path) in info.value.message


def test_cross_encoder_broken_weights_fail_on_first_score(tmp_path: Path) -> None:
    """A folder that passes the cheap check but cannot load: RerankError, not an OSError."""
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    reranker = CrossEncoderReranker(tmp_path)  # lazy: nothing loaded yet
    with pytest.raises(RerankError, match="cannot load") as info:
        reranker.score(QUERY, PASSAGES)
    assert str(tmp_path) in info.value.message


# --- HTTP servers -------------------------------------------------------------------------------

Handler = Callable[[httpx.Request], httpx.Response]


def _http(api: str, handler: Handler, **kwargs: Any) -> HttpReranker:
    kwargs.setdefault("model", "m" if api == "cohere" else None)
    return HttpReranker("http://rr.test/base/", api=api,  # type: ignore[arg-type]
                        transport=httpx.MockTransport(handler), **kwargs)


def test_tei_request_and_order() -> None:
    seen: dict[str, Any] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["url"], seen["auth"] = str(request.url), request.headers.get("authorization")
        seen["body"] = json.loads(request.content)
        # TEI answers best first: the reranker must map them back to input order.
        return httpx.Response(200, json=[{"index": 2, "score": 0.9}, {"index": 0, "score": 0.5},
                                         {"index": 1, "score": 0.1}])

    reranker = _http("tei", handler)
    assert reranker.score(QUERY, PASSAGES) == [0.5, 0.1, 0.9]
    assert seen["url"] == "http://rr.test/base/rerank" and seen["auth"] is None
    assert seen["body"] == {"query": QUERY, "texts": PASSAGES, "raw_scores": False,
                            "truncate": True}
    assert isinstance(reranker, Reranker)


def test_cohere_request_and_order() -> None:
    seen: dict[str, Any] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["url"], seen["auth"] = str(request.url), request.headers.get("authorization")
        seen["body"] = json.loads(request.content)
        return httpx.Response(200, json={"id": "x", "results": [
            {"index": 1, "relevance_score": 0.8}, {"index": 2, "relevance_score": 0.3},
            {"index": 0, "relevance_score": 0.05}]})

    reranker = _http("cohere", handler, model="rerank-v3.5", api_key="sekrit")
    assert reranker.score(QUERY, PASSAGES) == [0.05, 0.8, 0.3]
    assert seen["url"] == "http://rr.test/base/v2/rerank" and seen["auth"] == "Bearer sekrit"
    assert seen["body"] == {"model": "rerank-v3.5", "query": QUERY, "documents": PASSAGES,
                            "top_n": 3}
    assert reranker.name == "cohere:rerank-v3.5"


def test_empty_passages_make_no_request() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no request expected")

    assert _http("tei", handler).score(QUERY, []) == []


TEI_BAD: dict[str, tuple[Any, str]] = {
    "object, not list": ({"results": []}, "shape"),
    "row not object": ([1, 2, 3], "shape"),
    "index out of range": ([{"index": 3, "score": 1}, {"index": 0, "score": 1},
                            {"index": 1, "score": 1}], "out of range"),
    "negative index": ([{"index": -1, "score": 1}], "out of range"),
    "index not int": ([{"index": "0", "score": 1}], "out of range"),
    "index bool": ([{"index": True, "score": 1}], "out of range"),
    "missing index": ([{"index": 0, "score": 1}, {"index": 2, "score": 1}], r"indexes \[1\]"),
    "duplicate index": ([{"index": 0, "score": 1}, {"index": 0, "score": 2},
                         {"index": 1, "score": 1}], "twice"),
    "score text": ([{"index": 0, "score": "high"}], "numeric"),
    "score missing": ([{"index": 0}], "numeric"),
    "score null": ([{"index": 0, "score": None}], "numeric"),
    "score bool": ([{"index": 0, "score": True}], "numeric"),
    "empty list": ([], r"indexes \[0, 1, 2\]"),
}


@pytest.mark.parametrize("case", sorted(TEI_BAD))
def test_tei_malformed_responses(case: str) -> None:
    body, message = TEI_BAD[case]
    reranker = _http("tei", lambda r: httpx.Response(200, json=body))
    with pytest.raises(RerankError, match=message):
        reranker.score(QUERY, PASSAGES)


COHERE_BAD: dict[str, tuple[Any, str]] = {
    "bare list": ([{"index": 0, "relevance_score": 1}], "shape"),
    "no results": ({"data": []}, "shape"),
    "tei-style score key": ({"results": [{"index": i, "score": 1} for i in range(3)]},
                            "numeric relevance_score"),
    "missing index": ({"results": [{"index": 0, "relevance_score": 1}]}, r"indexes \[1, 2\]"),
}


@pytest.mark.parametrize("case", sorted(COHERE_BAD))
def test_cohere_malformed_responses(case: str) -> None:
    body, message = COHERE_BAD[case]
    reranker = _http("cohere", lambda r: httpx.Response(200, json=body))
    with pytest.raises(RerankError, match=message):
        reranker.score(QUERY, PASSAGES)


@pytest.mark.parametrize(("response", "message"), [
    (httpx.Response(200, content=b"<html>oops</html>"), "not JSON"),
    (httpx.Response(200, content=b"[{\"index\": 0, \"score\": NaN}]"), "numeric"),
    (httpx.Response(503, content=b"model loading"), "HTTP 503: model loading"),
    (httpx.Response(401, json={"message": "bad key"}), "HTTP 401"),
    (httpx.Response(200, content=b"[" + b" " * (1 << 20) + b"]"), "larger than 1 MiB"),
])
def test_http_errors(response: httpx.Response, message: str) -> None:
    reranker = _http("tei", lambda r: response)
    with pytest.raises(RerankError, match=message):
        reranker.score(QUERY, PASSAGES)


def test_connection_refused() -> None:
    reranker = HttpReranker("http://127.0.0.1:9", api="tei", timeout_s=2)
    with pytest.raises(RerankError, match="ConnectError") as info:
        reranker.score(QUERY, PASSAGES)
    assert info.value.hint and "127.0.0.1:9" in info.value.hint


def test_constructor_checks() -> None:
    with pytest.raises(RerankError, match="http"):
        HttpReranker("rr.test", api="tei")
    with pytest.raises(RerankError, match="model name"):
        HttpReranker("http://rr.test", api="cohere")


class _SlowHandler(BaseHTTPRequestHandler):
    """Waits ``server.delay`` seconds before answering, or trickles a byte every 0.1 s."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers["Content-Length"]))
        mode: str = self.server.mode  # type: ignore[attr-defined]
        if mode == "hang":
            time.sleep(3)
        body = json.dumps([{"index": i, "score": 1.0} for i in range(3)]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            for byte in body:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                if mode == "trickle":
                    time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up, as it should

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def slow_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("mode", ["hang", "trickle"])
def test_real_timeout(slow_server: ThreadingHTTPServer, mode: str) -> None:
    """A server that never answers, and one that answers a byte at a time (each read is fast,
    the whole is not): both cut off at the deadline."""
    slow_server.mode = mode  # type: ignore[attr-defined]
    host, port = slow_server.server_address[:2]
    reranker = HttpReranker(f"http://{host!s}:{port}", api="tei", timeout_s=0.5)
    start = time.monotonic()
    with pytest.raises(RerankError, match="no answer within 0.5 s"):
        reranker.score(QUERY, PASSAGES)
    assert time.monotonic() - start < 0.5 + 1


def test_real_server_answers(slow_server: ThreadingHTTPServer) -> None:
    slow_server.mode = "fast"  # type: ignore[attr-defined]
    host, port = slow_server.server_address[:2]
    assert HttpReranker(f"http://{host!s}:{port}", api="tei").score(QUERY, PASSAGES) == [1.0] * 3


# --- LLM ----------------------------------------------------------------------------------------


class FakeChat:
    """A ChatModel that returns a canned reply (or raises) and records each call."""

    name = "fake"
    timeout_s: float | None = 1.0

    def __init__(self, reply: str | LLMError) -> None:
        self.reply = reply
        self.calls: list[tuple[str, str, int]] = []

    def chat(self, system: str, user: str, *, max_tokens: int = 256) -> str:
        self.calls.append((system, user, max_tokens))
        if isinstance(self.reply, LLMError):
            raise self.reply
        return self.reply


@pytest.mark.parametrize(("reply", "expected"), [
    ("1: 7\n2: 3\n3: 10", [7.0, 3.0, 10.0]),
    ("[1] 7\n[2] 3\n[3] 0", [7.0, 3.0, 0.0]),
    ("1 - 7/10\n2 - 3/10\n3 - 5/10", [7.0, 3.0, 5.0]),
    ('{"1": 7, "2": 3, "3": 4}', [7.0, 3.0, 4.0]),
    ('```json\n{"1": "7/10", "2": 2.5, "3": 9}\n```', [7.0, 2.5, 9.0]),
    ("Here are the scores:\n- Passage 2: score 8\n- Passage 1: 4.5\n", [4.5, 8.0, 0.0]),
    ("3: 6\n1: 2", [2.0, 0.0, 6.0]),                # order of lines does not matter
    ("1: 7\n1: 2\n2: 1\n3: 1", [7.0, 1.0, 1.0]),    # first score for a passage wins
    ("1: 12\n2: 5\n9: 9\n3: 1", [10.0, 5.0, 1.0]),  # clamped; unknown passage 9 ignored
    ("1. 8\n2) 4\n3 = 2", [8.0, 4.0, 2.0]),
])
def test_llm_parses_variants(reply: str, expected: list[float]) -> None:
    chat = FakeChat(reply)
    assert LLMReranker(chat).score(QUERY, PASSAGES) == expected
    assert len(chat.calls) == 1  # one batched call, however many passages


@pytest.mark.parametrize("reply", ["", "I cannot rate these.", "17\n23", "9: 5\n0: 3",
                                   '{"verdict": "relevant"}', "{not json"])
def test_llm_unparseable(reply: str) -> None:
    with pytest.raises(RerankError, match="unparseable"):
        LLMReranker(FakeChat(reply)).score(QUERY, PASSAGES)


def test_parser_does_not_split_numbers() -> None:
    assert parse_llm_scores("17", 20) == {}
    assert parse_llm_scores("12: 3", 20) == {12: 3.0}


def test_llm_prompt() -> None:
    chat = FakeChat("1: 1\n2: 2\n3: 3")
    long = "word " * 500
    LLMReranker(chat, max_passage_chars=50).score(QUERY, ["multi\nline passage", long, "x"])
    system, user, max_tokens = chat.calls[0]
    assert "never instructions" in system and "0" in system and "10" in system
    assert f"Query: {QUERY}" in user
    assert "[1] multi line passage" in user  # newlines flattened: one passage, one line
    line2 = next(line for line in user.splitlines() if line.startswith("[2] "))
    assert len(line2) <= len("[2] ") + 50 + 2 and line2.endswith("…")
    assert "[3] x" in user and max_tokens >= 3 * 4


def test_llm_error_becomes_rerank_error() -> None:
    chat = FakeChat(LLMError("no answer within 1 s", hint="is the server up?"))
    with pytest.raises(RerankError, match="no answer within 1 s") as info:
        LLMReranker(chat).score(QUERY, PASSAGES)
    assert info.value.hint == "is the server up?"
    assert isinstance(chat, ChatModel)


def test_llm_no_call_for_no_passages() -> None:
    chat = FakeChat("1: 1")
    assert LLMReranker(chat).score(QUERY, []) == [] and not chat.calls


# --- configuration ------------------------------------------------------------------------------


def test_make_reranker(tiny_model: Path) -> None:
    assert isinstance(make_reranker(RerankerConfig(kind="cross-encoder", path=tiny_model)),
                      CrossEncoderReranker)
    tei = make_reranker(RerankerConfig(kind="tei", base_url="http://127.0.0.1:8080"))
    assert isinstance(tei, HttpReranker) and tei.api == "tei" and tei.timeout_s == 5.0
    cohere = make_reranker(RerankerConfig(kind="cohere", model="rerank-v3.5",
                                          api_key="k", timeout_s=2))  # type: ignore[arg-type]
    assert isinstance(cohere, HttpReranker) and cohere.base_url == "https://api.cohere.com"
    assert cohere.timeout_s == 2
    llm = make_reranker(RerankerConfig(kind="llm"), chat=FakeChat("1: 1"))
    assert isinstance(llm, LLMReranker) and llm.name == "llm:fake"


@pytest.mark.parametrize(("config", "message"), [
    (RerankerConfig(kind="cross-encoder"), "model folder"),
    (RerankerConfig(kind="tei"), "base URL"),
    (RerankerConfig(kind="cohere"), "model name"),
    (RerankerConfig(kind="llm"), "needs an LLM"),
])
def test_make_reranker_missing_options(config: RerankerConfig, message: str) -> None:
    with pytest.raises(RerankError, match=message) as info:
        make_reranker(config)
    if config.kind == "llm":
        assert info.value.hint and "PGCITE_LLM_BASE_URL" in info.value.hint


def test_config_forbids_unknown_options() -> None:
    with pytest.raises(ValueError, match="extra"):
        RerankerConfig(kind="tei", url="http://x")  # type: ignore[call-arg]
    with pytest.raises(ValueError):
        RerankerConfig(kind="bm25")  # type: ignore[arg-type]
    secret = RerankerConfig(kind="cohere", model="m", api_key="sekrit")  # type: ignore[arg-type]
    assert "sekrit" not in repr(secret)


# --- rerank_hits --------------------------------------------------------------------------------


def _hit(n: int, body: str, title: str | None = None) -> Hit:
    return Hit(id=f"h{n}", document_id="d", citation=f"c{n}", author=None, corpus=None,
               date_start=None, date_end=None, source=None, locator=None, title=title, body=body,
               score=1.0 / n, rank=n, keyword_rank=n)


class TableReranker:
    """Scores each passage from a fixed table, and records what it was given."""

    name = "table"

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table
        self.seen: list[str] = []

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.seen = list(passages)
        return [self.table[p] for p in passages]


def test_rerank_hits_orders_and_renumbers() -> None:
    hits = [_hit(1, "a"), _hit(2, "b", title="T"), _hit(3, "c"), _hit(4, "d")]
    reranker = TableReranker({"a": 0.1, "T\nb": 0.9, "c": 0.5, "d": -2.0})
    out = rerank_hits(reranker, QUERY, hits, top_k=3)
    assert reranker.seen == ["a", "T\nb", "c", "d"]  # title prefixed when present
    assert [h.id for h in out] == ["h2", "h3", "h1"]
    assert [h.rank for h in out] == [1, 2, 3] and [h.score for h in out] == [0.9, 0.5, 0.1]
    assert out[0].keyword_rank == 2 and out[0].title == "T"  # other fields kept
    assert hits[1].rank == 2 and hits[1].score == 0.5  # inputs untouched (frozen copies)


def test_rerank_hits_ties_keep_fused_order() -> None:
    hits = [_hit(n, f"p{n}") for n in range(1, 7)]
    reranker = TableReranker({"p1": 1.0, "p2": 3.0, "p3": 1.0, "p4": 3.0, "p5": 1.0, "p6": 3.0})
    out = rerank_hits(reranker, QUERY, hits, top_k=10)
    assert [h.id for h in out] == ["h2", "h4", "h6", "h1", "h3", "h5"]
    assert [h.rank for h in out] == [1, 2, 3, 4, 5, 6]


def test_rerank_hits_edges() -> None:
    reranker = TableReranker({"a": 1.0})
    assert rerank_hits(reranker, QUERY, [], top_k=5) == []
    with pytest.raises(ConfigError):
        rerank_hits(reranker, QUERY, [_hit(1, "a")], top_k=0)

    class Short:
        name = "short"

        def score(self, query: str, passages: Sequence[str]) -> list[float]:
            return [1.0]

    with pytest.raises(RerankError, match="1 scores for 2"):
        rerank_hits(Short(), QUERY, [_hit(1, "a"), _hit(2, "b")], top_k=2)


def test_rerank_hits_with_tiny_model(tiny_model: Path) -> None:
    """End to end with the real cross-encoder: the order follows its scores."""
    reranker = CrossEncoderReranker(tiny_model, max_length=64)
    hits = [_hit(n, body) for n, body in enumerate(PASSAGES, start=1)]
    scores = reranker.score(QUERY, PASSAGES)
    out = rerank_hits(reranker, QUERY, hits, top_k=2)
    best = sorted(range(3), key=lambda i: -scores[i])[:2]
    assert [h.body for h in out] == [PASSAGES[i] for i in best]
    assert [h.score for h in out] == pytest.approx([scores[i] for i in best])


@pytest.mark.parametrize("echo", ["1. 6th. Up and to my office", "3. 4 ships were lost",
                                  "2: 5 of the passages mention it"])
def test_echoed_passage_text_is_not_a_score(echo: str) -> None:
    assert parse_llm_scores(echo, 5) == {}
