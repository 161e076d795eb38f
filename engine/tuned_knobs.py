"""The knobs a tune found fastest, as planning takes them: the one type the planner, the tuning cache
and the table of tuned defaults share, in its own module so that none of them imports another for it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TunedKnobs:
    """A tuning cache entry as planning uses it: the knobs a tune found fastest, and its label."""

    block_size: str
    memory_pipelining: int
    schedule: dict[str, Any] = field(default_factory=dict)
    label: str = "tuned"
    """How the cockpit and CLI name where the knobs came from, e.g. 'tuned YYYY-MM-DD, 12 candidates'."""
