"""`pgcite mcp`: the MCP server over stdio, for agents (Claude Desktop, IDEs, any MCP client)."""

from __future__ import annotations

from typing import Annotated

import typer

from pgcite.cli._ask import (
    ApiKeyOpt,
    BaseUrlOpt,
    GeneratorOpt,
    ModelOpt,
    ModelPathOpt,
    TimeoutOpt,
    generator_config,
)
from pgcite.cli._common import fail, settings, user_errors


def mcp_command(
    key: Annotated[str | None, typer.Option(
        envvar="PGCITE_MCP_KEY", help="An API key (`pgcite key create`): serve only its "
        "collection. Default: every collection in the database.")] = None,
    generator: GeneratorOpt = "extractive",
    llm_base_url: BaseUrlOpt = None,
    llm_model: ModelOpt = None,
    llm_api_key: ApiKeyOpt = None,
    llm_timeout: TimeoutOpt = 30.0,
    llm_model_path: ModelPathOpt = None,
) -> None:
    """Serve the collections to an MCP client over stdio (tools: list_collections, search,
    answer, get_passage). Needs the optional mcp package (the mcp extra)."""
    try:
        from pgcite.mcp import build_server, open_access
    except ImportError:
        raise fail("the MCP server needs the mcp package",
                   hint="pip install 'pgcite[mcp]'", code=2) from None
    from pgcite import Client
    from pgcite.answer import make_generator

    with user_errors():
        config = generator_config(generator, llm_base_url, llm_model, llm_api_key, llm_timeout,
                                  llm_model_path)
        client = Client(settings())
        access = open_access(client, key)
        server = build_server(lambda ctx: access, generator=make_generator(config))
    import anyio

    from pgcite.mcp import serve_stdio

    try:
        # stdout carries the protocol: nothing else may print to it
        anyio.run(serve_stdio, server)
    finally:
        client.close()
