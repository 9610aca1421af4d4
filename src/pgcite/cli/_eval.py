"""`pgcite eval`: judged queries → metrics per mode, side by side, with reports."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from pgcite.evaluate import EvalResult, GoldenSet

from pgcite.cli._common import JsonOption, console, emit_json, fail, settings, user_errors


def eval_command(
    collection: Annotated[str | None, typer.Argument(
        help="Collection to evaluate (not needed with --compare).")] = None,
    golden: Annotated[Path | None, typer.Option(
        help="golden.jsonl, or a BEIR folder (queries.jsonl + qrels/<split>.tsv).")] = None,
    modes: Annotated[str, typer.Option(
        "--modes", "--mode", help="Comma-separated configurations run side by side: "
        "keyword, vector, hybrid.")] = "keyword,vector,hybrid",
    top_k: Annotated[int, typer.Option("--top-k", help="k of nDCG@k, P@k, R@k, MRR@k.")] = 10,
    depth: Annotated[int, typer.Option(help="Hits retrieved per query (Recall@100 needs 100).")]
    = 100,
    split: Annotated[str | None, typer.Option(help="BEIR qrels split (default: test).")] = None,
    threshold: Annotated[float | None, typer.Option(
        help="Abstention threshold on the best cosine similarity (default: calibrated on the "
        "golden set and reported as such).")] = None,
    out: Annotated[Path | None, typer.Option(
        help="Write results.json, report.md and report.html here.")] = None,
    save_run: Annotated[Path | None, typer.Option(
        help="Write each configuration's ranking as a TREC run file in this folder.")] = None,
    run: Annotated[Path | None, typer.Option(
        help="Score this external TREC run file against the golden set instead.")] = None,
    compare: Annotated[tuple[Path, Path] | None, typer.Option(
        help="Print the differences between two results.json files (B - A) and exit.")] = None,
    fusion: Annotated[str, typer.Option(help="Fusion of the hybrid mode: convex or rrf.")]
    = "convex",
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    answers: Annotated[bool, typer.Option(
        "--answers", help="Score the collection's answers instead of its retrieval: gold "
        "strings from each query's 'answers' field (containment, first sentence), citations "
        "against 'relevant', abstention on 'absent' queries (docs/answers.md).")] = False,
    json_out: bool = JsonOption,
) -> None:
    """Evaluate retrieval on judged queries, several modes side by side.

    Reports nDCG, P, R, MRR, pass rate, cutoff violations and latency per stage, by query kind.
    """
    from pgcite import evaluate as ev

    with user_errors():
        if compare is not None:
            console.print(ev.compare_results(*compare), highlight=False)
            return
        if golden is None:
            raise fail("--golden is required", hint="e.g. --golden data/pepys-diary/golden.jsonl")
        gold = ev.load_golden(golden, split=split)
        if answers:
            if collection is None:
                raise fail("name the collection to evaluate")
            _answers(collection, gold, out, json_out)
            return
        if run is not None:
            result = ev.score_external_run(gold, run, k=top_k)
        else:
            if collection is None:
                raise fail("name the collection to evaluate")
            result = _evaluate(collection, gold, modes, top_k, depth, threshold,
                               progress and not json_out, fusion)
        if out is not None:
            ev.write_reports(result, out)
        if save_run is not None:
            ev.save_runs(result, save_run)
    if json_out:
        emit_json(result)
        return
    console.print(_summary(result), highlight=False)
    if out is not None:
        console.print(f"reports in {out}/ (results.json, report.md, report.html)")


def _evaluate(collection: str, gold: GoldenSet, modes: str, top_k: int, depth: int,
              threshold: float | None, progress: bool, fusion: str) -> EvalResult:
    from pgcite import evaluate as ev
    from pgcite._client import Client
    from pgcite._errors import ConfigError
    from pgcite.evaluate._collection import collection_searcher, index_usage, run_metadata

    wanted = [m.strip() for m in modes.split(",") if m.strip()]
    bad = [m for m in wanted if m not in ("keyword", "vector", "hybrid")]
    if bad or not wanted:
        raise ConfigError(f"unknown mode(s) {bad or modes!r}", hint="use keyword,vector,hybrid")
    client = Client(settings())
    col = client.collection(collection)
    searchers = {m: collection_searcher(col, mode=m, depth=depth, fusion=fusion) for m in wanted}
    return ev.evaluate(gold, searchers, k=top_k, threshold=threshold, progress=progress,
                       metadata=run_metadata(col, {
                           "depth": depth, "fusion": fusion,
                           "index_usage": index_usage(col, gold.queries[0].text)}))


def _answers(collection: str, gold: GoldenSet, out: Path | None, json_out: bool) -> None:
    """Answer every golden query with the collection's defaults and print the answer metrics."""
    import json

    from pgcite._client import Client
    from pgcite.evaluate._answers import answer_golden, summarize_by_kind

    with Client(settings()) as client:
        records = answer_golden(client.collection(collection), gold)
    kinds = summarize_by_kind(records)
    summary = {"golden": gold.name, "kinds": kinds}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "answers.json").write_text(json.dumps(
            {**summary, "queries": [r.model_dump() for r in records]}, indent=1,
            ensure_ascii=False) + "\n")
    if json_out:
        emit_json(summary)
        return
    for kind, row in kinds.items():
        cells = ", ".join(f"{k} {v}" for k, v in row.items() if v is not None)
        console.print(f"{kind}: {cells}", highlight=False)


def _summary(result: EvalResult) -> str:
    from pgcite.evaluate._report import render_markdown
    from pgcite.evaluate._tables import report_tables

    return render_markdown(result, report_tables(result))
