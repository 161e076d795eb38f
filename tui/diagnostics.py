"""The cockpit's view of the engine's checks, troubleshooting rules and checklist, as plain dicts
for the screens (which then never hold the engine's classes)."""

from __future__ import annotations

from typing import Any

from engine import Checklist, checks_summary, match_check, match_telemetry, match_text
from engine import run_checks as engine_run_checks

RULE_KEYS = ("id", "title", "cause", "fix", "knob", "evidence")
CHECK_KEYS = ("id", "title", "status", "detail", "fix", "rules")


class NotAvailable(Exception):
    """The checks could not run here (a part of them failed to load); ``str()`` says why."""


def _view(d: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {**{k: None for k in keys}, **d}


def rule_view(match: Any) -> dict[str, Any]:
    """A rule match (the engine's Match, or the dict a stored result carries) as a dict with id,
    title, cause, fix, knob and evidence. The fix ends with what the cockpit itself does about it
    (``engine_note``), which `tui diagnose` leaves out for a log from elsewhere."""
    raw = match if isinstance(match, dict) else match.to_dict()
    view = _view(raw, RULE_KEYS)
    if raw.get("engine_note"):
        view["fix"] = f"{view.get('fix') or ''} {raw['engine_note']}".strip()
    return view


# --- checks -----------------------------------------------------------------------------------
def run_checks(profile_name: str | None, only: list[str] | None = None) -> list[Any]:
    """The engine's environment checks (their result objects), all or ``only`` these ids.
    Raises NotAvailable when a part of them cannot be loaded."""
    try:
        return list(engine_run_checks(profile_name, only=only) if only else engine_run_checks(profile_name))
    except ImportError as exc:
        raise NotAvailable(f"the checks need a missing module ({exc})") from None


def check_view(result: Any) -> dict[str, Any]:
    return _view(result if isinstance(result, dict) else result.to_dict(), CHECK_KEYS)


def cockpit_fix(fix: str, simulated: bool) -> str:
    """A check's fix as the cockpit says it: the command-line hint to rehearse with
    ``--backend sim`` becomes the cockpit's key (S), or goes where the device is simulated already."""
    from engine import CHECK_SIM_HINT

    if CHECK_SIM_HINT not in fix:
        return fix
    if simulated:
        return fix.replace(f"; {CHECK_SIM_HINT}", "").replace(CHECK_SIM_HINT, "").strip()
    return fix.replace(CHECK_SIM_HINT, "or press S to rehearse on the SIMULATED device")


# --- troubleshooting rules ---------------------------------------------------------------------
def rules_for_text(text: str) -> list[dict[str, Any]]:
    return [rule_view(m) for m in match_text(text)]


def rules_for_check(result: Any) -> list[dict[str, Any]]:
    return [rule_view(m) for m in match_check(result)]


def rules_for_telemetry(samples: list[Any], run_window: tuple[float, float] | None = None) -> list[dict[str, Any]]:
    """Rules over the recent samples; ``run_window`` (start, end in epoch seconds) selects the
    samples taken during the last run, for rules that only mean something under load."""
    if not samples:
        return []
    rows = [s.to_dict() if hasattr(s, "to_dict") else dict(s) for s in samples]
    run_rows = None
    if run_window is not None:
        run_rows = [r for r in rows if r.get("t") is not None and run_window[0] <= r["t"] <= run_window[1]]
    return [rule_view(m) for m in match_telemetry(rows, run_rows)]


def troubleshoot_available() -> str | None:
    """None: the rules ship with the engine (kept for the panel's message)."""
    return None


# --- the operators' checklist ------------------------------------------------------------------
def checklist_steps(store: Any) -> list[dict[str, Any]]:
    """The checklist's steps with their state (id, title, state 'done'/'todo', detail, next_action)."""
    out = []
    for st in Checklist(store).steps():
        d = _view(st if isinstance(st, dict) else st.model_dump(mode="json"),
                  ("id", "title", "done", "detail", "next_action"))
        d["state"] = "done" if d.get("done") else "todo"
        out.append(d)
    return out


def tick_step(store: Any, step: str, done: bool, profile: str | None = None) -> None:
    """Mark a checklist step done (or not) by hand, as `tui checklist --done/--undo` does; ticking
    'profile' confirms the profile in use."""
    extra = {"profile": profile} if step == "profile" and done and profile else {}
    Checklist(store).mark(step, done=done, note="ticked in the cockpit" if done else "", **extra)


def record_checks(store: Any, results: list[Any]) -> None:
    """Let the checklist know how the checks went (its 'checks' step is derived from this)."""
    Checklist(store).record_checks(checks_summary(results),
                                   {check_view(r)["id"]: check_view(r)["status"] for r in results})
