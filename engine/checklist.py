"""The operators' checklist: the ordered steps from "is this machine sane?" to "result exported".

Each step's state is stored per host in the results store (ResultStore.put_state), so an operator
can stop and resume. Where the store already holds the evidence (a check summary, stored runs) the
state is derived from it; the other steps are marked by hand (`tui checklist --done STEP`).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel

STATE_PREFIX = "checklist."

STEPS: list[tuple[str, str, str]] = [
    ("checks", "Environment checks pass", "run `tui check` until nothing fails"),
    ("profile", "Hardware profile confirmed", "confirm it: `tui checklist --done profile --profile NAME`"),
    ("smoke", "Smoke kernel verified", "run a small verified kernel on the GPU: `tui bench --backend cuda`"),
    ("baseline", "Baseline benchmark recorded", "record a run for the profile: `tui bench --profile NAME`"),
    ("tuned", "Knobs tuned", "compare BLOCK_SIZE / MEMORY_PIPELINING / fusion choices, then "
                             "`tui checklist --done tuned`"),
    ("exported", "Result exported", "write a report: `tui report -o report.md`"),
]
"""(id, title, how to complete it), in order."""


class StepState(BaseModel):
    """One step's state for this host."""

    id: str
    """Step identifier (checks, profile, smoke, baseline, tuned, exported)."""
    title: str
    """What the step is."""
    done: bool
    """Whether it is complete."""
    source: str
    """'derived' (read off the store), 'manual' (marked by the operator) or 'none'."""
    detail: str = ""
    """The evidence, or what is missing."""
    next_action: str = ""
    """How to complete it (empty when done)."""
    updated_at: str | None = None
    """When the state was last stored (UTC, ISO 8601)."""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def step_ids() -> list[str]:
    return [s[0] for s in STEPS]


class Checklist:
    """The checklist of one host over one results store."""

    def __init__(self, store: Any, host: str | None = None) -> None:
        self.store = store
        self.host = host

    def _get(self, step: str, read: dict[str, Any] | None = None) -> dict[str, Any]:
        """The stored state of a step (from ``read``, the states read at once, where given); one
        that is not an object (edited by hand, written by something else) is an error naming it,
        never a step silently shown as not done."""
        value = (self.store.get_state(STATE_PREFIX + step, default={}, host=self.host) if read is None
                 else read.get(STATE_PREFIX + step, {})) or {}
        if not isinstance(value, dict):
            from engine.errors import InputError

            raise InputError(f"checklist step {step!r} of host {self.host or 'this host'} in the results store is "
                             f"{repr(value)[:60]}, not an object", fix=f"rewrite it: tui checklist --undo {step} (or --reset)")
        return value

    def _put(self, step: str, value: dict[str, Any]) -> None:
        self.store.put_state(STATE_PREFIX + step, value | {"updated_at": _now()}, host=self.host)

    def mark(self, step: str, done: bool = True, note: str = "", **extra: Any) -> None:
        """Mark a step done (or not) by hand; ``extra`` is kept with it (e.g. profile=...)."""
        if step not in step_ids():
            from engine.errors import InputError

            raise InputError(f"unknown checklist step {step!r}; steps: {', '.join(step_ids())}")
        failing = (self._get("checks").get("summary") or {}).get("fail", 0) if step == "checks" and done else 0
        if failing:
            from engine.errors import InputError

            raise InputError(f"checks: {failing} environment check(s) failed at the last check run: the step is "
                             "done when nothing fails", fix="fix them and run `tui check` (it ticks the step)")
        self._put(step, {"done": done, "source": "manual", "detail": note} | extra)

    def record_checks(self, summary: dict[str, int], statuses: dict[str, str] | None = None) -> None:
        """Called by `tui check`: the step is done when nothing failed. ``statuses`` (check id ->
        pass/warn/fail/skip) is kept for the exporter's per-check series."""
        self._put("checks", {"done": summary.get("fail", 0) == 0, "source": "derived", "summary": summary,
                             "statuses": dict(statuses or {}),
                             "detail": ", ".join(f"{v} {k}" for k, v in summary.items())})

    def confirmed_profile(self, read: dict[str, Any] | None = None) -> str | None:
        saved = self._get("profile", read)
        return saved.get("profile") if saved.get("done") else None

    def _runs(self, profile: str | None) -> list[Any]:
        """Stored runs on a real GPU; a store that cannot be read is an error, not "no runs" (which
        would mark done steps as not done and store that)."""
        return [r for r in self.store.list(profile=profile, limit=500, status="ok", kind="bench") if not r.simulated]

    def _derive(self, step: str, saved: dict[str, Any], profile: str | None) -> tuple[bool, str] | None:
        """(done, detail) read off the store, or None when the step is manual only; ``profile``:
        the confirmed one."""
        if step == "smoke":
            runs = [r for r in self._runs(None) if r.correct]
            return (True, f"verified run #{runs[0].id} ({runs[0].kernel}, {runs[0].gpu_name or '?'})") if runs else (
                False, "no verified run on a real GPU yet (simulated runs do not count)")
        if step == "baseline":
            runs = [r for r in self._runs(profile) if r.median_ms]
            where = f"profile {profile}" if profile else "any profile"
            if runs:
                return True, f"run #{runs[-1].id} on {where}: {runs[-1].median_ms:.4g} ms"
            sim = [r for r in self.store.list(profile=profile, limit=500, status="ok") if r.simulated]
            why = (f"; {len(sim)} SIMULATED run(s) stored do not count: a baseline guards a real GPU's "
                   "performance, which the simulated device does not measure") if sim else ""
            return False, f"no ok run on a real GPU stored for {where}{why}"
        if step == "tuned" and not saved.get("source") == "manual":
            tuned = [e for e in self.store.list_tuned() if not e["simulated"]]
            if tuned:
                return True, f"{len(tuned)} shape(s) tuned on {', '.join(sorted({e['gpu'] for e in tuned}))} (tui tune)"
            runs = self._runs(profile)
            combos = {(r.block_size, r.memory_pipelining, r.fusion) for r in runs}
            if len(combos) >= 2:
                return True, f"{len(combos)} knob combinations measured"
            return None
        return None

    def steps(self) -> list[StepState]:
        """Every step's state, in order; derived states are stored so a later resume sees them."""
        out = []
        read = self.store.get_states(STATE_PREFIX, host=self.host)  # one read for every step's state
        profile = self.confirmed_profile(read)
        for sid, title, how in STEPS:
            saved = self._get(sid, read)
            derived = self._derive(sid, saved, profile)
            if derived is not None:
                done, detail = derived
                if saved.get("source") == "manual" and saved.get("done") and not done:
                    done, detail, source = True, saved.get("detail") or "marked done by hand", "manual"
                else:
                    source = "derived"
                    if saved.get("done") != done or saved.get("detail") != detail:
                        self._put(sid, {"done": done, "source": "derived", "detail": detail})
                        saved = self._get(sid)
            else:
                done = bool(saved.get("done"))
                source = saved.get("source", "none") if saved else "none"
                detail = saved.get("detail", "") or ("" if done else "not done yet")
                if sid == "profile" and saved.get("profile"):
                    detail = f"profile {saved['profile']}" + (f" ({detail})" if detail and detail != "not done yet" else "")
            out.append(StepState(id=sid, title=title, done=done, source=source, detail=detail,
                                 next_action="" if done else how, updated_at=saved.get("updated_at")))
        return out

    def next_step(self) -> StepState | None:
        return next((s for s in self.steps() if not s.done), None)

    def reset(self) -> None:
        for sid in step_ids():
            self.store.put_state(STATE_PREFIX + sid, {}, host=self.host)
