"""``pgcite mcp`` over stdio: the SDK's transport, with one more answer.

A request line the SDK cannot read -- a lone surrogate escape such as ``"\\ud800"`` is valid JSON
to Python but not to the SDK's parser -- is dropped by it without a reply, and the client waits
for an answer forever (the reliability probe's MCP client did, 300 s a request). Here such a
request, if it still names its id, gets a JSON-RPC error saying what is wrong, as ``/mcp``
answers it with a 400; every other line goes to the SDK unchanged.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from io import TextIOWrapper
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from pgcite._inputs import excerpt, text_problem


class _Unowned(TextIOWrapper):
    """A text layer over stdin's buffer that never closes it (closing the wrapper at garbage
    collection would close sys.stdin's buffer with it)."""

    def close(self) -> None:
        with contextlib.suppress(ValueError):
            self.detach()


class _Lines:
    """stdin's lines for the SDK; an unreadable request among them is answered here."""

    def __init__(self, stdin: Any) -> None:
        self.stdin = stdin
        self.replies: MemoryObjectSendStream[SessionMessage] | None = None
        self.ready = anyio.Event()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self.stdin:
            error = unreadable(line)
            if error is None:
                yield line
                continue
            await self.ready.wait()  # the reply stream exists once the transport is up
            assert self.replies is not None
            await self.replies.send(SessionMessage(error))


def unreadable(line: str) -> types.JSONRPCError | None:
    """A JSON-RPC error for a request the SDK would drop unanswered; None for any other line
    (the SDK's to handle, as before)."""
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None
    except Exception as exc:  # the SDK's parser: pydantic's errors, jiter's
        try:
            data = json.loads(line)
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("id"), int | str):
            return None  # no id to answer to
        problem = next((p for p in map(text_problem, _strings(data)) if p), None)
        message = (f"invalid request: text {problem}" if problem else
                   f"invalid request: {excerpt(str(exc).splitlines()[0], 200)}")
        return types.JSONRPCError(jsonrpc="2.0", id=data["id"], error=types.ErrorData(
            code=types.INVALID_PARAMS, message=message))


def _strings(value: Any) -> list[str]:
    out, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend([*item.keys(), *item.values()])
        elif isinstance(item, list):
            stack.extend(item)
    return out


async def serve_stdio(server: MCPServer) -> None:
    """Serve ``server`` on this process's stdin and stdout."""
    lines = _Lines(anyio.wrap_file(_Unowned(sys.stdin.buffer, encoding="utf-8",
                                            errors="replace")))
    async with stdio_server(stdin=lines) as (read_stream, write_stream):  # type: ignore[arg-type]
        lines.replies = write_stream
        lines.ready.set()
        # _lowlevel_server: what MCPServer.run_stdio_async runs (mcp pinned in constraints.txt)
        lowlevel = server._lowlevel_server
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
