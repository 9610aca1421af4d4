"""The snapshot lifecycle: the activation gate's rules and the steps that apply them (evaluate a
snapshot, activate it through the gate, roll back, collect garbage). See docs/snapshots.md."""

from pgcite._gate_settings import HARD_METRIC
from pgcite.lifecycle._activation import (
    ActivationResult,
    activate,
    evaluate_command,
    gate_ingest,
    gc,
    rollback,
)
from pgcite.lifecycle._gate import (
    Check,
    EvalSummary,
    GateRefused,
    Verdict,
    apply_floors,
    floor_checks,
)

__all__ = [
    "HARD_METRIC",
    "ActivationResult",
    "Check",
    "EvalSummary",
    "GateRefused",
    "Verdict",
    "activate",
    "apply_floors",
    "evaluate_command",
    "floor_checks",
    "gate_ingest",
    "gc",
    "rollback",
]
