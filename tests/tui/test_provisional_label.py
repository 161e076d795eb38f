"""The Profile screen marks a provisional profile (datasheet figures, never measured by this product
on that GPU) with a visible label, and a measured one without it."""

from __future__ import annotations

import io

from rich.console import Console
from textual.widgets import DataTable, Static

from engine import PROVISIONAL_LABEL


async def test_profile_screen_labels_a_provisional_profile(make):
    app = make()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        table = app.screen.query_one("#profile-table", DataTable)
        detail = app.screen.query_one("#profile-detail", Static)
        for name, labelled in (("b200", True), ("h200", False), ("l4", True)):
            table.move_cursor(row=table.get_row_index(name))
            await pilot.pause()
            console = Console(width=120, record=True, file=io.StringIO())
            console.print(detail.content)
            text = console.export_text()
            assert (PROVISIONAL_LABEL in text) is labelled, (name, text[:200])
