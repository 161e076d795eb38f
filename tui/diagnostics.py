"""A thin adapter over the engine's checks, troubleshooting rules and checklist.

Those engine modules may be missing in a partial install (or while they are being written): then
the cockpit says "not available" in place of the panel instead of failing. Everything here returns
plain dicts, so screens never depend on the engine's classes."""

from __future__ import annotations

import importlib
from typing import Any

RULE_KEYS = ("id", "title", "cause", "fix", "knob", "evidence")


class NotAvailable(Exception):
    """The engine module behind a panel is not installed; ``str()`` says which."""


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise NotAvailable(f"{name} is not available ({exc})") from None


def _as_dict(obj: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    if isinstance(obj, dict):
        d = dict(obj)
    elif hasattr(obj, "to_dict"):
        d = obj.to_dict()
    elif hasattr(obj, "model_dump"):
        d = obj.model_dump(mode="json")
    else:
        d = {k: getattr(obj, k, None) for k in keys}
    for k in keys:
        d.setdefault(k, None)
    return d


def rule_view(match: Any) -> dict[str, Any]:
    """A rule match as a dict with id, title, cause, fix, knob and evidence."""
    return _as_dict(match, RULE_KEYS)


# --- checks -----------------------------------------------------------------------------------
def run_checks(profile_name: str | None, only: list[str] | None = None) -> list[Any]:
    """The engine's environment checks (their result objects), all or ``only`` these ids.
    Raises NotAvailable."""
    mod = _module("engine.checks")
    fn = getattr(mod, "run_checks", None)
    if fn is None:
        raise NotAvailable("engine.checks has no run_checks yet")
    try:
        return list(fn(profile_name, only=only) if only else fn(profile_name))
    except ImportError as exc:  # a part of the checks (e.g. the rules) is not installed
        raise NotAvailable(f"engine.checks needs a missing module ({exc})") from None


def check_view(result: Any) -> dict[str, Any]:
    return _as_dict(result, ("id", "title", "status", "detail", "fix", "rules"))


# --- troubleshooting rules ---------------------------------------------------------------------
def _troubleshoot() -> Any:
    return _module("engine.troubleshoot")


def rules_for_text(text: str) -> list[dict[str, Any]]:
    try:
        return [rule_view(m) for m in _troubleshoot().match_text(text)]
    except NotAvailable:
        return []


def rules_for_check(result: Any) -> list[dict[str, Any]]:
    try:
        return [rule_view(m) for m in _troubleshoot().match_check(result)]
    except NotAvailable:
        return []


def rules_for_telemetry(samples: list[Any], run_window: tuple[float, float] | None = None) -> list[dict[str, Any]]:
    """Rules over the recent samples; ``run_window`` (start, end in epoch seconds) selects the
    samples taken during the last run, for rules that only mean something under load."""
    if not samples:
        return []
    try:
        rows = [s.to_dict() if hasattr(s, "to_dict") else dict(s) for s in samples]
        run_rows = None
        if run_window is not None:
            run_rows = [r for r in rows if r.get("t") is not None and run_window[0] <= r["t"] <= run_window[1]]
        return [rule_view(m) for m in _troubleshoot().match_telemetry(rows, run_rows)]
    except NotAvailable:
        return []


def troubleshoot_available() -> str | None:
    """None when the rules are available, else why not."""
    try:
        _troubleshoot()
    except NotAvailable as exc:
        return str(exc)
    return None


# --- the operators' checklist ------------------------------------------------------------------
def checklist_steps(store: Any) -> list[dict[str, Any]]:
    """The checklist's steps with their state (id, title, state 'done'/'todo', detail, next_action).
    Raises NotAvailable."""
    mod = _module("engine.checklist")
    steps = mod.Checklist(store).steps()
    out = []
    for st in steps:
        d = _as_dict(st, ("id", "title", "done", "detail", "next_action"))
        d["state"] = "done" if d.get("done") else "todo"
        out.append(d)
    return out


def record_checks(store: Any, results: list[Any]) -> None:
    """Let the checklist know how the checks went (its 'checks' step is derived from this)."""
    try:
        summary = _module("engine.checks").summary
        _module("engine.checklist").Checklist(store).record_checks(summary(results))
    except (NotAvailable, AttributeError):
        return
