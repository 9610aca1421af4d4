"""`pgcite eval`: judged queries → metrics per mode, side by side, with reports."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from pgcite.evaluate import EvalResult, GoldenSet
    from pgcite.lifecycle import Check

from pgcite.cli._common import (
    JsonOption,
    console,
    emit_json,
    err_console,
    fail,
    settings,
    user_errors,
)


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
    strict: Annotated[bool, typer.Option(
        help="Exit 1 when a floor fails in any mode: the collection's gate floors (`pgcite "
        "collection set --floor`; the house floors without a collection) and zero cutoff "
        "violations. The failures are named on stderr.")] = False,
    floor: Annotated[list[str] | None, typer.Option(
        help="With --strict: a floor METRIC=VALUE on top of those (repeatable); METRIC=none "
        "drops one.")] = None,
    fit_abstention: Annotated[bool, typer.Option(
        "--fit-abstention", help="Fit the answerability score (when answers abstain) on the "
        "golden set's answerable and absent queries, print leave-one-out figures per signal "
        "and combined, and store the model in the collection for its embedding model.")]
    = False,
    fit_also: Annotated[list[Path] | None, typer.Option(
        "--fit-also", help="With --fit-abstention: more judged queries (golden.jsonl) to fit "
        "on (repeatable). The figures stay those of --golden's queries, each decided by a fit "
        "on all the other queries, these included.")] = None,
    answers: Annotated[bool, typer.Option(
        "--answers", help="Score the collection's answers instead of its retrieval: gold "
        "strings from each query's 'answers' field (containment, first sentence), citations "
        "against 'relevant', abstention on 'absent' queries (docs/answers.md).")] = False,
    json_out: bool = JsonOption,
) -> None:
    """Evaluate retrieval on judged queries, several modes side by side.

    Reports nDCG, P, R, MRR, pass rate, cutoff violations and latency per stage, by query kind.
    With --strict, exits 1 when a floor fails (for CI); docs/evaluation.md has the golden
    file format.
    """
    from pgcite import evaluate as ev

    with user_errors():
        if compare is not None:
            console.print(ev.compare_results(*compare), highlight=False)
            return
        if golden is None:
            raise fail("--golden is required", hint="e.g. --golden data/pepys-diary/golden.jsonl")
        floors = _floors(collection if run is None else None, floor or []) if strict else None
        gold = ev.load_golden(golden, split=split)
        if fit_abstention:
            # named by file: sets kept side by side in one folder would share its name
            also = [ev.load_golden(path, name=path.stem if path.is_file() else None)
                    for path in fit_also or []]
            _fit_abstention(collection, gold, also, json_out)
            return
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
    else:
        console.print(_summary(result), highlight=False)
        if out is not None:
            console.print(f"reports in {out}/ (results.json, report.md, report.html)")
    if floors is not None:
        _enforce(result, floors)


def _floors(collection: str | None, updates: list[str]) -> dict[str, float]:
    """The floors --strict holds the result to: the collection's gate floors (the house
    floors without one) with the --floor updates applied."""
    from pgcite import Client, GateSettings
    from pgcite.lifecycle import apply_floors

    gate = GateSettings()
    if collection is not None:
        with Client(settings()) as client:
            gate = client.collection(collection).info.settings.gate
    return apply_floors(gate, updates).floors


def _strict_failures(result: EvalResult, floors: dict[str, float]) -> list[str]:
    """Every failed floor, per configuration: the metric floors and zero cutoff violations
    (the gate's checks, without its comparison to an active snapshot)."""
    from pgcite.lifecycle import HARD_METRIC, Check, floor_checks

    failures = []
    for name, config in result.configurations.items():
        checks: list[Check] = floor_checks(config.overall, floors)
        if config.safety is not None:
            late = float(config.safety.total.cutoff_violations)
            checks.append(Check(kind="hard", metric=HARD_METRIC, value=late, limit=0.0,
                                passed=late == 0))
        failures += [f"{name}: {c.describe()}" for c in checks if not c.passed]
    return failures


def _enforce(result: EvalResult, floors: dict[str, float]) -> None:
    failures = _strict_failures(result, floors)
    if failures:
        raise fail("floors failed (--strict): " + "; ".join(failures), code=1)
    err_console.print("[dim]--strict: every floor met ("
                      + (", ".join(f"{k} >= {v}" for k, v in floors.items()) or "none")
                      + ", cutoff_violations = 0)[/]", highlight=False)


def _evaluate(collection: str, gold: GoldenSet, modes: str, top_k: int, depth: int,
              threshold: float | None, progress: bool, fusion: str) -> EvalResult:
    from pgcite import Client, ConfigError
    from pgcite import evaluate as ev
    from pgcite._modes import MODES, parse_fusion, parse_mode
    from pgcite.evaluate import Searcher, collection_searcher, index_usage, run_metadata

    wanted = [parse_mode(m.strip()) for m in modes.split(",") if m.strip()]
    if not wanted:
        raise ConfigError(f"no mode in {modes!r}", hint="use " + ",".join(MODES))
    chosen = parse_fusion(fusion)
    client = Client(settings())
    view = client.collection(collection).view()  # one snapshot for every mode and query
    searchers: dict[str, Searcher] = {
        m: collection_searcher(view, mode=m, depth=depth, fusion=chosen) for m in wanted}
    return ev.evaluate(gold, searchers, k=top_k, threshold=threshold, progress=progress,
                       metadata=run_metadata(view, {
                           "depth": depth, "fusion": chosen,
                           "index_usage": index_usage(view, gold.queries[0].text)}))


def _fit_abstention(collection: str | None, gold: GoldenSet, also: list[GoldenSet],
                    json_out: bool) -> None:
    from pgcite import Client
    from pgcite.evaluate import fit_abstention, render_fit

    if collection is None:
        raise fail("name the collection to fit abstention for")
    report = fit_abstention(Client(settings()).collection(collection), gold, also=also)
    if json_out:
        emit_json(report)
    else:
        console.print(render_fit(report), highlight=False)


def _answers(collection: str, gold: GoldenSet, out: Path | None, json_out: bool) -> None:
    """Answer every golden query with the collection's defaults and print the answer metrics."""
    import json

    from pgcite import Client
    from pgcite.evaluate import answer_golden, collection_passages, summarize_by_kind

    with Client(settings()) as client:
        col = client.collection(collection)
        view = col.view(embedder=False)  # the passages and every answer: one snapshot
        records = answer_golden(
            lambda q: col.answer(q.text, filters={"cutoff": q.cutoff},
                                 snapshot_id=view.snapshot.snapshot_id),
            collection_passages(view), gold)
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
    from pgcite.evaluate import render_markdown, report_tables

    return render_markdown(result, report_tables(result))
