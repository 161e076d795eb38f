"""Checklist: the operators' checklist with each step's state, and the environment checks with
status, detail and fix; re-run them; a failed check opens its troubleshooting rules."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static

from tui import diagnostics
from tui.screens.base import CockpitScreen
from tui.widgets.fit_table import Column, fill_table, matches

STATUS_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim",
                "done": "green", "todo": "", "blocked": "red"}


SEVERITY = {"fail": 0, "warn": 1, "skip": 2, "pass": 3}
"""Order of the checks table sorted by severity."""


def status_cell(status: str | None) -> Text:
    s = str(status or "?")
    return Text(s.upper() if s in ("fail", "warn") else s, style=STATUS_STYLE.get(s, ""))


CHECK_COLUMNS = (Column("status", "status", key_figure=True), Column("check", "check", min_width=12))
"""The checks table: the status is never cut; a long title is cut with an ellipsis (in full below)."""


class ChecklistScreen(CockpitScreen):
    """Runs the engine's checks in a worker; keeps the results on the app for other screens."""

    MODE = "checklist"
    AUTO_FOCUS = "#checks-table"
    FILTERABLE = True
    BINDINGS = [
        Binding("a", "run_all", "Re-run all", tooltip="Run every environment check again"),
        Binding("r", "run_one", "Re-run check", tooltip="Run the highlighted check again"),
        Binding("enter", "open_rules", "Rules", tooltip="Open the troubleshooting rules of the highlighted check"),
        Binding("s", "sort_checks", "Sort", tooltip="Sort the checks by severity (failures first) or run order"),
        Binding("f", "filter_checks", "Filter", tooltip="Show every check, or only those that fail or warn"),
        Binding("x", "tick_step", "Tick step", tooltip="Mark the highlighted checklist step done (or not done again)"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.steps: dict[str, dict[str, Any]] = {}
        self.checks_sort = "order"
        """'order' (as the checks ran) or 'severity' (fail, warn, skip, pass)."""
        self.checks_filter = "all"
        """'all' or 'problems' (fail and warn only)."""

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="check-body"):
            with Vertical(id="check-left"):
                yield Static("Checklist", classes="heading")
                yield DataTable(id="steps-table", cursor_type="row")
            with Vertical(id="check-right"):
                yield Static("Environment checks", classes="heading", id="checks-heading")
                yield DataTable(id="checks-table", cursor_type="row")
        yield Static(id="check-detail", classes="panel")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#steps-table", DataTable).add_columns("step", "state")
        self.checks_changed()

    def refresh_view(self) -> None:
        self.checks_changed()

    def apply_filter(self) -> None:
        self.show_checks(self.app.check_results, self.app.checks_problem)

    def on_resize(self, event) -> None:
        super().on_resize(event)
        self.call_after_refresh(self.apply_filter)

    # --- checks (the app runs them: ``CockpitApp.run_checks``) ---------------------------------
    def checks_changed(self) -> None:
        """The checks as the app holds them: results, running, or not run yet."""
        app = self.app
        if app.checks_state == "running" and not app.check_results:
            self.show_checks([], "running the environment checks...")
        elif app.checks_state == "not run":
            self.show_checks([], "checks not run yet: press a")
        else:
            self.show_checks(app.check_results, app.checks_problem)
            if app.checks_state == "running":
                self.query_one("#check-detail", Static).update(Text("Running the checks again...", style="yellow"))
        self.show_steps()

    def action_run_all(self) -> None:
        self.query_one("#check-detail", Static).update(Text("Running the environment checks...", style="yellow"))
        self.app.run_checks()

    def action_run_one(self) -> None:
        cid = self.highlighted_check()
        if cid is None:
            self.action_run_all()
            return
        self.query_one("#check-detail", Static).update(Text(f"Running {cid}...", style="yellow"))
        self.app.run_checks(cid)

    def action_sort_checks(self) -> None:
        self.checks_sort = "severity" if self.checks_sort == "order" else "order"
        self.show_checks(self.app.check_results, None)

    def action_filter_checks(self) -> None:
        self.checks_filter = "problems" if self.checks_filter == "all" else "all"
        self.show_checks(self.app.check_results, None)

    def show_checks(self, results: list[Any], problem: str | None) -> None:
        table = self.query_one("#checks-table", DataTable)
        keep = self.highlighted_check()
        table.clear()
        views = [diagnostics.check_view(r) for r in results]
        if self.checks_filter == "problems":
            views = [v for v in views if v["status"] in ("fail", "warn")]
        if self.checks_sort == "severity":
            views.sort(key=lambda v: SEVERITY.get(v["status"], len(SEVERITY)))
        cells = [(status_cell(v["status"]), Text(v["title"] or v["id"])) for v in views]
        kept = [(v, c) for v, c in zip(views, cells, strict=True) if matches((*c, v["id"]), self.filter_text)]
        views = [v for v, _ in kept]
        width = table.size.width or self.size.width or self.app.size.width
        fill_table(table, CHECK_COLUMNS, [c for _, c in kept], width, [v["id"] for v in views])
        ids = [v["id"] for v in views]
        if keep in ids:
            table.move_cursor(row=ids.index(keep), animate=False)
        detail = self.query_one("#check-detail", Static)
        heading = Text("Environment checks", style="bold")
        if results and (self.checks_sort != "order" or self.checks_filter != "all" or self.filter_text):
            heading.append(f" ({len(views)} of {len(results)} · sort {self.checks_sort} · "
                           f"show {self.checks_filter}" + (f" · /{self.filter_text}" if self.filter_text else "")
                           + ")", style="dim")
        if problem:
            heading.append(f": {problem}", style="yellow")
            detail.update(Text(problem, style="yellow"))
        elif results:
            self.show_detail()
        self.query_one("#checks-heading", Static).update(heading)

    def highlighted_check(self) -> str | None:
        table = self.query_one("#checks-table", DataTable)
        if table.row_count == 0:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def check_by_id(self, cid: str | None) -> Any:
        for r in self.app.check_results:
            if diagnostics.check_view(r)["id"] == cid:
                return r
        return None

    def show_detail(self) -> None:
        r = self.check_by_id(self.highlighted_check())
        if r is None:
            return
        v = diagnostics.check_view(r)
        text = Text()
        text.append(f"{v['id']}  ", style="bold")
        text.append_text(status_cell(v["status"]))
        text.append(f"\n{v['detail'] or ''}")
        if v["fix"]:
            text.append(f"\nfix: {diagnostics.cockpit_fix(v['fix'], self.app.simulated)}", style="green")
        if v["rules"]:
            text.append(f"\nrules: {', '.join(v['rules'])}  (enter opens them)", style="dim")
        self.query_one("#check-detail", Static).update(text)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "checks-table":
            self.show_detail()
        elif event.data_table.id == "steps-table" and event.data_table.has_focus and event.row_key is not None:
            step = self.steps.get(str(event.row_key.value))
            if step:
                text = Text(f"{step.get('title')}: ", style="bold")
                text.append(str(step.get("detail") or ""))
                if step.get("next_action"):
                    text.append(f"\nnext: {step['next_action']}", style="green")
                self.query_one("#check-detail", Static).update(text)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "checks-table":
            self.action_open_rules()

    def action_open_rules(self) -> None:
        cid = self.highlighted_check()
        if cid is None:
            return
        self.app.focus_rule_source = f"check {cid}"
        self.app.switch_mode("troubleshoot")

    # --- checklist steps -----------------------------------------------------------------------
    def action_tick_step(self) -> None:
        """Toggle the highlighted step by hand (the steps table must have the cursor: tab to it)."""
        table = self.query_one("#steps-table", DataTable)
        detail = self.query_one("#check-detail", Static)
        if table.row_count == 0:
            return
        if self.focused is not table:  # the step under a cursor the user cannot see is not the one meant
            detail.update(Text("x ticks a checklist step: Tab to the steps table, pick the step, then x",
                               style="yellow"))
            return
        sid = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        step = self.steps.get(sid) or {}
        done = step.get("state") != "done"
        failing = [diagnostics.check_view(r)["id"] for r in self.app.check_results
                   if diagnostics.check_view(r)["status"] == "fail"]
        if done and sid == "checks" and failing:
            detail.update(Text(f"checks: not ticked, {len(failing)} checks fail ({', '.join(failing[:3])}); "
                               "fix them and re-run (a).", style="yellow"))
            return
        try:
            diagnostics.tick_step(self.app.store, sid, done, self.app.profile_name)
        except Exception as exc:
            detail.update(Text(f"could not tick {sid}: {exc}", style="red"))
            return
        self.show_steps()
        table.move_cursor(row=list(self.steps).index(sid) if sid in self.steps else 0)
        state = (self.steps.get(sid) or {}).get("state")
        if done and state != "done":
            msg = Text(f"{sid}: ticked, but the step is derived from the store and stays to do", style="yellow")
        else:
            msg = Text(f"{sid}: {'done (ticked by hand)' if done else 'not done'}", style="green" if done else "")
        detail.update(msg)

    def show_steps(self) -> None:
        table = self.query_one("#steps-table", DataTable)
        table.clear()
        try:
            steps = diagnostics.checklist_steps(self.app.store)
        except diagnostics.NotAvailable:
            steps = self.fallback_steps()
        except Exception as exc:
            steps = [{"id": "error", "title": f"checklist failed: {exc}", "state": "fail"}]
        self.steps = {str(s.get("id")): s for s in steps}
        for s in steps:
            table.add_row(str(s.get("title") or s.get("id")), status_cell(s.get("state")), key=str(s.get("id")))

    def fallback_steps(self) -> list[dict[str, Any]]:
        """The flow's own steps, derived from the cockpit's state, while engine.checklist is missing."""
        app = self.app
        checks = [diagnostics.check_view(r)["status"] for r in app.check_results]
        last = app.last_result
        return [
            {"id": "checks", "title": "Environment checks pass",
             "state": "todo" if not checks else ("fail" if "fail" in checks else "done")},
            {"id": "profile", "title": "Profile matches the device",
             "state": "done" if app.effective_profile() is not None else "todo"},
            {"id": "task", "title": "Task validated (3 Tune)", "state": "done"},
            {"id": "run", "title": "Kernel runs and verifies (4 Run)",
             "state": "todo" if last is None else ("done" if last.ok else "fail")},
        ]
