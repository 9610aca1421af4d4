"""The retrieval modes and fusions: the one place they are spelled out (MODES for messages).

Apart from :mod:`pgcite._types` (which re-exports them) so that the command line can name them
in its help without loading pydantic's models.
"""

from __future__ import annotations

from typing import Literal, get_args

from pgcite._errors import ConfigError

Mode = Literal["keyword", "vector", "hybrid"]
MODES: tuple[Mode, ...] = get_args(Mode)
Fusion = Literal["convex", "rrf"]
FUSIONS: tuple[Fusion, ...] = get_args(Fusion)
DEFAULT_FUSION: Fusion = "convex"


def parse_mode(value: str) -> Mode:
    """``value`` as a Mode (CLI and HTTP text), or a ConfigError naming the modes."""
    for mode in MODES:
        if value == mode:
            return mode
    raise ConfigError(f"unknown mode {value!r}", hint="use " + ", ".join(MODES))


def parse_fusion(value: str) -> Fusion:
    """``value`` as a Fusion, or a ConfigError naming the fusions."""
    for fusion in FUSIONS:
        if value == fusion:
            return fusion
    raise ConfigError(f"unknown fusion {value!r}", hint="use " + " or ".join(FUSIONS))
