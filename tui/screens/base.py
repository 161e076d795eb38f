"""What every cockpit screen shares: the banner (SIMULATED / no driver), the top bar (screens and
the profile in use), the footer, a wide layout class on large terminals, and pausing while hidden."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.markup import escape
from textual.screen import Screen
from textual.widgets import Static

from tui.cli_options import NAV
from tui.widgets.footer import CockpitFooter

WIDE_COLUMNS = 110
"""From this width on, screens lay out side by side (class ``-wide``)."""


def nav_width(current: str, short: bool = False) -> int:
    """Cells the navigation takes (see ``render_nav``)."""
    items = [f"{key}" if short and mode != current else f"{key} {label}" for key, mode, label in NAV]
    return 1 + sum(len(i) for i in items) + len(items) - 1 + 2


def render_nav(current: str, short: bool = False) -> str:
    """The screens as markup: clickable, the current one highlighted; ``short``: only the current
    one named (for narrow terminals with a long context)."""
    parts = []
    for key, mode, label in NAV:
        if mode == current:
            parts.append(f"[bold reverse @click=app.switch_mode('{mode}')] {key} {label} [/]")
        else:
            text = key if short else f"{key} {label}"
            parts.append(f"[@click=app.switch_mode('{mode}')]{text}[/]")
    return " " + " ".join(parts)


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
        contexts = app.context_lines()
        short = not any(len(c) <= width - nav_width(self.MODE) - 2 for c in contexts)
        room = width - nav_width(self.MODE, short) - 2
        context = next((c for c in contexts if len(c) <= room), contexts[-1])
        self.query_one("#nav", Static).update(render_nav(self.MODE, short))
        self.query_one("#context", Static).update(escape(context) + " ")
        app.refresh_bindings()

    def refresh_view(self) -> None:
        """Re-read the app's state; called each time the screen is shown."""
