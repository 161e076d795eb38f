"""What one environment check reports, and the shape every check function has."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from engine.checks.context import CheckContext

Status = Literal["pass", "warn", "fail", "skip"]

STATUS_ORDER = {"fail": 0, "warn": 1, "skip": 2, "pass": 3}
"""Worst first, for summaries."""


class CheckResult(BaseModel):
    """The outcome of one check: what was found and, when it is not a pass, how to fix it."""

    id: str
    """Stable identifier, e.g. 'driver.loaded'; rules in engine/rules.toml refer to it."""
    title: str
    """What the check looks at, in a few words."""
    status: Status
    """pass, warn (works, but distorts runs or will bite later), fail (runs will not work), or skip
    (the check could not apply here; ``detail`` says why)."""
    detail: str = ""
    """What was found, with the figures."""
    fix: str = ""
    """What to do about it, in words, with a command where one exists; empty on a pass."""
    rules: list[str] = Field(default_factory=list)
    """Ids of the troubleshooting rules this result matched (filled in by run_checks)."""

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


@dataclass(frozen=True)
class Check:
    """A registered check: its id and title, and the function that runs it."""

    id: str
    title: str
    fn: Callable[[CheckContext], tuple[Status, str, str]]
    """Returns (status, detail, fix); it must not raise for anything the environment can do."""

    def run(self, ctx: CheckContext) -> CheckResult:
        try:
            status, detail, fix = self.fn(ctx)
        except Exception as exc:  # a bug in a check must not hide the other checks
            status, detail, fix = "fail", f"the check itself failed: {type(exc).__name__}: {exc}", (
                "report this as a cockpit bug, with `tui check --json`")
        return CheckResult(id=self.id, title=self.title, status=status, detail=detail, fix=fix)


def ok(detail: str) -> tuple[Status, str, str]:
    return "pass", detail, ""


def skip(reason: str) -> tuple[Status, str, str]:
    return "skip", reason, ""


NO_DRIVER_SKIP = "no NVIDIA driver answers (see driver.loaded)"
"""The skip reason of every check that needs a GPU on a machine without a driver."""
