"""`pgcite collection create|list|show|set|optimize|upgrade|drop`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from pgcite.cli._common import JsonOption, client, console, emit_json, fail, user_errors
from pgcite.embed import DEFAULT_EMBEDDER, KNOWN

app = typer.Typer(help="Create, list, inspect and drop collections.", no_args_is_help=True)


@app.command()
def create(
    name: Annotated[str, typer.Argument(help="Lowercase name: a letter, then a-z, 0-9 or _.")],
    language: Annotated[str, typer.Option(
        help="PostgreSQL text-search configuration: english, arabic, german, simple (no "
        "stemming: any language) …")] = "english",
    embedder: Annotated[str, typer.Option(
        help="Embedder id: " + "; ".join(f"{k} ({v})" for k, v in KNOWN.items()))
    ] = DEFAULT_EMBEDDER,
    halfvec: Annotated[bool, typer.Option(help="Index embeddings as halfvec (half the size).")]
    = False,
    chunk_tokens: Annotated[int, typer.Option(
        help="Chunk budget in the embedder's tokens (capped at the model's max length).")] = 350,
    persona: Annotated[str | None, typer.Option(
        help="Author the collection speaks as (answers may say 'I' only for this author).")]
    = None,
    json_out: bool = JsonOption,
) -> None:
    """Create a collection (its own PostgreSQL schema) with a language and an embedder."""
    from pgcite import CollectionSettings

    with user_errors():
        extra = CollectionSettings(halfvec=halfvec, chunk_tokens=chunk_tokens,
                                   persona_author=persona)
        with client() as c:
            col = c.create_collection(name, language=language, embedder=embedder, settings=extra)
    if json_out:
        emit_json(col.info)
    else:
        console.print(f"created collection [bold]{name}[/] ({language}, "
                      f"{col.info.embedder.model_key}, {col.info.embedder.dim} dims)")


@app.command("list")
def list_(json_out: bool = JsonOption) -> None:
    """List collections."""
    with user_errors(), client() as c:
        infos = c.collections()
    if json_out:
        emit_json([i.model_dump(mode="json") for i in infos])
        return
    table = Table("name", "language", "embedder", "created")
    for info in infos:
        table.add_row(info.name, info.ts_config, info.embedder.model_key,
                      info.created_at.strftime("%Y-%m-%d %H:%M"))
    console.print(table if infos else "no collections yet: pgcite collection create NAME")
    from pgcite.store import latest_version

    for info in infos:
        if info.schema_version != latest_version():
            console.print(f"{info.name}: schema version {info.schema_version}, this pgcite reads"
                          f" {latest_version()}: pgcite collection upgrade {info.name}")


@app.command()
def show(name: str, json_out: bool = JsonOption) -> None:
    """Show a collection's settings, embedder and what is live."""
    with user_errors(), client() as c:
        col = c.collection(name)
        stats = col.stats()
    payload = {**col.info.model_dump(mode="json"), **stats}
    if json_out:
        emit_json(payload)
        return
    spec = col.info.embedder
    console.print(f"[bold]{name}[/]  schema {col.info.schema_name}, language {col.info.ts_config}")
    console.print(f"embedder  {spec.model_key}  dim {spec.dim}  max tokens {spec.max_tokens}"
                  + (f"  prefixes {spec.query_prefix!r}/{spec.document_prefix!r}"
                     if spec.query_prefix or spec.document_prefix else ""))
    live = stats["live"]
    console.print(f"active snapshot {stats['active_snapshot']}: {live.get('documents', 0)} "
                  f"documents, {live.get('chunks', 0)} chunks  ({stats['snapshots']} snapshots, "
                  f"{stats['stored']['chunks']} chunks stored)")


@app.command()
def optimize(
    name: str,
    full: Annotated[bool, typer.Option(
        help="Merge every segment into one (default: the tiered policy, only what is due).")]
    = False,
    snapshot: Annotated[int | None, typer.Option(
        help="The snapshot whose segments to merge (default: the active one).")] = None,
    json_out: bool = JsonOption,
) -> None:
    """Merge the keyword index's segments (docs/snapshots.md): fewer segments, deleted chunks
    purged, every search result unchanged."""
    with user_errors(), client() as c:
        report = c.collection(name).optimize(snapshot_id=snapshot, full=full)
    if json_out:
        emit_json(report)
        return
    console.print(f"{name}: snapshot {report.snapshot_id} has {report.segments_after} segments"
                  f" (was {report.segments_before}; {report.merges} merges,"
                  f" {report.deleted_purged} deleted chunks purged)")


@app.command()
def upgrade(
    names: Annotated[list[str] | None, typer.Argument(
        help="Collections to upgrade (default: every one).")] = None,
    json_out: bool = JsonOption,
) -> None:
    """Bring collections made by an older pgcite to the schema this one reads, one step at a
    time, each in its own transaction (docs/architecture.md, "The database"). Run it once after
    upgrading pgcite: until then such a collection is refused. A step may rewrite a large
    collection's tables and holds their locks while it runs (searches of that collection wait)."""
    from pgcite.store import latest_version

    def told(collection: str, version: int, step: str) -> None:
        if not json_out:
            console.print(f"{collection}: step {version} ({step}) …")

    with user_errors(), client() as c:
        steps = c.upgrade_collections(names or None, on_step=told)
    if json_out:
        emit_json([s.model_dump(mode="json") for s in steps])
        return
    for step in steps:
        console.print(f"{step.collection}: step {step.version} ({step.name}) done in"
                      f" {step.seconds:.1f} s")
    console.print(f"{len({s.collection for s in steps})} collection(s) upgraded;"
                  f" every one named is at schema version {latest_version()}")


@app.command()
def drop(
    name: str,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    json_out: bool = JsonOption,
) -> None:
    """Drop a collection and everything in it (asks first)."""
    with user_errors(), client() as c:
        if name not in [i.name for i in c.collections()]:  # an outdated one can go too
            c.collection(name)  # fails clearly if unknown, before asking
        if not yes and not typer.confirm(f"Drop collection {name!r} and all its data?"):
            raise fail("not dropped")
        c.drop_collection(name)
    if json_out:
        emit_json({"dropped": name})
    else:
        console.print(f"dropped collection [bold]{name}[/]")


@app.command("set")
def set_(
    name: str,
    golden: Annotated[Path | None, typer.Option(
        help="golden.jsonl or BEIR folder that gates activation (turns the gate on).")] = None,
    no_golden: Annotated[bool, typer.Option(
        "--no-golden", help="Forget the golden set (turns the gate off).")] = False,
    floor: Annotated[list[str] | None, typer.Option(
        help="Gate floor METRIC=VALUE (repeatable), e.g. --floor pass_rate=0.9 --floor "
        "recall@10=0.85; METRIC=none removes one.")] = None,
    reset_floors: Annotated[bool, typer.Option(
        help="Back to the house floors before applying --floor.")] = False,
    tolerance: Annotated[float | None, typer.Option(
        min=0.0, max=1.0, help="Allowed regression against the active snapshot, absolute, "
        "per metric (default 0.02).")] = None,
    threshold: Annotated[float | None, typer.Option(
        help="Fixed abstention threshold for the gate's pass rate (default: calibrated).")]
    = None,
    fusion: Annotated[str | None, typer.Option(
        help="Default fusion of hybrid search: convex or rrf.")] = None,
    weights: Annotated[str | None, typer.Option(
        help="Default keyword,vector leg weights, e.g. 0.7,0.3 for a corpus where exact words "
        "matter more than meaning (measure with pgcite eval).")] = None,
    term_depth: Annotated[int | None, typer.Option(
        help="Count only each query term's N best BM25 postings (0: exact, the default). "
        "For collections of ~1M chunks: 1000.")] = None,
    contextual: Annotated[str | None, typer.Option(
        help="What the embedder reads before each chunk: off (its title), header (title, "
        "locator, dates, author) or llm (the header plus a situating sentence the PGCITE_LLM "
        "model writes per chunk). Takes effect at the next ingest, which re-embeds every "
        "document.")] = None,
    entities: Annotated[str | None, typer.Option(
        help="Named entities per chunk at ingest: auto (when a spaCy pipeline for the "
        "collection's language is installed: the entities extra) or off.")] = None,
    stages: Annotated[str | None, typer.Option(
        help="Default quality stages as JSON, merged into the current ones, e.g. "
        "'{\"route\": true, \"rerank\": true, \"rerank_depth\": 30}'; '{}' keeps them, "
        "'null' clears them (docs/retrieval.md, 'Quality stages').")] = None,
    json_out: bool = JsonOption,
) -> None:
    """Change a collection's settings: activation gate, search defaults and embedding context.

    The gate: golden set, floors, tolerance. Search: fusion, leg weights, term depth, quality
    stages. Ingest: contextual chunk headers, named entities.
    """
    from pydantic import ValidationError

    from pgcite import CollectionSettings, ConfigError, GateSettings
    from pgcite.evaluate import load_golden
    from pgcite.lifecycle import apply_floors
    from pgcite.store import update_settings

    with user_errors(), client() as c:
        info = c.collection(name).info
        settings = info.settings
        gate = GateSettings() if reset_floors else settings.gate
        gate = apply_floors(gate, floor or [])
        if tolerance is not None or threshold is not None:
            gate = gate.model_copy(update={
                "tolerance": gate.tolerance if tolerance is None else tolerance,
                "threshold": gate.threshold if threshold is None else threshold})
        updates: dict[str, object] = {"gate": gate}
        if golden is not None and no_golden:
            raise ConfigError("give --golden or --no-golden, not both")
        if golden is not None:
            load_golden(golden)  # refuse a path that is not a golden set, now
            updates["golden"] = str(golden.resolve())
        if no_golden:
            updates["golden"] = None
        if fusion is not None:
            updates["fusion"] = fusion
        if weights is not None:
            updates["weights"] = _weights(weights)
        if term_depth is not None:
            updates["term_depth"] = term_depth or None
        if contextual is not None:
            updates["contextual"] = contextual
        if entities is not None:
            updates["entities"] = entities
        if stages is not None:
            updates["stages"] = _stages(settings.stages, stages)
        try:
            new = CollectionSettings.model_validate({**settings.model_dump(), **updates})
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ConfigError(f"invalid setting {'.'.join(map(str, first['loc']))}: "
                              f"{first['msg']}") from None
        with c.db.transaction() as conn:
            info = update_settings(conn, name, new)
    if json_out:
        emit_json(info)
        return
    s = info.settings
    floors = ", ".join(f"{k} >= {v}" for k, v in s.gate.floors.items()) or "none"
    console.print(f"[bold]{name}[/]: golden {s.golden or 'none (no gate)'}; floors {floors}; "
                  f"tolerance {s.gate.tolerance}; contextual {s.contextual}; "
                  f"stages {s.stages or 'none'}", highlight=False)


def _weights(text: str) -> tuple[float, float]:
    from pgcite import ConfigError

    try:
        keyword, vector = (float(part) for part in text.split(","))
    except ValueError:
        raise ConfigError(f"cannot read weights {text!r}", hint="use KEYWORD,VECTOR, e.g. 0.7,0.3") from None
    return keyword, vector


def _stages(current: dict[str, object], text: str) -> dict[str, object]:
    """``text`` (JSON) merged into the current stage settings, validated as Stages."""
    import json

    from pgcite import Stages

    try:
        given = json.loads(text)
    except ValueError as exc:
        from pgcite import ConfigError

        raise ConfigError(f"--stages is not JSON: {exc}",
                          hint='e.g. --stages \'{"rerank": true}\'') from None
    if given is None:
        return {}
    merged = Stages.model_validate(current).merged(given)
    return merged.model_dump(exclude_defaults=True)
