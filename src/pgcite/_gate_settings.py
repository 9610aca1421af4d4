"""How a collection's snapshots are judged: the activation gate's settings, stored in each
collection's settings (store) and applied by the gate's rules (pgcite.lifecycle). A low module,
so that store and the lifecycle share it without importing each other."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pgcite._errors import ConfigError
from pgcite._types import Mode

DEFAULT_FLOORS: dict[str, float] = {
    "pass_rate": 0.90,
    "precision@10": 0.70,
    "recall@10": 0.85,
    "mrr@10": 0.65,
}
DEFAULT_TOLERANCE = 0.02
REGRESSION_METRICS = ("pass_rate", "ndcg@10", "precision@10", "recall@10", "mrr@10")
HARD_METRIC = "cutoff_violations"

# The figures an EvalResult configuration reports (see pgcite.evaluate): floors may name these.
_METRIC = re.compile(r"^(pass_rate(_answerable|_absent)?|(ndcg|precision|recall|mrr)@[1-9]\d{0,2})$")


def check_metric_name(name: str) -> str:
    if not _METRIC.fullmatch(name):
        raise ConfigError(
            f"unknown metric {name!r} for a floor",
            hint="use pass_rate, pass_rate_answerable, pass_rate_absent, ndcg@K, precision@K, "
            "recall@K or mrr@K",
        )
    return name


class GateSettings(BaseModel):
    """How a collection's snapshots are judged (stored in its settings)."""

    model_config = ConfigDict(extra="forbid")

    floors: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_FLOORS))
    tolerance: float = Field(default=DEFAULT_TOLERANCE, ge=0.0, le=1.0)
    regression_metrics: list[str] = Field(default_factory=lambda: list(REGRESSION_METRICS))
    mode: Mode = "hybrid"
    threshold: float | None = Field(
        default=None, description="abstention threshold; None = calibrated on the golden set")
    k: int = Field(default=10, ge=1, le=100)
    depth: int = Field(default=100, ge=1, le=1000)

    @field_validator("floors")
    @classmethod
    def _floors(cls, floors: dict[str, float]) -> dict[str, float]:
        for name, value in floors.items():
            check_metric_name(name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"floor {name}={value} is not between 0 and 1")
        return floors

    @field_validator("regression_metrics")
    @classmethod
    def _regression(cls, names: list[str]) -> list[str]:
        return [check_metric_name(n) for n in names]
