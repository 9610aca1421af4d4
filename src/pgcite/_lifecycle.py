"""Deprecated: the lifecycle moved to :mod:`pgcite.lifecycle` (with the gate's rules); the
public names are also exported by :mod:`pgcite`. This module goes in the next release."""

import warnings

from pgcite.lifecycle import (  # noqa: F401
    ActivationResult,
    activate,
    evaluate_command,
    gate_ingest,
    gc,
    rollback,
)
from pgcite.lifecycle._gate import GateRefused  # noqa: F401

warnings.warn("pgcite._lifecycle is deprecated: use pgcite.lifecycle (or pgcite.ActivationResult, "
              "pgcite.GateRefused)", DeprecationWarning, stacklevel=2)
