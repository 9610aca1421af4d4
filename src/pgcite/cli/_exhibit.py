"""`pgcite exhibit create|list|show|delete|key`: exhibits and their visitor keys
(docs/exhibits.md)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from pgcite.cli._common import JsonOption, client, console, emit_json, fail, user_errors

app = typer.Typer(help="Exhibits: a figure's archive as visitors meet it at /exhibit/NAME of "
                  "`pgcite serve`, with its own cutoff, corpora and voice.",
                  no_args_is_help=True)

NameArg = Annotated[str, typer.Argument(help="Exhibit name (lowercase letters, digits, -).")]


@app.command("create")
def create_command(
    name: NameArg,
    collection: Annotated[str, typer.Option("--collection", "-c", help="The collection.")],
    file: Annotated[Path | None, typer.Option(
        "--file", "-f", help="Settings as YAML or JSON (the options below override it).")]
    = None,
    persona: Annotated[str | None, typer.Option(
        help="The figure: answers speak as her, in the first person only over her own "
        "passages.")] = None,
    title: Annotated[str | None, typer.Option(help="The page's heading.")] = None,
    cutoff: Annotated[dt.datetime | None, typer.Option(
        formats=["%Y-%m-%d"], help="Nothing dated after this day is quoted or shown.")] = None,
    corpus: Annotated[list[str] | None, typer.Option(
        help="Only passages of this corpus (repeatable).")] = None,
    greeting: Annotated[str | None, typer.Option(help="The page's first words.")] = None,
    question: Annotated[list[str] | None, typer.Option(
        help="A suggested question (repeatable, at most 12).")] = None,
    language: Annotated[str | None, typer.Option(help="BCP 47 tag: en, ar, fr …")] = None,
    direction: Annotated[str | None, typer.Option(help="auto, ltr or rtl.")] = None,
    abstention_text: Annotated[str | None, typer.Option(
        help="The answer when the archive does not say.")] = None,
    attribution_fallback: Annotated[str | None, typer.Option(
        help="The answer when a draft spoke another's words as the persona's own.")] = None,
    label: Annotated[list[str] | None, typer.Option(
        help="A page word, key=text (repeatable; docs/exhibits.md, 'Labels').")] = None,
    replace: Annotated[bool, typer.Option(
        help="Define a new version of an existing exhibit.")] = False,
    json_out: bool = JsonOption,
) -> None:
    """Define an exhibit on a collection (a new version of it with --replace)."""
    from pgcite import Exhibit
    from pgcite.store import settings_of

    fields: dict[str, Any] = _read(file) if file is not None else {}
    flags = {"persona": persona, "title": title, "greeting": greeting, "language": language,
             "direction": direction, "abstention_text": abstention_text,
             "attribution_fallback": attribution_fallback,
             "cutoff": cutoff.date() if cutoff else None, "corpora": corpus or None,
             "questions": question or None, "labels": _labels(label) if label else None}
    fields.update({k: v for k, v in flags.items() if v is not None})
    with user_errors(), client() as c:
        exhibit = Exhibit.create(c.collection(collection), name, settings_of(fields),
                                 replace=replace)
    if json_out:
        emit_json(exhibit.info)
        return
    console.print(f"exhibit [bold]{escape(name)}[/] version {exhibit.info.version} on "
                  f"{escape(collection)}; visitors: /exhibit/{name} of `pgcite serve`, with a "
                  f"key from `pgcite exhibit key {name}`")


def _read(file: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise fail(f"cannot read {file}: {exc}", code=2) from None
    if not isinstance(data, dict):
        raise fail(f"{file}: expected a mapping of settings", code=2)
    return data


def _labels(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep:
            raise fail(f"--label {pair!r}: expected key=text", code=2)
        out[key.strip()] = text
    return out


@app.command("list")
def list_command(
    collection: Annotated[str | None, typer.Option(
        "--collection", "-c", help="Only this collection's.")] = None,
    json_out: bool = JsonOption,
) -> None:
    """List exhibits: name, collection, version, persona, cutoff, corpora."""
    from pgcite import Exhibit

    with user_errors(), client() as c:
        names = [collection] if collection else [i.name for i in c.collections()]
        found = [e for n in names for e in Exhibit.list(c.collection(n))]
    if json_out:
        emit_json([e.model_dump(mode="json") for e in found])
        return
    if not found:
        console.print("no exhibits")
        return
    table = Table("exhibit", "collection", "version", "persona", "cutoff", "corpora", "language")
    for e in found:
        s = e.settings
        table.add_row(e.name, escape(e.collection), str(e.version), escape(s.persona or ""),
                      str(s.cutoff or ""), escape(", ".join(s.corpora or ["all"])), s.language)
    console.print(table)


@app.command("show")
def show_command(name: NameArg, json_out: bool = JsonOption) -> None:
    """Show an exhibit's settings in force."""
    from pgcite import Exhibit

    with user_errors(), client() as c:
        exhibit = Exhibit.open(c, name)
    if json_out:
        emit_json(exhibit.info)
        return
    console.print(f"[bold]{escape(name)}[/] on {escape(exhibit.info.collection)}, version "
                  f"{exhibit.info.version} ({exhibit.info.created_at:%Y-%m-%d %H:%M})")
    for key, value in exhibit.settings.model_dump(mode="json", exclude_defaults=True).items():
        console.print(f"  {key}: {escape(str(value))}", highlight=False)


@app.command("delete")
def delete_command(name: NameArg, json_out: bool = JsonOption) -> None:
    """Retire an exhibit (its versions stay on record) and delete its visitor keys."""
    from pgcite import Exhibit

    with user_errors(), client() as c:
        info = Exhibit.open(c, name).delete()
    if json_out:
        emit_json(info)
    else:
        console.print(f"deleted exhibit [bold]{escape(name)}[/] and its visitor keys")


@app.command("key")
def key_command(
    name: NameArg,
    note: Annotated[str | None, typer.Option(help="What the key is for (e.g. kiosk 1).")]
    = None,
    json_out: bool = JsonOption,
) -> None:
    """A visitor key for the exhibit: it may ask the exhibit and open its citations, nothing
    else. The token is shown ONCE."""
    from pgcite.service import create_key
    from pgcite.store import directory_collection

    with user_errors(), client() as c, c.db.transaction() as conn:
        new = create_key(conn, directory_collection(conn, name), "visitor", note, exhibit=name)
    if json_out:
        emit_json({"key": new.key.model_dump(mode="json"), "token": new.token})
        return
    console.print(f"created visitor key [bold]{new.key.key_id}[/] for exhibit {escape(name)}")
    console.print(f"token (shown once, store it now): [bold]{new.token}[/]", highlight=False,
                  soft_wrap=True)
    console.print(f"a kiosk opens: http://HOST:PORT/exhibit/{name}#key={new.token}",
                  highlight=False, soft_wrap=True)
