"""The snapshot lifecycle: the activation gate's rules and the steps that apply them (evaluate a
snapshot, activate it through the gate, roll back, collect garbage). See docs/snapshots.md."""

from pgcite.lifecycle._activation import (
    ActivationResult,
    activate,
    evaluate_command,
    gate_ingest,
    gc,
    rollback,
)
from pgcite.lifecycle._gate import EvalSummary, GateRefused, Verdict

__all__ = [
    "ActivationResult",
    "EvalSummary",
    "GateRefused",
    "Verdict",
    "activate",
    "evaluate_command",
    "gate_ingest",
    "gc",
    "rollback",
]
