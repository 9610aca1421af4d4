"""`pgcite serve`'s connections are bounded in time (service/_connections.py): a request head
that never completes (slowloris) and a body that stops arriving are cut with a 408, while a
slow route -- the service's own time -- is never cut. A real uvicorn server on loopback."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlparse

import httpx
import pytest
from fastapi import FastAPI, Request

import pgcite
from pgcite.service._connections import BoundedH11Protocol
from tests.live_server import live_server


class _Quick(BoundedH11Protocol):
    header_timeout_s = 1.0
    idle_timeout_s = 1.0


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    app = FastAPI()

    @app.get("/ok")
    def ok() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/slow")
    async def slow() -> dict[str, str]:
        await asyncio.sleep(2.5)  # longer than both bounds: the service's time, not the client's
        return {"status": "slow"}

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, int]:
        return {"bytes": len(await request.body())}

    with live_server(app, http=_Quick) as url:
        yield url


def _connect(url: str) -> socket.socket:
    where = urlparse(url)
    sock = socket.create_connection((where.hostname, where.port), timeout=10)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_a_trickled_request_head_is_cut(base_url: str) -> None:
    with _connect(base_url) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        try:
            for _ in range(20):  # a byte every 0.3 s would hold it forever without the bound
                sock.sendall(b"a")
                time.sleep(0.3)
        except OSError:
            pass  # closed under us: what we want
        reply = _read_all(sock)
        took = time.monotonic() - started
    assert reply.startswith(b"HTTP/1.1 408"), reply
    assert took < 5.0, took


def test_a_body_that_stops_is_cut(base_url: str, path: str = "/echo") -> None:
    with _connect(base_url) as sock:
        started = time.monotonic()
        sock.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"q")
        reply = _read_all(sock)
        took = time.monotonic() - started
    assert reply.startswith(b"HTTP/1.1 408"), reply
    assert 0.9 < took < 5.0, took


def test_a_silent_open_connection_is_cut(base_url: str) -> None:
    with _connect(base_url) as sock:
        started = time.monotonic()
        reply = _read_all(sock)  # sends nothing at all
        assert reply.startswith(b"HTTP/1.1 408") and time.monotonic() - started < 5.0


def test_slow_routes_and_kept_alive_connections_still_work(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=10) as http:
        assert http.get("/slow").json() == {"status": "slow"}  # 2.5 s > both bounds
        for _ in range(3):  # one kept-alive connection, request after request
            assert http.get("/ok").status_code == 200
        assert http.post("/echo", content=b"x" * 300_000).json() == {"bytes": 300_000}


def test_pgcite_serve_bounds_its_connections(client: pgcite.Client) -> None:
    """The real command: `pgcite serve --header-timeout 1 --idle-timeout 1` (its own process)."""
    import subprocess
    import sys

    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", "from pgcite.cli import main; main()", "--database-url",
         client.db.url, "serve", "--no-auth", "--port", str(port), "--header-timeout", "1",
         "--idle-timeout", "1", "--log-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.3)
        test_a_trickled_request_head_is_cut(base)
        test_a_body_that_stops_is_cut(base, "/v1/collections/diary_fixture/search")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
