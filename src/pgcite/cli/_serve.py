"""`pgcite serve`: the HTTP service (OpenAPI docs at /docs)."""

from __future__ import annotations

import ipaddress
import json
import os
from typing import TYPE_CHECKING, Annotated, Any

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

    from pgcite.service import ServiceConfig

# How `serve --workers N` hands its options to the worker processes (each imports the app
# factory afresh): the service config as JSON; settings travel as PGCITE_* variables.
_WORKER_CONFIG = "PGCITE_SERVE_CONFIG"
_WORKER_START_S = 180


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
        help="Default abstention threshold (best cosine similarity); given, it replaces the "
        "answerability model for every answer.")] = None,
    generator: GeneratorOpt = "extractive",
    llm_base_url: BaseUrlOpt = None,
    llm_model: ModelOpt = None,
    llm_api_key: ApiKeyOpt = None,
    llm_timeout: TimeoutOpt = 30.0,
    llm_model_path: ModelPathOpt = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    workers: Annotated[int, typer.Option(
        min=1, max=64, help="Worker processes, each with its own pool and models (the "
        "embedder loaded once per worker), sharing nothing but the database.")] = 1,
    header_timeout: Annotated[float, typer.Option(
        min=0.1, help="Seconds a connection has to send a whole request head (slowloris); "
        "then 408 and closed.")] = 10.0,
    idle_timeout: Annotated[float, typer.Option(
        min=0.1, help="Seconds a request body may send nothing; then 408 and closed.")] = 30.0,
    upload_budget: Annotated[float, typer.Option(
        min=0.1, help="Seconds of work (reading, OCR, embedding) one upload may cost; past "
        "it nothing is stored and the upload is a 413.")] = 300.0,
) -> None:
    """Serve search and grounded answers over HTTP, with API keys per collection."""
    import uvicorn

    from pgcite.service import ServiceConfig, configure, create_app
    from pgcite.ui import mount_ui

    if not auth and not _loopback(host):
        raise fail(f"--no-auth would expose every collection on {host}",
                   hint="bind to 127.0.0.1, or keep auth on and create keys", code=2)
    with user_errors():
        config = ServiceConfig(
            auth=auth, threshold=threshold, header_timeout_s=header_timeout,
            idle_timeout_s=idle_timeout, upload_budget_s=upload_budget,
            generator=generator_config(generator, llm_base_url, llm_model, llm_api_key,
                                       llm_timeout, llm_model_path),
        )
        if workers > 1:
            _serve_workers(config, host=host, port=port, workers=workers, log_level=log_level,
                           generator=generator)
            return
        app = create_app(settings(), config=config)
        mcp = _mount_mcp(app)
        mount_ui(app)
    console.print(f"pgcite service on http://{host}:{port}  (docs: /docs, inspector: /ui, "
                  f"exhibits: /exhibit/NAME, auth "
                  f"{'on' if auth else 'OFF'}, generator {generator}"
                  f"{', MCP: /mcp' if mcp else ''})")
    # configure: request heads and bodies bounded in time (service/_connections.py)
    uvicorn.run(app, host=host, port=port, log_level=log_level, http=configure(config))


def _serve_workers(config: ServiceConfig, *, host: str, port: int, workers: int,
                   log_level: str, generator: str) -> None:
    """uvicorn's process manager: ``workers`` processes share the listening socket; each
    builds its app with :func:`worker_app`. SIGINT/SIGTERM stop them gracefully (in-flight
    requests finish, each closes its pool); a worker that dies is replaced."""
    import uvicorn

    from pgcite.service import BoundedH11Protocol
    from pgcite.store import Database, prune_handles

    current = settings()
    # Here, once: the server started (embedded: this process holds it up while workers come
    # and go), migrated, reachable -- a bad URL is said once, not by every worker.
    Database.open(current)
    os.environ[_WORKER_CONFIG] = json.dumps(_config_json(config))
    os.environ["PGCITE_DATA_DIR"] = str(current.data_dir)
    if current.database_url is not None:
        os.environ["PGCITE_DATABASE_URL"] = current.database_url
    console.print(f"pgcite service on http://{host}:{port} with {workers} workers (docs: /docs, "
                  f"auth {'on' if config.auth else 'OFF'}, generator {generator})")
    try:
        # A worker answers uvicorn's health pings only once its app is built (models loaded):
        # on a busy machine that is well past uvicorn's 5 s, which would kill and respawn it.
        uvicorn.run("pgcite.cli._serve:worker_app", factory=True, host=host, port=port,
                    workers=workers, log_level=log_level, timeout_graceful_shutdown=30,
                    timeout_worker_healthcheck=_WORKER_START_S,
                    http=BoundedH11Protocol)  # by name: each worker configures its bounds
    finally:
        if current.database_url is None:  # workers uvicorn killed left their pids behind
            prune_handles(current.data_dir.expanduser().resolve() / "pg18")


def _config_json(config: ServiceConfig) -> dict[str, Any]:
    data = config.model_dump(mode="json")
    key = config.generator.api_key
    data["generator"]["api_key"] = key.get_secret_value() if key is not None else None
    return data


def worker_app() -> FastAPI:
    """One worker's app (``serve --workers``): its own client, pool and models."""
    import atexit
    import multiprocessing.util

    from pgcite.service import ServiceConfig, create_app

    # uvicorn's workers are multiprocessing children, which end in os._exit without running
    # atexit handlers: the embedded server's (drop this pid from its handle list, stop it when
    # the last user goes) would never run, leaving PostgreSQL up after the service stopped.
    # multiprocessing runs its own finalizers at that exit; this one runs the atexit handlers.
    multiprocessing.util.Finalize(None, atexit._run_exitfuncs, exitpriority=0)
    from pgcite.service import configure
    from pgcite.ui import mount_ui

    config = ServiceConfig.model_validate(json.loads(os.environ[_WORKER_CONFIG]))
    configure(config)  # this worker's connections: the bounds of the config
    app = create_app(settings(), config=config)
    _mount_mcp(app)
    mount_ui(app)
    return app


def _mount_mcp(app: FastAPI) -> bool:
    """MCP (streamable HTTP) at /mcp when the mcp extra is installed."""
    try:
        from pgcite.mcp import mount_mcp
    except ImportError:
        return False
    mount_mcp(app)
    return True
