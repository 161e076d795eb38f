"""The checks' context for `tui check` on one GPU and on every GPU: one factory, which the tests
replace (``monkeypatch.setattr(check_context, "make_context", ...)``) with a fake NVML."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine import CheckContext


def make_context(profile: str | None) -> CheckContext:
    """The context the checks read the machine through, for the profile named (None: detected).
    ``engine.checks`` is imported here, not above: building the CLI's parser loads no check."""
    from engine import CheckContext

    return CheckContext(profile_name=profile)
