"""Troubleshoot: the rules matched by the latest run failure, failed checks and telemetry
conditions, each with cause and fix, and an action that applies a rule's knob fix to the task."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import DataTable, Static

from engine import ENV_KNOBS, PlanError, TaskSpec, Tile, plan, rehearsed_fault
from tui import diagnostics
from tui.screens.base import CockpitScreen


def run_failure_text(result: Any) -> str | None:
    """The text to match rules against for a run that did not succeed (None for a good run)."""
    if result is None or result.ok:
        return None
    parts = [result.error or result.status.value]
    c = result.correctness
    if c is not None and (c.nan_count or c.inf_count):
        parts.append(f"NaN {c.nan_count} Inf {c.inf_count} in the output")
    return "\n".join(parts)


def knob_update(knob: Any) -> dict[str, Any]:
    """A rule's knob fix as task fields: {'memory_pipelining': 0}, 'MEMORY_PIPELINING=off', or
    'block_size=128x128' all work; unknown shapes give {}."""
    if isinstance(knob, dict):
        return {ENV_KNOBS.get(str(k).upper(), str(k).lower()): v for k, v in knob.items()}
    if isinstance(knob, str) and "=" in knob:
        update = {}
        for part in knob.replace(";", ",").split(","):
            key, _, val = part.partition("=")
            key = key.strip()
            if key:
                update[ENV_KNOBS.get(key.upper(), key.lower())] = val.strip()
        return update
    return {}


def tile_area(block_size: Any) -> int:
    """BM x BN of a BLOCK_SIZE (threads for a row-wise kernel); 1 where it is not a tile."""
    try:
        return Tile.parse(block_size).area
    except ValueError:
        return 1


def resolve_relative(update: dict[str, Any], task: TaskSpec, profile: Any) -> dict[str, Any]:
    """Turn a rule's 'smaller'/'larger' BLOCK_SIZE into the next tile that fits this profile."""
    want = update.get("block_size")
    if want not in ("smaller", "larger") or profile is None:
        return update
    try:
        p = plan(task, profile)
    except PlanError:
        return update
    current = str(p.task.block_size or "")
    options = sorted(p.block_size_options, key=tile_area)
    if want == "smaller":
        pick = [o for o in options if tile_area(o) < tile_area(current)][-1:]
    else:
        pick = [o for o in options if tile_area(o) > tile_area(current)][:1]
    out = dict(update)
    if pick:
        out["block_size"] = pick[0]
    else:
        out.pop("block_size")
    return out


def run_window(result: Any) -> tuple[float, float] | None:
    """(start, end) in epoch seconds of the last run, for rules that judge a GPU under load."""
    if result is None or not result.started_at or not result.wall_s:
        return None
    from datetime import datetime

    try:
        start = datetime.fromisoformat(result.started_at).timestamp()
    except ValueError:
        return None
    return start, start + result.wall_s


def as_rehearsal(rule: dict[str, Any], fault: str) -> dict[str, Any]:
    """A rule a rehearsed fault matched, said as such (issue 47, defect 11): how it reads when it
    fires, which tells nothing about this machine; its cause where it is real comes after."""
    return {**rule, "title": f"rehearsal: {rule.get('title') or rule.get('id')}",
            "cause": f"Injected on the simulated device ({fault}): this is how the rule reads when it fires, "
                     f"not a finding about this machine. Where it is real: {rule.get('cause') or '-'}"}


def collect_rules(app: Any) -> list[tuple[str, dict[str, Any]]]:
    """(source, rule) for every rule that matches the cockpit's current evidence."""
    out: list[tuple[str, dict[str, Any]]] = []
    result = app.last_result
    text = run_failure_text(result)
    src = "last run" if result is None or not result.run_id else f"run #{result.run_id}"
    rehearsal = None if result is None else rehearsed_fault(result)
    if text is not None:
        rules = [diagnostics.rule_view(r) for r in result.matched_rules] or diagnostics.rules_for_text(text)
        if rehearsal is not None:  # the injected fault did what it was asked: no finding about this machine
            src = src.replace("run", "rehearsal", 1)  # 'rehearsal #3': the table keeps room for the title
            rules = [as_rehearsal(r, rehearsal) for r in rules]
        out += [(src, r) for r in rules]
    elif result is not None:  # an ok run's findings (a knob choice far slower than others)
        out += [(src, diagnostics.rule_view(r)) for r in result.matched_rules]
    for check in app.check_results:
        v = diagnostics.check_view(check)
        if v["status"] in ("fail", "warn"):
            out += [(f"check {v['id']}", r) for r in diagnostics.rules_for_check(check)]
    out += [("telemetry", r) for r in diagnostics.rules_for_telemetry(app.telemetry.recent(), run_window(result))]
    return out


def evidence_words(app: Any) -> str:
    """What was looked at, said as it is: checks that never ran are not "fine"."""
    run = "no run yet" if app.last_result is None else "the last run looks fine"
    checks = {"not run": "the environment checks have not run (1 Checks, a runs them)",
              "running": "the environment checks are still running",
              "not available": f"the environment checks could not run ({app.checks_problem or 'unknown'})",
              }.get(app.checks_state, "the environment checks look fine")
    return f"{run}; {checks}; the telemetry looks fine"


class TroubleshootScreen(CockpitScreen):
    """Reads the app's last result, check results and telemetry; writes only ``app.task_spec``."""

    MODE = "troubleshoot"
    BINDINGS = [
        Binding("f", "apply_fix", "Apply fix", tooltip="Apply the highlighted rule's knob fix to the task"),
        Binding("u", "refresh_rules", "Refresh", tooltip="Match the rules against the latest evidence again"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.rules: list[tuple[str, dict[str, Any]]] = []

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="ts-body"):
            yield DataTable(id="ts-table", cursor_type="row")
            yield Static(id="ts-detail", classes="panel")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#ts-table", DataTable).add_columns("source", "rule")
        self.refresh_view()

    def refresh_view(self) -> None:
        """Match the rules again. The cursor goes to the rules of ``app.focus_rule_source`` when a
        screen asked for them (a check's enter), else stays on the rule it was on."""
        cur = self.current()
        keep = None if cur is None else (cur[0], cur[1].get("id"))
        self.rules = collect_rules(self.app)
        table = self.query_one("#ts-table", DataTable)
        table.clear()
        for i, (src, rule) in enumerate(self.rules):
            table.add_row(src, str(rule.get("title") or rule.get("id")), key=str(i))
        focus = self.app.focus_rule_source
        self.app.focus_rule_source = None
        wanted = [i for i, (src, rule) in enumerate(self.rules)
                  if (focus and src == focus) or (not focus and keep == (src, rule.get("id")))]
        if wanted:
            table.move_cursor(row=wanted[0], animate=False)
        if not self.rules:
            why = diagnostics.troubleshoot_available()
            msg = f"No rule matches: {evidence_words(self.app)}."
            if why:
                msg = f"Troubleshooting rules not available ({why})."
            self.query_one("#ts-detail", Static).update(Text(msg, style="dim"))
        else:
            self.show_detail()

    def checks_changed(self) -> None:
        """The app's checks finished (or started): match again."""
        self.refresh_view()

    def current(self) -> tuple[str, dict[str, Any]] | None:
        table = self.query_one("#ts-table", DataTable)
        if not self.rules or table.row_count == 0:
            return None
        return self.rules[min(table.cursor_row, len(self.rules) - 1)]

    def show_detail(self) -> None:
        cur = self.current()
        if cur is None:
            return
        src, r = cur
        text = Text()
        text.append(f"{r.get('id')}", style="bold")
        text.append(f"  from {src}\n", style="dim")
        text.append(f"{r.get('title') or ''}\n", style="bold")
        if r.get("cause"):
            text.append("cause: ", style="bold")
            text.append(f"{r['cause']}\n")
        if r.get("fix"):
            text.append("fix: ", style="bold green")
            text.append(f"{r['fix']}\n", style="green")
        if r.get("evidence"):
            text.append(f"evidence: {r['evidence']}\n", style="dim")
        if knob_update(r.get("knob")):
            text.append(f"f applies: {r['knob']}", style="yellow")
        self.query_one("#ts-detail", Static).update(text)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_detail()

    def action_refresh_rules(self) -> None:
        self.refresh_view()

    def action_apply_fix(self) -> None:
        cur = self.current()
        update = knob_update(cur[1].get("knob")) if cur else {}
        if update:
            update = resolve_relative(update, self.app.task_spec, self.app.effective_profile())
        if not update:
            self.notify("This rule has no knob fix to apply; its fix is in words.", severity="warning")
            return
        data = self.app.task_spec.model_dump(mode="json")
        data.update(update)
        data["fault"] = "none"
        try:
            self.app.task_spec = TaskSpec.model_validate(data)
        except ValidationError as exc:
            self.notify(f"Cannot apply {update}: {exc.errors()[0]['msg']}", severity="error")
            return
        shown = ", ".join(f"{k}={v}" for k, v in update.items())
        self.notify(f"Applied {shown} to the task; 4 Run, then r.", title="Knob fix")
