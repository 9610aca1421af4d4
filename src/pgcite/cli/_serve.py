"""`pgcite serve`: the HTTP service (OpenAPI docs at /docs)."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Annotated

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
from pgcite.cli._common import console, fail, settings, user_errors

if TYPE_CHECKING:
    from fastapi import FastAPI


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_command(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
    auth: Annotated[bool, typer.Option(
        help="Require API keys (`pgcite key create`). --no-auth is allowed on loopback only.")]
    = True,
    threshold: Annotated[float | None, typer.Option(
        help="Default abstention threshold (best cosine similarity).")] = None,
    generator: GeneratorOpt = "extractive",
    llm_base_url: BaseUrlOpt = None,
    llm_model: ModelOpt = None,
    llm_api_key: ApiKeyOpt = None,
    llm_timeout: TimeoutOpt = 30.0,
    llm_model_path: ModelPathOpt = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Serve search and grounded answers over HTTP, with API keys per collection."""
    import uvicorn

    from pgcite.service import ServiceConfig, create_app
    from pgcite.ui import mount_ui

    if not auth and not _loopback(host):
        raise fail(f"--no-auth would expose every collection on {host}",
                   hint="bind to 127.0.0.1, or keep auth on and create keys", code=2)
    with user_errors():
        config = ServiceConfig(
            auth=auth, threshold=threshold,
            generator=generator_config(generator, llm_base_url, llm_model, llm_api_key,
                                       llm_timeout, llm_model_path),
        )
        app = create_app(settings(), config=config)
        mcp = _mount_mcp(app)
        mount_ui(app)
    console.print(f"pgcite service on http://{host}:{port}  (docs: /docs, inspector: /ui, auth "
                  f"{'on' if auth else 'OFF'}, generator {generator}"
                  f"{', MCP: /mcp' if mcp else ''})")
    uvicorn.run(app, host=host, port=port, log_level=log_level)


def _mount_mcp(app: FastAPI) -> bool:
    """MCP (streamable HTTP) at /mcp when the mcp extra is installed."""
    try:
        from pgcite.mcp._http import mount_mcp
    except ImportError:
        return False
    mount_mcp(app)
    return True
