"""The footer: the current screen's keys, then the cockpit's. When they do not all fit, the least
important are left out (they stay in ``?`` help and the command palette); help and quit never are.
While a text field takes the keys, ``?`` and ``q`` stay shown, dimmed (they type into the field
until ``esc`` leaves it, which the footer then offers first)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

ESSENTIAL = ("app.use_simulated", "app.help", "app.quit")
"""Actions whose keys the footer always shows (S only while it is offered)."""
DROP_FIRST = ("app.command_palette",)
"""Left out first when space is short; then the screen's own keys (last first), then the theme."""
DROP_LAST = ("app.toggle_theme",)


def key_width(key: FooterKey) -> int:
    """Cells a compact footer key takes: key, space, description, margin."""
    return len(key.key_display) + (1 + len(key.description) if key.description else 0) + 1


def fit_keys(keys: list[FooterKey], width: int) -> list[FooterKey]:
    """``keys`` with the least important left out until they fit in ``width`` cells."""
    keep = list(keys)

    def action(k: FooterKey) -> str:
        return k.action if "." in k.action else f"app.{k.action}"

    droppable = ([k for k in keep if action(k) in DROP_FIRST]
                 + [k for k in reversed(keep) if action(k) not in DROP_FIRST + DROP_LAST + ESSENTIAL]
                 + [k for k in keep if action(k) in DROP_LAST])
    while droppable and sum(key_width(k) for k in keep) > width:
        keep.remove(droppable.pop(0))
    return keep


class CockpitFooter(Footer):
    """A compact footer without the docked palette key (``ctrl+p`` is an ordinary key here)."""

    def __init__(self) -> None:
        super().__init__(compact=True, show_command_palette=False)

    def compose(self) -> ComposeResult:
        keys = [w for w in super().compose() if isinstance(w, FooterKey)]
        shown = {k.action for k in keys}
        for binding in self.app.BINDINGS:  # ? and q, hidden by a field that types them: dimmed
            if (isinstance(binding, Binding) and f"app.{binding.action}" in ESSENTIAL[1:]
                    and f"app.{binding.action}" not in shown and binding.action not in shown):
                keys.append(FooterKey(binding.key, self.app.get_key_display(binding), binding.description,
                                      f"app.{binding.action}", disabled=True,
                                      tooltip="esc first: the field takes this key now"
                                      ).data_bind(compact=Footer.compact))
        width = self.size.width or self.app.size.width
        yield from fit_keys(keys, width)

    def on_resize(self) -> None:
        self.call_after_refresh(self.recompose)
