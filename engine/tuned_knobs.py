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
    shape: dict[str, int] | None = None
    """The shape the knobs were tuned at, for an entry of a table of tuned defaults (None: the task's own)."""
    label: str = "tuned"
    """How the cockpit and CLI name where the knobs came from, e.g. 'tuned on this GPU (YYYY-MM-DD, 12
    candidates)' or 'tuned table h200 (nearest 4096x4096x4096)'."""


TUNED_HERE_LABEL = "tuned on this GPU"
"""Knobs from the tuning cache: a tune of this very task on this GPU (``knobs_from`` starts with it)."""
TABLE_LABEL = "tuned table {name}"
"""Knobs lent by the table of tuned defaults of the profile's GPU model (the nearest shape follows)."""
RULES_LABEL = "rules for this profile"
"""Knobs from the kernel's own rules for the profile's figures: no tune and no table entry lent."""


def tuned_here(knobs_from: str | None) -> bool:
    """Whether a ``knobs_from`` says the knobs came from a tune of this task on this GPU (the tuning
    cache), not from a model's table, the rules or the task; results stored before the label named
    the GPU read 'tuned YYYY-MM-DD, ...'."""
    text = str(knobs_from or "")
    return text.startswith(TUNED_HERE_LABEL) or (text.startswith("tuned ") and not text.startswith("tuned table"))
