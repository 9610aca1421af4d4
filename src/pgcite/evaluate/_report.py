"""Writing an evaluation down: ``results.json``, ``report.md``, ``report.html``, TREC run files,
and a text comparison of two results."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from pgcite._errors import ConfigError
from pgcite.evaluate._result import ConfigResult, EvalResult, load_result
from pgcite.evaluate._runs import write_trec_run
from pgcite.evaluate._tables import Table, fmt, report_tables


def write_reports(
    result: EvalResult, out_dir: Path, *, include_runs: bool = False
) -> dict[str, Path]:
    """Write ``results.json``, ``report.md`` and ``report.html`` into ``out_dir`` (created).

    The runs are left out of ``results.json`` unless ``include_runs``: they are two thirds of its
    size and :func:`save_runs` writes them as TREC files (kept out of git under ``runs/``).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out_dir / "results.json",
        "markdown": out_dir / "report.md",
        "html": out_dir / "report.html",
    }
    tables = report_tables(result)
    exclude = None if include_runs else {"configurations": {"__all__": {"run"}}}
    paths["json"].write_text(result.model_dump_json(indent=2, exclude=exclude), encoding="utf-8")
    paths["markdown"].write_text(render_markdown(result, tables), encoding="utf-8")
    paths["html"].write_text(render_html(result, tables), encoding="utf-8")
    return paths


# What a summary leaves out: everything per query (rows, latency samples, runs). What is left is
# a few kilobytes per configuration -- the figures, safety totals, latency percentiles, budgets.
_PER_QUERY = {"configurations": {"__all__": {"queries", "latency_samples_ms", "run"}}}


def summary_json(result: EvalResult) -> str:
    """``result`` without its per-query detail, as JSON: what a benchmark commits."""
    return result.model_dump_json(indent=2, exclude=_PER_QUERY)


def write_summary(result: EvalResult, out_dir: Path) -> dict[str, Path]:
    """Write ``summary.json`` (:func:`summary_json`) and ``report.md`` into ``out_dir``: the
    small files a benchmark keeps in git; :func:`write_reports` writes the detail elsewhere."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"summary": out_dir / "summary.json", "markdown": out_dir / "report.md"}
    paths["summary"].write_text(summary_json(result) + "\n", encoding="utf-8")
    paths["markdown"].write_text(render_markdown(result, report_tables(result)), encoding="utf-8")
    return paths


def save_runs(result: EvalResult, out_dir: Path) -> dict[str, Path]:
    """Write each configuration's run as ``<config>.trec`` (name made file-safe), tagged with it."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for name, config in result.configurations.items():
        if not config.run and config.queries:
            raise ConfigError(
                f"configuration {name!r} has no run to save",
                hint="results.json keeps no runs; call save_runs on the result evaluate() returned",
            )
        safe = safe_name(name)
        path = out_dir / f"{safe}.trec"
        write_trec_run(path, config.run, tag=safe)
        written[name] = path
    return written


def safe_name(name: str) -> str:
    """``name`` usable as a file name and a TREC tag (no spaces, no slashes)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "run"


# --- Markdown -----------------------------------------------------------------------------------


def render_markdown(result: EvalResult, tables: list[Table]) -> str:
    """The report as Markdown."""
    lines = [f"# Evaluation: {result.golden.name}", ""]
    lines += [f"- **{key}**: {value}" for key, value in _facts(result)]
    lines += ["", *(f"> {note}" for note in result.notes), ""]
    for table in tables:
        lines += _markdown_table(table)
    return "\n".join(lines).rstrip() + "\n"


def _markdown_table(table: Table) -> list[str]:
    def escape(text: str) -> str:
        return text.replace("|", "\\|")  # a "|" in a name would split the cell

    def cell(i: int, j: int, text: str) -> str:
        return f"**{escape(text)}**" if (i, j) in table.best else escape(text)

    lines = [f"## {table.title}", ""]
    if not table.rows:
        return [*lines, "(nothing to show)", ""]
    lines.append("| " + " | ".join(escape(h) for h in table.headers) + " |")
    lines.append("|" + "|".join("---" for _ in table.headers) + "|")
    for i, row in enumerate(table.rows):
        lines.append("| " + " | ".join(cell(i, j, c) for j, c in enumerate(row)) + " |")
    if table.note:
        lines += ["", f"_{table.note}_"]
    return [*lines, ""]


# --- HTML ---------------------------------------------------------------------------------------

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
       max-width: 1100px; padding: 0 1rem; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #3b6ea8; padding-bottom: .3rem; }
h2 { margin-top: 2.2rem; color: #3b6ea8; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dl.facts dt { font-weight: 600; color: #555; } dl.facts dd { margin: 0; font-family: monospace; }
.note { background: #fff8e1; border-left: 4px solid #e0b000; padding: .5rem .8rem; }
table { border-collapse: collapse; margin: .5rem 0; font-size: .92rem; }
th, td { border-bottom: 1px solid #ddd; padding: .3rem .7rem; text-align: right; }
th { background: #f3f6fa; } td:first-child, th:first-child { text-align: left; }
tr:hover td { background: #fafafa; } td.best { font-weight: 700; color: #1b5e20; }
td.pass { color: #1b5e20; } td.fail { color: #b71c1c; font-weight: 600; }
p.caption { color: #666; font-size: .88rem; margin-top: 0; }
figure { margin: 1rem 0; } figure img { max-width: 100%; border: 1px solid #eee; }
"""


def render_html(result: EvalResult, tables: list[Table]) -> str:
    """The report as one self-contained HTML page (charts inlined as base64 PNG)."""
    from pgcite.evaluate._plots import charts  # matplotlib is slow to import; only HTML needs it

    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>pgcite evaluation: {esc(result.golden.name)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Evaluation: {esc(result.golden.name)}</h1>",
        '<dl class="facts">',
        *(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in _facts(result)),
        "</dl>",
        *(f'<p class="note">{esc(note)}</p>' for note in result.notes),
    ]
    for title, png in charts(result).items():
        parts += [
            f"<h2>{esc(title)}</h2>",
            f'<figure><img alt="{esc(title)}" src="data:image/png;base64,{png}"></figure>',
        ]
    for table in tables:
        parts += list(_html_table(table))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _html_table(table: Table) -> Iterator[str]:
    esc = html.escape
    yield f"<h2>{esc(table.title)}</h2>"
    if not table.rows:
        yield "<p>(nothing to show)</p>"
        return
    yield "<table><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in table.headers)
    yield "</tr></thead><tbody>"
    for i, row in enumerate(table.rows):
        cells = "".join(
            f"<td{_cell_class(table, i, j, c)}>{esc(c)}</td>" for j, c in enumerate(row)
        )
        yield f"<tr>{cells}</tr>"
    yield "</tbody></table>"
    if table.note:
        yield f'<p class="caption">{esc(table.note)}</p>'


def _cell_class(table: Table, i: int, j: int, text: str) -> str:
    if (i, j) in table.best:
        return ' class="best"'
    if text.startswith("PASS"):
        return ' class="pass"'
    if text.startswith("FAIL"):
        return ' class="fail"'
    return ""


def _facts(result: EvalResult) -> list[tuple[str, str]]:
    g = result.golden
    kinds = ", ".join(f"{kind} {n}" for kind, n in g.by_kind.items())
    facts = [
        ("golden set", f"{g.name} ({g.path})"),
        ("judgments sha256", g.sha256),
        ("queries", f"{g.queries} ({kinds}); {g.answerable} answerable"),
        ("k", str(result.k)),
        ("configurations", ", ".join(result.configurations)),
        ("source", result.source),
        ("created", result.created_at.isoformat(timespec="seconds")),
    ]
    return facts + [(str(k), str(v)) for k, v in result.metadata.items()]


# --- comparing two results ----------------------------------------------------------------------


def compare_results(a: Path, b: Path) -> str:
    """A text table of every figure, overall and per kind: A, B and B-A with an explicit sign.

    Configurations are paired by name; two single-configuration results are paired whatever
    their names. Safety counts and latency percentiles follow when both sides have them.
    """
    ra, rb = load_result(a), load_result(b)
    lines = [f"A: {a}  ({_describe(ra)})", f"B: {b}  ({_describe(rb)})"]
    if ra.golden.sha256 != rb.golden.sha256:
        lines.append("WARNING: different judgments (golden sha256 differs); deltas may mislead")
    if ra.k != rb.k:
        lines.append(f"WARNING: different k (A {ra.k}, B {rb.k})")
    pairs = _pairs(ra, rb)
    if not pairs:
        lines.append("No configuration in common.")
    for ca, cb in pairs:
        label = ca.name if ca.name == cb.name else f"{ca.name} (A) vs {cb.name} (B)"
        lines += ["", f"== {label} ==", *_compare_config(ra, ca, cb)]
    only_a = set(ra.configurations) - {ca.name for ca, _ in pairs}
    only_b = set(rb.configurations) - {cb.name for _, cb in pairs}
    if only_a:
        lines.append(f"\nonly in A: {', '.join(sorted(only_a))}")
    if only_b:
        lines.append(f"\nonly in B: {', '.join(sorted(only_b))}")
    return "\n".join(lines) + "\n"


def signed(delta: float, digits: int = 3) -> str:
    """``delta`` with an explicit sign; a difference that rounds to zero prints as ``+0.000``."""
    text = f"{delta:+.{digits}f}"
    return "+" + text[1:] if float(text) == 0 else text


def _describe(r: EvalResult) -> str:
    return f"{r.golden.name} sha256 {r.golden.sha256[:12]}, k={r.k}, {r.created_at:%Y-%m-%d %H:%M}"


def _pairs(ra: EvalResult, rb: EvalResult) -> list[tuple[ConfigResult, ConfigResult]]:
    common = [n for n in ra.configurations if n in rb.configurations]
    if common:
        return [(ra.configurations[n], rb.configurations[n]) for n in common]
    if len(ra.configurations) == 1 and len(rb.configurations) == 1:
        return [(next(iter(ra.configurations.values())), next(iter(rb.configurations.values())))]
    return []


def _compare_config(ra: EvalResult, ca: ConfigResult, cb: ConfigResult) -> list[str]:
    rows: list[tuple[str, str, str, str, str]] = []
    scopes = [("overall", ca.overall, cb.overall)] + [
        (kind, ca.by_kind.get(kind, {}), cb.by_kind.get(kind, {}))
        for kind in dict.fromkeys([*ca.by_kind, *cb.by_kind])
    ]
    for scope, fa, fb in scopes:
        for name in dict.fromkeys([*fa, *fb]):
            va, vb = fa.get(name), fb.get(name)
            delta = signed(vb - va) if va is not None and vb is not None else ""
            rows.append((scope, name, fmt(va), fmt(vb), delta))
    rows += _safety_rows(ca, cb) + _latency_rows(ca, cb)
    return _text_table(("scope", "figure", "A", "B", "B-A"), rows)


def _safety_rows(ca: ConfigResult, cb: ConfigResult) -> list[tuple[str, str, str, str, str]]:
    if ca.safety is None or cb.safety is None:
        return []
    ta, tb = ca.safety.total, cb.safety.total
    rows = []
    for field in ("cutoff_violations", "must_not_hits"):
        va, vb = int(getattr(ta, field)), int(getattr(tb, field))
        rows.append(("safety", field, str(va), str(vb), f"{vb - va:+d}"))
    return rows


def _latency_rows(ca: ConfigResult, cb: ConfigResult) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for stage in [s for s in ca.latency if s in cb.latency]:
        for p in ("p50", "p95"):
            va, vb = getattr(ca.latency[stage], p), getattr(cb.latency[stage], p)
            rows.append(("latency ms", f"{stage} {p}", fmt(va, 2), fmt(vb, 2), signed(vb - va, 2)))
    return rows


def _text_table(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]

    def line(row: tuple[str, ...]) -> str:
        left = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
        right = [c.rjust(w) for c, w in zip(row[2:], widths[2:], strict=True)]
        return "  ".join(left + right).rstrip()

    return [line(headers), line(tuple("-" * w for w in widths)), *(line(r) for r in rows)]
