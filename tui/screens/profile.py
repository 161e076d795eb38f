"""Profile: built-in and user profiles; the detected device against the chosen profile with
mismatches highlighted; peaks and limits side by side."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import DataTable, Static

from engine import BUILTIN_DIR, PROVISIONAL_LABEL
from tui.screens.base import CockpitScreen

FIELDS = (
    ("compute_capability", "compute cap.", ""), ("sm_count", "SMs", ""),
    ("peak_tflops.bf16", "bf16 peak", "TFLOP/s"), ("peak_tflops.fp16", "fp16 peak", "TFLOP/s"),
    ("peak_tflops.fp32", "fp32 peak", "TFLOP/s"), ("memory_bandwidth_gbps", "DRAM B/W", "GB/s"),
    ("memory_gb", "memory", "GB"), ("l2_mb", "L2", "MB"),
    ("shared_memory_per_block_bytes", "smem/block", "B"), ("shared_memory_per_sm_bytes", "smem/SM", "B"),
    ("registers_per_sm", "regs/SM", ""), ("power_w", "power", "W"),
)


def field_value(profile: Any, path: str) -> Any:
    obj = profile
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return obj


def comparison(chosen: Any, detected: Any, device_name: str | None) -> Table:
    """Peaks and limits of the chosen profile next to the detected device's profile."""
    t = Table(box=None, pad_edge=False, header_style="bold")
    t.add_column("", no_wrap=True)
    t.add_column(chosen.name if chosen else "chosen", justify="right", no_wrap=True)
    t.add_column(detected.name if detected else "detected", justify="right", no_wrap=True)
    t.add_column("unit", style="dim", no_wrap=True)
    for path, label, unit in FIELDS:
        a = field_value(chosen, path) if chosen else None
        b = field_value(detected, path) if detected else None
        mismatch = detected is not None and chosen is not None and a != b
        t.add_row(label, "-" if a is None else f"{a:,}" if isinstance(a, (int, float)) else str(a),
                  "-" if b is None else f"{b:,}" if isinstance(b, (int, float)) else str(b), unit,
                  style="bold red" if mismatch else "")
    return t


class ProfileScreen(CockpitScreen):
    """Choosing a profile sets ``app.profile_name``; runs and the Tune limits follow it."""

    MODE = "profile"
    BINDINGS = [
        Binding("u", "use_profile", "Use profile", tooltip="Use the highlighted profile for runs"),
        Binding("a", "auto_profile", "Auto-detect", tooltip="Detect the profile from the device again"),
    ]

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="profile-body"):
            yield DataTable(id="profile-table", cursor_type="row", zebra_stripes=False)
            yield Static(id="profile-detail", classes="panel")
        yield Static(id="profile-status")

    def on_mount(self) -> None:
        super().on_mount()
        table = self.query_one("#profile-table", DataTable)
        table.add_columns("name", "origin", "cc")
        for name in self.app.profiles.names():
            prof = self.app.profiles.profiles[name]
            origin = self.app.profiles.origins.get(name)
            kind = "built-in" if origin is not None and origin.parent == BUILTIN_DIR else "user"
            table.add_row(name, "measured" if prof.measured else kind, prof.compute_capability, key=name)
        self.cursor_to_in_use()
        self.refresh_view()

    def cursor_to_in_use(self) -> None:
        """Put the cursor on the profile runs use (the one the top bar names)."""
        chosen = self.app.effective_profile()
        table = self.query_one("#profile-table", DataTable)
        if chosen is not None and chosen.name in self.app.profiles.profiles:
            table.move_cursor(row=table.get_row_index(chosen.name), animate=False)

    def detected(self) -> tuple[str | None, Any]:
        choice = self.app.backend_choice
        device = choice.device_name if choice else None
        return device, (self.app.profiles.detect(device) if device else None)

    def highlighted(self) -> str | None:
        table = self.query_one("#profile-table", DataTable)
        if table.row_count == 0:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def refresh_view(self) -> None:
        device, detected = self.detected()
        chosen = self.app.effective_profile()
        shown = self.app.profiles.profiles.get(self.highlighted() or "") or chosen
        status = Text()
        status.append("device: ", style="bold")
        status.append(device or ("SIMULATED (no device to detect)" if self.app.simulated else "none"))
        status.append("  detected profile: ", style="bold")
        status.append(detected.name if detected else "-")
        status.append("  in use: ", style="bold")
        status.append(chosen.name if chosen else "none")
        status.append(f" ({self.app.profile_source()})", style="dim")
        if detected and chosen and chosen.name != detected.name and chosen.base_profile != detected.name:
            status.append("  MISMATCH: SOL figures use the chosen profile's peaks", style="bold red")
        for err in self.app.profiles.errors:
            status.append(f"\nskipped: {err}", style="red")
        self.query_one("#profile-status", Static).update(status)
        detail = Text()
        if shown is not None:
            detail.append(f"{shown.display_name}\n", style="bold")
            if shown.provisional:
                detail.append(f"{PROVISIONAL_LABEL}\n", style="bold yellow")
            detail.append(f"{shown.source}\n", style="dim")
        self.query_one("#profile-detail", Static).update(_stack(detail, comparison(shown, detected, device)))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.refresh_view()

    def action_use_profile(self) -> None:
        name = self.highlighted()
        if name:
            self.app.profile_name = name
            self.refresh_chrome()
            self.refresh_view()
            self.notify(f"Runs use profile {name}.", title="Profile")

    def action_auto_profile(self) -> None:
        self.app.profile_name = None
        self.cursor_to_in_use()
        self.refresh_chrome()
        self.refresh_view()
        chosen = self.app.effective_profile()
        self.notify(f"Runs use profile {chosen.name if chosen else 'none'} ({self.app.profile_source()}).",
                    title="Profile")


def _stack(*renderables: Any) -> Table:
    grid = Table.grid()
    for r in renderables:
        grid.add_row(r)
    return grid
