"""`pgcite ask`: a grounded answer with checked citations."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from pgcite.cli._common import (
    CorpusOpt,
    CutoffOpt,
    EntityOpt,
    JsonOption,
    ModeOpt,
    SnapshotOpt,
    cli_filters,
    console,
    emit_json,
    user_errors,
)
from pgcite.cli._search import warn_undated
from pgcite.cli._stages import (
    BoostOpt,
    DecomposeOpt,
    EntityBoostOpt,
    HydeOpt,
    RerankDepthOpt,
    RerankOpt,
    RouteLlmOpt,
    RouteOpt,
    print_stage_events,
    stage_overrides,
)

if TYPE_CHECKING:
    from pgcite.answer import Answer, GeneratorConfig

# Generator options, shared with `pgcite serve`.
GeneratorOpt = Annotated[str, typer.Option(
    "--generator", help="extractive (no model; default), openai (any OpenAI-compatible chat "
    "server: vLLM, Ollama, llama.cpp server), anthropic, or llama-cpp (in-process, optional).")]
BaseUrlOpt = Annotated[str | None, typer.Option(
    "--llm-base-url", envvar="PGCITE_LLM_BASE_URL",
    help="Chat server base URL, e.g. http://127.0.0.1:8080/v1.")]
ModelOpt = Annotated[str | None, typer.Option(
    "--llm-model", envvar="PGCITE_LLM_MODEL", help="Model name for openai/anthropic.")]
ApiKeyOpt = Annotated[str | None, typer.Option(
    "--llm-api-key", envvar="PGCITE_LLM_API_KEY", help="API key for the chat server.")]
TimeoutOpt = Annotated[float, typer.Option(
    "--llm-timeout", min=0.1, max=600, help="Seconds before a model call is abandoned (the "
    "answer then falls back to extractive).")]
ModelPathOpt = Annotated[Path | None, typer.Option(
    "--llm-model-path", envvar="PGCITE_LLM_MODEL_PATH", help="GGUF file for llama-cpp.")]


def generator_config(kind: str, base_url: str | None, model: str | None, api_key: str | None,
                     timeout: float, model_path: Path | None) -> GeneratorConfig:
    from pydantic import SecretStr

    from pgcite import ConfigError, GeneratorConfig
    from pgcite.answer import GENERATOR_KINDS

    if kind not in GENERATOR_KINDS:
        raise ConfigError(f"unknown generator {kind!r}", hint="use " + ", ".join(GENERATOR_KINDS))
    return GeneratorConfig(
        kind=kind, base_url=base_url, model=model,  # type: ignore[arg-type]
        api_key=SecretStr(api_key) if api_key else None, timeout_s=timeout,
        model_path=model_path,
    )


def print_answer(answer: Answer, *, trace: bool, text: bool = True) -> None:
    warn_undated(answer.undated_excluded)
    style = "yellow" if answer.abstained else "bold"
    if text:  # False: it was streamed already (cli/_stream.py)
        console.print(f"[{style}]{escape(answer.answer)}[/]", highlight=False)
    if answer.sources and not answer.abstained:
        console.print("[dim]sources:[/]")
        for source in answer.sources:
            mark = "*" if source.id in answer.citations else " "
            console.print(f" {mark} \\[{escape(source.id)}]  {source.date or 'undated'}  "
                          f"[dim]{escape(source.citation)}[/]", highlight=False)
    print_stage_events([s for s in answer.stages if trace or s.outcome != "applied"])
    if trace:
        for event in answer.trace:
            console.print(f"[dim]{event.step}: {escape(event.detail)}[/]", highlight=False)
    conf = "-" if answer.confidence is None else f"{answer.confidence:.3f}"
    console.print(f"[dim]{answer.generator} · snapshot {answer.snapshot_id} · confidence {conf}"
                  f" · {answer.timings_ms.get('total', 0):.0f} ms[/]")


def ask_command(
    collection: Annotated[str, typer.Argument(help="Collection to ask.")],
    question: Annotated[str, typer.Argument(help="The question.")],
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, max=100,
                                       help="Passages to retrieve.")] = 5,
    mode: ModeOpt = "hybrid",
    cutoff: CutoffOpt = None,
    corpus: CorpusOpt = None,
    entity: EntityOpt = None,
    filter_: Annotated[list[str] | None, typer.Option(
        "--filter", help="As for `pgcite search` (repeatable).")] = None,
    token_budget: Annotated[int, typer.Option(
        min=50, help="Context budget in approximate tokens (words x 1.3).")] = 4000,
    threshold: Annotated[float | None, typer.Option(
        help="Abstain below this best cosine similarity (default: the collection's fitted "
        "answerability model, else the one pgcite ships; see docs/answers.md).")] = None,
    persona: Annotated[str | None, typer.Option(
        help="Speak as this author (default: the collection's persona_author).")] = None,
    generator: GeneratorOpt = "extractive",
    llm_base_url: BaseUrlOpt = None,
    llm_model: ModelOpt = None,
    llm_api_key: ApiKeyOpt = None,
    llm_timeout: TimeoutOpt = 30.0,
    llm_model_path: ModelPathOpt = None,
    trace: Annotated[bool, typer.Option(help="Show what the checks and fallbacks did.")] = True,
    route: RouteOpt = None,
    route_llm: RouteLlmOpt = None,
    decompose: DecomposeOpt = None,
    hyde: HydeOpt = None,
    rerank: RerankOpt = None,
    rerank_depth: RerankDepthOpt = None,
    boost: BoostOpt = None,
    entity_boost: EntityBoostOpt = None,
    grade: Annotated[bool, typer.Option(
        help="Self-RAG: an LLM grades each passage; irrelevant ones are dropped.",
        rich_help_panel="Self-correcting")] = False,
    corrective: Annotated[bool, typer.Option(
        help="CRAG: rewrite and retrieve again (at most twice) when few passages survive "
        "grading or similarity is low.", rich_help_panel="Self-correcting")] = False,
    sufficiency: Annotated[bool, typer.Option(
        help="Abstain when the LLM judges the context insufficient; retrieve wider once "
        "when unsure.", rich_help_panel="Self-correcting")] = False,
    budget: Annotated[float, typer.Option(
        min=0.1, max=600, help="Total seconds for the self-correcting steps.",
        rich_help_panel="Self-correcting")] = 30.0,
    entity_facts: Annotated[bool, typer.Option(
        "--entity-facts/--no-entity-facts", help="For who/where/how-often questions, state "
        "the entity graph's facts first: the people or places named with the question's "
        "entity, in how many passages, citing passages that name both (on by default; "
        "--json: `entities`).")] = True,
    neighbours: Annotated[int | None, typer.Option(
        min=0, max=5, help="Also give the answerer, after each retrieved passage, this many "
        "passages before and after it in its document, within the same filters (default: "
        "1; 0: none).")] = None,
    stream: Annotated[bool, typer.Option(
        help="Print the answer as it is generated, then its checked citations; a citation "
        "the check removes is reported and the checked text shown. With --json: one JSON "
        "event per line.")] = False,
    snapshot: SnapshotOpt = None,
    json_out: bool = JsonOption,
) -> None:
    """Answer a question from a collection, citing passage ids; abstains when unsupported."""
    from pgcite import Client
    from pgcite._modes import parse_mode
    from pgcite.answer import ChatGenerator, make_generator
    from pgcite.cli._common import settings
    from pgcite.llm import with_llm

    with user_errors():
        config = generator_config(generator, llm_base_url, llm_model, llm_api_key, llm_timeout,
                                  llm_model_path)
        # One LLM per process: a model-backed --generator IS the configured LLM (its flags read
        # the same PGCITE_LLM_* variables), so generation, the stages and the self-checks' judge
        # share one chat model; with the extractive generator the judge is PGCITE_LLM's.
        with Client(with_llm(settings(), config.llm())) as client:
            chat = client.llm()
            gen = (ChatGenerator(chat, max_tokens=config.max_tokens)
                   if config.llm() is not None and chat is not None else make_generator(config))
            col = client.collection(collection)
            filters = cli_filters(col, corpus, cutoff, filter_, snapshot, entity)
            judge = chat
            how = dict(token_budget=token_budget, threshold=threshold, persona=persona,
                       self_check={"grade": grade, "corrective": corrective,
                                   "sufficiency": sufficiency, "budget_s": budget},
                       entity_facts=entity_facts, neighbours=neighbours)
            options: dict[str, Any] = dict(
                top_k=top_k, mode=parse_mode(mode), filters=filters, generator=gen,
                stages=stage_overrides(route, decompose, hyde, rerank, rerank_depth, boost,
                                 route_llm, entity_boost),
                judge=judge, snapshot_id=snapshot,
                options={k: v for k, v in how.items() if v is not None})
            if stream:
                from pgcite import stream_answer
                from pgcite.cli._stream import print_stream

                print_stream(stream_answer(col, question, **options), trace=trace,
                             json_lines=json_out)
                return
            answer = col.answer(question, **options)
    if json_out:
        emit_json(answer)
    else:
        print_answer(answer, trace=trace)
