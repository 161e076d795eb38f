"""Validating user-supplied regular expressions (profile name patterns, troubleshooting rules)."""

from __future__ import annotations

import re


def check_patterns(patterns: list[str]) -> list[str]:
    """Return ``patterns`` unchanged; ValueError naming the first one that does not compile."""
    for p in patterns:
        try:
            re.compile(p)
        except re.error as exc:
            raise ValueError(f"pattern {p!r} is not a valid regular expression: {exc}") from None
    return patterns
