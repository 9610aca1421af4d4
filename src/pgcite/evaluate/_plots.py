"""Charts for the HTML report, as base64 PNG so the page stands alone.

matplotlib is used through :class:`~matplotlib.figure.Figure` directly, never pyplot: pyplot keeps
global state and may pick an interactive backend, while a bare Figure renders with Agg and is
garbage-collected like any object (safe in a server or a test run).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from pgcite.evaluate._result import PASS_RATE, EvalResult

_COLOURS = ["#3b6ea8", "#e07b39", "#4f9d69", "#c44e52", "#8172b3", "#937860", "#da8bc3"]


def charts(result: EvalResult) -> dict[str, str]:
    """Chart title -> base64 PNG, for whichever charts the result has data for."""
    out: dict[str, str] = {}
    k = result.k
    overall = [f"ndcg@{k}", f"recall@{k}", f"mrr@{k}", PASS_RATE]
    if figure := _grouped_metrics(result, overall):
        out["Metrics by configuration"] = _png(figure)
    if figure := _by_kind(result):
        out["By query kind"] = _png(figure)
    if figure := _latency(result):
        out["Latency per stage"] = _png(figure)
    return out


def _grouped_metrics(result: EvalResult, wanted: list[str]) -> Figure | None:
    configs = result.configurations
    metrics = [m for m in wanted if any(m in c.overall for c in configs.values())]
    if not metrics:
        return None
    fig = Figure(figsize=(max(6.0, 1.6 * len(metrics) * max(1, len(configs)) ** 0.5), 3.8))
    ax = fig.subplots()
    values = {name: [c.overall.get(m, 0.0) for m in metrics] for name, c in configs.items()}
    _bars(ax, metrics, values)
    ax.set_ylim(0, 1.05)
    ax.set_title(f"{result.golden.name}: overall")
    return fig


def _by_kind(result: EvalResult) -> Figure | None:
    panels = [f"ndcg@{result.k}", PASS_RATE]
    panels = [m for m in panels if _kinds_with(result, m)]
    if not panels:
        return None
    fig = Figure(figsize=(6.0 * len(panels), 3.8))
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    for ax, metric in zip(axes, panels, strict=True):
        kinds = _kinds_with(result, metric)
        values = {
            name: [c.by_kind.get(kind, {}).get(metric, 0.0) for kind in kinds]
            for name, c in result.configurations.items()
        }
        _bars(ax, kinds, values)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{metric} by query kind")
    return fig


def _latency(result: EvalResult) -> Figure | None:
    stages = list(
        dict.fromkeys(s for c in result.configurations.values() for s in c.latency_samples_ms)
    )
    if not stages:
        return None
    cols = min(3, len(stages))
    rows = -(-len(stages) // cols)
    fig = Figure(figsize=(4.2 * cols, 3.4 * rows))
    axes = np.atleast_1d(fig.subplots(rows, cols)).ravel()
    colour_of = {n: _COLOURS[i % len(_COLOURS)] for i, n in enumerate(result.configurations)}
    for ax, stage in zip(axes, stages, strict=False):
        names = [n for n, c in result.configurations.items() if c.latency_samples_ms.get(stage)]
        data = [result.configurations[n].latency_samples_ms[stage] for n in names]
        box = ax.boxplot(data, patch_artist=True, medianprops={"color": "black"})
        for patch, name in zip(box["boxes"], names, strict=True):
            patch.set_facecolor(colour_of[name])  # same colour as the bar charts
            patch.set_alpha(0.6)
        ax.set_xticks(range(1, len(names) + 1), names, rotation=20, ha="right")
        # Log scale: a few slow outliers on a shared machine would flatten every box otherwise.
        ax.set_yscale("log")
        ax.set_title(f"{stage} (ms, log scale)")
        ax.grid(axis="y", alpha=0.3)
    for ax in axes[len(stages) :]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def _kinds_with(result: EvalResult, metric: str) -> list[str]:
    return [
        kind
        for kind in result.kinds()
        if any(metric in c.by_kind.get(kind, {}) for c in result.configurations.values())
    ]


def _bars(ax: Axes, groups: Sequence[str], values: dict[str, list[float]]) -> None:
    """Grouped bars: one group per label in ``groups``, one bar per configuration."""
    x = np.arange(len(groups))
    width = 0.8 / max(1, len(values))
    for i, (name, heights) in enumerate(values.items()):
        offset = x + i * width - 0.4 + width / 2
        bars = ax.bar(offset, heights, width, label=name, color=_COLOURS[i % len(_COLOURS)])
        ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
    ax.set_xticks(x, list(groups))
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    # Below the axes: bars reach 1.0 and a legend inside would hide them.
    ax.legend(
        fontsize=8,
        frameon=False,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.1),
        ncol=min(4, len(values)),
    )


def _png(fig: Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")
