"""What every cockpit screen shares: the one-line status header (device, profile, a gauge of the GPU
in use, the last run or the work in flight: ``tui.widgets.status_line``), the top bar of screens,
the footer, a wide layout class on large terminals, and pausing while hidden.

Keys are modal as in k9s: a screen opens with focus on its main table (or on nothing), never in a
text field, so ``q``, ``?`` and the digits reach the cockpit; a field takes the keys only once the
user clicks or tabs into it, and ``esc`` always leaves it (focus goes back to the main table)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, Static

from tui.screen_list import SCREENS, ScreenEntry
from tui.widgets.footer import CockpitFooter
from tui.widgets.status_line import header_facts, render_status

if TYPE_CHECKING:
    from tui.app import CockpitApp

WIDE_COLUMNS = 110
"""From this width on, screens lay out side by side (class ``-wide``)."""
HEADER_S = 1.0
"""The header's gauge is redrawn this often while its screen is shown."""


def _labelled(current: str, labels: int) -> list[tuple[ScreenEntry, bool]]:
    """Each screen, and whether the top bar names it: the current one always, the others while
    ``labels`` last, in the list's order (the rest by their key alone)."""
    out, left = [], labels
    for s in SCREENS:
        if s.mode == current:
            out.append((s, True))
        else:
            out.append((s, left > 0))
            left -= 1
    return out


def nav_width(current: str, labels: int = len(SCREENS)) -> int:
    """Cells the navigation takes (see ``render_nav``)."""
    items = [f"{s.key} {s.label}" if named else s.key for s, named in _labelled(current, labels)]
    return 1 + sum(len(i) for i in items) + len(items) - 1 + 2


def render_nav(current: str, labels: int = len(SCREENS)) -> str:
    """The screens as markup: clickable, the current one highlighted and named, and ``labels`` of
    the others named in the list's order (fewer on narrow terminals), the rest by their key."""
    parts = []
    for s, named in _labelled(current, labels):
        if s.mode == current:
            parts.append(f"[bold reverse @click=app.switch_mode('{s.mode}')] {s.key} {s.label} [/]")
        else:
            parts.append(f"[@click=app.switch_mode('{s.mode}')]{f'{s.key} {s.label}' if named else s.key}[/]")
    return " " + " ".join(parts)


def nav_and_context(current: str, contexts: list[str], width: int) -> tuple[int, str]:
    """(how many other screens the top bar names, the context it shows): as many names as leave
    room for one of ``contexts`` (longest first), then the longest context that fits beside them;
    with no room at all, no names and the shortest context."""
    for labels in range(len(SCREENS), -1, -1):
        room = width - nav_width(current, labels) - 2
        fitting = [c for c in contexts if len(c) <= room]
        if fitting:
            return labels, fitting[0]
    return 0, contexts[-1]


def takes_keys(widget: Widget | None) -> bool:
    """Whether ``widget`` types the keys it gets (an Input, a Select searching as you type): then
    ``q`` or ``1`` would go into it, not to the cockpit."""
    return widget is not None and widget.check_consume_key("q", "q")


class CockpitScreen(Screen):
    """Base class. Subclasses set ``MODE`` and implement ``compose_body`` and ``refresh_view``."""

    MODE = ""
    AUTO_FOCUS = "DataTable"
    """Focus on arrival: the screen's first table (a screen without one focuses nothing). Never a
    text field: the keys must reach the cockpit until the user enters one."""
    BINDINGS = [
        Binding("escape", "leave_field", "Leave field", tooltip="Stop typing in the field: the keys work again"),
        Binding("slash", "filter", "Filter", key_display="/",
                tooltip="Filter the table's rows by the text typed (esc goes back to the table, the filter stays)"),
    ]
    FILTERABLE = False
    """Whether ``/`` filters the screen's main table (the screen applies ``filter_text`` when it fills it)."""
    filter_text = ""

    def compose(self) -> ComposeResult:
        yield Static(id="status", classes="status")
        with Horizontal(id="topbar"):
            yield Static(id="nav", classes="nav")
        yield from self.compose_body()
        if self.FILTERABLE:
            yield Input(id="table-filter", classes="filter", compact=True,
                        placeholder="filter: rows holding this text (esc: back to the table)")
        yield CockpitFooter()

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.refresh_chrome()
        self.set_interval(HEADER_S, self.refresh_status)
        if self.FILTERABLE:
            self.query_one("#table-filter", Input).display = False

    def action_filter(self) -> None:
        """``/``: the filter field, shown and focused."""
        field = self.query_one("#table-filter", Input)
        field.display = True
        field.focus()

    @on(Input.Changed, "#table-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        self.apply_filter()

    @on(Input.Submitted, "#table-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.action_leave_field()

    def apply_filter(self) -> None:
        """Refill the main table with the rows ``filter_text`` keeps (screens with ``FILTERABLE``)."""

    def refresh_status(self) -> None:
        """The one-line header from the app's state and the latest telemetry (only while shown)."""
        if not self.is_current:
            return
        app = cast("CockpitApp", self.app)
        found = self.query("#status").results(Static)
        status = next(found, None)
        if status is None:  # not composed yet: its mount draws it
            return
        width = self.size.width or app.size.width or 80
        status.update(render_status(header_facts(app), width))
        note = app.device_note()
        status.tooltip = note or None
        status.set_class(app.backend_problem is not None, "-error")

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        self.refresh_chrome()
        self.refresh_view()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width >= WIDE_COLUMNS, "-wide")
        self.refresh_chrome()

    def refresh_chrome(self) -> None:
        """Header and top bar from the app's state (attributes down)."""
        app = self.app
        self.refresh_status()
        width = self.size.width or app.size.width
        labels, _ = nav_and_context(self.MODE, [""], width)
        self.query_one("#nav", Static).update(render_nav(self.MODE, labels))
        app.refresh_bindings()

    def refresh_view(self) -> None:
        """Re-read the app's state; called each time the screen is shown."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "leave_field":
            return takes_keys(self.focused)
        if action == "filter":
            return self.FILTERABLE
        return True

    def main_widget(self) -> Widget | None:
        """Where focus goes when a field is left: the first shown table, else nothing."""
        return next((w for w in self.query(self.AUTO_FOCUS) if w.focusable), None) if self.AUTO_FOCUS else None

    def action_leave_field(self) -> None:
        """Leave the text field being typed in (``esc``): focus goes to the main table."""
        if takes_keys(self.focused):
            left = self.focused
            self.set_focus(self.main_widget())
            if left is not None and left.id == "table-filter" and not self.filter_text:
                left.display = False
