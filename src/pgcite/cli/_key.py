"""`pgcite key create|list|revoke`: API keys for the HTTP service."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from pgcite.cli._common import JsonOption, console, emit_json, settings, user_errors

app = typer.Typer(help="API keys for `pgcite serve`: scoped to one collection and a role.",
                  no_args_is_help=True)


@app.command("create")
def create_command(
    collection: Annotated[str, typer.Option("--collection", "-c", help="The collection.")],
    role: Annotated[str, typer.Option(help="reader (search, answer) or admin (also "
                                      "snapshots, uploads, activation).")] = "reader",
    note: Annotated[str | None, typer.Option(help="What the key is for.")] = None,
    json_out: bool = JsonOption,
) -> None:
    """Create a key. The token is shown ONCE; only its sha256 is stored."""
    from pgcite.service import create_key
    from pgcite.store import Database

    with user_errors():
        db = Database.open(settings())
        with db.transaction() as conn:
            new = create_key(conn, collection, role, note)
    if json_out:
        emit_json({"key": new.key.model_dump(mode="json"), "token": new.token})
        return
    console.print(f"created key [bold]{new.key.key_id}[/] ({new.key.role} on "
                  f"{escape(new.key.collection)})")
    console.print(f"token (shown once, store it now): [bold]{new.token}[/]", highlight=False,
                  soft_wrap=True)


@app.command("list")
def list_command(
    collection: Annotated[str | None, typer.Option("--collection", "-c",
                                                   help="Only this collection.")] = None,
    json_out: bool = JsonOption,
) -> None:
    """List keys (never their tokens)."""
    from pgcite.service import list_keys
    from pgcite.store import Database

    with user_errors():
        db = Database.open(settings())
        with db.connect() as conn:
            keys = list_keys(conn, collection)
    if json_out:
        emit_json([k.model_dump(mode="json") for k in keys])
        return
    table = Table("key", "collection", "role", "created", "revoked", "note")
    for key in keys:
        table.add_row(key.key_id, key.collection, key.role, f"{key.created_at:%Y-%m-%d %H:%M}",
                      f"{key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "-",
                      escape(key.note or ""))
    console.print(table if keys else "no API keys")


@app.command("revoke")
def revoke_command(
    key_id: Annotated[str, typer.Argument(help="The key id (from `pgcite key list`).")],
    json_out: bool = JsonOption,
) -> None:
    """Revoke a key: it stops working at once."""
    from pgcite.service import revoke_key
    from pgcite.store import Database

    with user_errors():
        db = Database.open(settings())
        with db.transaction() as conn:
            key = revoke_key(conn, key_id)
    if json_out:
        emit_json(key.model_dump(mode="json"))
    else:
        console.print(f"revoked key [bold]{key.key_id}[/] ({key.role} on "
                      f"{escape(key.collection)})")
