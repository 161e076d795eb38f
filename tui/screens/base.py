"""What every cockpit screen shares: the banner (SIMULATED / no driver), the top bar (screens and
the profile in use), the footer, a wide layout class on large terminals, and pausing while hidden."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.markup import escape
from textual.screen import Screen
from textual.widgets import Static

from tui.screen_list import SCREENS, ScreenEntry
from tui.widgets.footer import CockpitFooter

WIDE_COLUMNS = 110
"""From this width on, screens lay out side by side (class ``-wide``)."""


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


class CockpitScreen(Screen):
    """Base class. Subclasses set ``MODE`` and implement ``compose_body`` and ``refresh_view``."""

    MODE = ""

    def compose(self) -> ComposeResult:
        yield Static(id="banner", classes="banner")
        with Horizontal(id="topbar"):
            yield Static(id="nav", classes="nav")
            yield Static(id="context", classes="nav")
        yield from self.compose_body()
        yield CockpitFooter()

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.refresh_chrome()

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        self.refresh_chrome()
        self.refresh_view()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width >= WIDE_COLUMNS, "-wide")
        self.refresh_chrome()

    def refresh_chrome(self) -> None:
        """Banner and top bar from the app's state (attributes down)."""
        app = self.app
        banner = self.query_one("#banner", Static)
        text, level = app.banner()
        banner.update(escape(text))
        banner.display = bool(text)
        banner.set_class(level == "error", "-error")
        width = self.size.width or app.size.width
        labels, context = nav_and_context(self.MODE, app.context_lines(), width)
        self.query_one("#nav", Static).update(render_nav(self.MODE, labels))
        self.query_one("#context", Static).update(escape(context) + " ")
        app.refresh_bindings()

    def refresh_view(self) -> None:
        """Re-read the app's state; called each time the screen is shown."""
