"""What every cockpit screen shares: the banner (SIMULATED / no driver), the navigation line,
the footer, a wide layout class on large terminals, and pausing while hidden."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.markup import escape
from textual.screen import Screen
from textual.widgets import Footer, Static

NAV = (("1", "checklist", "Checks"), ("2", "profile", "Profile"), ("3", "tune", "Tune"), ("4", "run", "Run"),
       ("5", "live", "Live"), ("6", "troubleshoot", "Diagnose"), ("7", "history", "History"))
"""(key, mode, label) of every screen, in the order of the operator's flow."""

WIDE_COLUMNS = 110
"""From this width on, screens lay out side by side (class ``-wide``)."""


def render_nav(current: str, context: str) -> str:
    """The navigation line as markup: clickable screen names, the current one highlighted, then
    the context (profile and backend)."""
    parts = []
    for key, mode, label in NAV:
        style = "bold reverse " if mode == current else ""
        parts.append(f"[{style}@click=app.switch_mode('{mode}')] {key} {label} [/]")
    return "".join(parts) + (f"  [dim]{escape(context)}[/]" if context else "")


class CockpitScreen(Screen):
    """Base class. Subclasses set ``MODE`` and implement ``compose_body`` and ``refresh_view``."""

    MODE = ""

    def compose(self) -> ComposeResult:
        yield Static(id="banner", classes="banner")
        yield Static(id="nav", classes="nav")
        yield from self.compose_body()
        yield Footer(compact=True)

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.refresh_chrome()

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        self.refresh_chrome()
        self.refresh_view()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width >= WIDE_COLUMNS, "-wide")

    def refresh_chrome(self) -> None:
        """Banner and navigation from the app's state (attributes down)."""
        app = self.app
        banner = self.query_one("#banner", Static)
        text, level = app.banner()
        banner.update(escape(text))
        banner.display = bool(text)
        banner.set_class(level == "error", "-error")
        self.query_one("#nav", Static).update(render_nav(self.MODE, app.context_line()))

    def refresh_view(self) -> None:
        """Re-read the app's state; called each time the screen is shown."""
