"""The cockpit app: state the screens read (attributes down), the telemetry sampler, and the
``run_app``/``make_app`` entry points shared by the console command, the tests and the GPU script."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from engine import (
    BackendChoice,
    CockpitError,
    ProfileSet,
    ResultStore,
    RunResult,
    TaskSpec,
    TelemetrySampler,
    choose_backend,
    load_profiles,
    nvml_sampler,
    resolve_profile,
    resolve_task,
    simulated_sampler,
    start_resource_tracker,
)
from tui.screens.base import NAV
from tui.screens.checklist import ChecklistScreen
from tui.screens.history import HistoryScreen
from tui.screens.live import LiveScreen
from tui.screens.profile import ProfileScreen
from tui.screens.run import RunScreen
from tui.screens.troubleshoot import TroubleshootScreen
from tui.screens.tune import TuneScreen


def with_fields(task: TaskSpec, **update: Any) -> TaskSpec:
    """A validated copy of ``task`` with ``update`` applied (model_copy would skip validation)."""
    return TaskSpec.model_validate({**task.model_dump(mode="json", exclude_none=True), **update})


THEMES = {"dark": "textual-dark", "light": "textual-light"}


class CockpitApp(App):
    """SOL Cockpit. Holds the shared state; each screen is a mode reached by keys 1-7."""

    CSS_PATH = "cockpit.tcss"
    TITLE = "SOL Cockpit"
    MODES = {
        "checklist": ChecklistScreen, "profile": ProfileScreen, "tune": TuneScreen, "run": RunScreen,
        "live": LiveScreen, "troubleshoot": TroubleshootScreen, "history": HistoryScreen,
    }
    BINDINGS = [
        *[Binding(key, f"switch_mode('{mode}')", label, tooltip=f"Show the {label} screen")
          for key, mode, label in NAV],
        Binding("ctrl+t", "toggle_theme", "Theme", tooltip="Switch between the light and dark theme"),
        Binding("S", "use_simulated", "Use sim", show=False,
                tooltip="Switch to the SIMULATED device (no GPU needed)"),
        Binding("q", "quit", "Quit", tooltip="Quit the cockpit"),
    ]

    def __init__(self, *, profile: str | None = None, backend: str = "auto", task_file: Path | None = None,
                 theme: str = "dark", telemetry: TelemetrySampler | None = None, start_telemetry: bool = True,
                 store: ResultStore | None = None, start_mode: str = "checklist",
                 backend_choice: BackendChoice | None = None, checks_on_start: bool = True) -> None:
        super().__init__()
        # Before Textual captures stderr: afterwards the engine's spawn could not start it.
        start_resource_tracker()
        self.animation_level = "none"
        self.theme = THEMES.get(theme, theme)
        self.start_mode = start_mode
        self.profile_name = profile
        """--profile as asked (None = detect from the device)."""
        self.requested_backend = backend
        self.startup_problems: list[str] = []
        """Things that went wrong while starting (bad task file, bad profiles): shown, never fatal."""
        self.checks_on_start = checks_on_start
        self.task_spec = self._load_task(task_file, backend)
        self.task_file = task_file
        self.profiles = self._load_profiles()
        if profile:
            try:
                self.profile_name = self.profiles.get(profile).name
            except CockpitError as exc:
                self.startup_problems.append(f"{exc.message} Using the detected profile instead.")
                self.profile_name = None
        self.backend_choice, self.backend_problem = self._choose_backend(backend, backend_choice)
        if self.backend_choice is not None and self.task_spec.backend.value != self.backend_choice.name:
            self.task_spec = with_fields(self.task_spec, backend=self.backend_choice.name)
        self.store = store or ResultStore()
        self.telemetry = telemetry or self._make_sampler()
        self.start_telemetry = start_telemetry
        self.last_result: RunResult | None = None
        self.previous_result: RunResult | None = None
        self.run_active = False
        self.runs_finished = 0
        """Runs that ended this session (any status): tests and scripts wait on it."""
        self.check_results: list[Any] = []
        """The engine's check results from the last check run (objects, for match_check)."""
        self.focus_rule_source: str | None = None
        """Set before switching to Troubleshoot, to select the rules of one source (e.g. a check id)."""

    # --- start-up ------------------------------------------------------------------------------
    def _load_task(self, task_file: Path | None, backend: str) -> TaskSpec:
        try:
            return resolve_task(task_file, overrides={"backend": backend})
        except CockpitError as exc:
            self.startup_problems.append(f"{exc.message}" + (f" Fix: {exc.fix}" if exc.fix else "")
                                         + " Using the default task.")
            return TaskSpec(backend=backend)

    def _load_profiles(self) -> ProfileSet:
        try:
            ps = load_profiles()
        except CockpitError as exc:
            self.startup_problems.append(exc.message)
            return ProfileSet()
        self.startup_problems.extend(f"profile skipped: {e}" for e in ps.errors)
        return ps

    def _choose_backend(self, backend: str, given: BackendChoice | None) -> tuple[BackendChoice | None, str | None]:
        if given is not None:
            return given, None
        try:
            return choose_backend(backend, self.task_spec.device), None
        except CockpitError as exc:
            return None, f"{exc.message}. Fix: {exc.fix}" if exc.fix else exc.message

    def _make_sampler(self) -> TelemetrySampler:
        if self.simulated:
            return simulated_sampler()
        return nvml_sampler()

    @property
    def simulated(self) -> bool:
        return self.backend_choice is not None and self.backend_choice.name == "sim"

    def on_mount(self) -> None:
        if self.start_telemetry:
            self.telemetry.start()
        else:
            self.telemetry.poll_once()
        self.switch_mode(self.start_mode)
        for problem in self.startup_problems:
            self.notify(problem, title="Start-up", severity="error", timeout=15)

    def on_unmount(self) -> None:
        self.telemetry.stop()

    # --- what the screens read ----------------------------------------------------------------
    def banner(self) -> tuple[str, str]:
        """(text, level) of the banner every screen shows; '' when there is nothing to say."""
        if self.backend_problem:
            return (f"No usable GPU: {self.backend_problem}  Press S to use the SIMULATED device.", "error")
        if self.simulated:
            notice = self.backend_choice.notice if self.backend_choice else None
            if notice:
                return (f"SIMULATED device: {notice}", "sim")
            return ("SIMULATED device: timings and telemetry are simulated, not measured on a GPU.", "sim")
        return ("", "")

    def context_line(self) -> str:
        prof = self.profile_name or "auto"
        backend = self.backend_choice.name if self.backend_choice else "none"
        return f"profile {prof} · {backend}"

    def effective_profile(self):
        """The profile runs will use: the asked one, else the detected one, else the sim default."""
        device = self.backend_choice.device_name if self.backend_choice else None
        try:
            prof, _, _ = resolve_profile(self.profiles, self.profile_name, device, self.simulated)
            return prof
        except CockpitError:
            return None

    def record_result(self, result: RunResult) -> None:
        self.previous_result, self.last_result = self.last_result, result

    # --- messages up ----------------------------------------------------------------------------
    def on_run_screen_started(self, message) -> None:
        self.run_active = True
        self.telemetry.set_run_active(True)

    def on_run_screen_finished(self, message) -> None:
        self.run_active = False
        self.telemetry.set_run_active(False)
        self.record_result(message.result)
        self.runs_finished += 1

    # --- actions --------------------------------------------------------------------------------
    def action_toggle_theme(self) -> None:
        self.theme = THEMES["light"] if self.theme == THEMES["dark"] else THEMES["dark"]

    def action_use_simulated(self) -> None:
        if self.simulated:
            return
        self.backend_choice = BackendChoice(name="sim", notice="switched to the SIMULATED device by the operator")
        self.backend_problem = None
        self.task_spec = with_fields(self.task_spec, backend="sim")
        self.telemetry.stop()
        self.telemetry = simulated_sampler()
        if self.start_telemetry:
            self.telemetry.start()
        if isinstance(self.screen, Screen) and hasattr(self.screen, "refresh_chrome"):
            self.screen.refresh_chrome()
            self.screen.refresh_view()
        self.notify("Using the SIMULATED device.", title="Backend")

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Every binding of the app and of the current screen, by its description."""
        yield from super().get_system_commands(screen)
        seen = set()
        for owner in (screen, self):
            for binding in getattr(owner, "BINDINGS", []):
                if not isinstance(binding, Binding) or binding.action in seen:
                    continue
                seen.add(binding.action)
                desc = binding.tooltip or binding.description
                yield SystemCommand(f"{binding.description} ({binding.key})", desc,
                                    lambda o=owner, a=binding.action: self.call_later(self.run_action, a, o))


def make_app(**kwargs: Any) -> CockpitApp:
    """The one factory for the console command, the tests and the GPU script."""
    return CockpitApp(**kwargs)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="tui", description="SOL Cockpit: open the terminal cockpit.")
    p.add_argument("--profile", help="hardware profile (default: detected from the GPU)")
    p.add_argument("--backend", choices=("auto", "cuda", "sim"), default=os.environ.get("SOL_BACKEND", "auto"),
                   help="auto: the GPU when a driver answers, else the simulated device")
    p.add_argument("--task", type=Path, help="a TOML task file to load into the Tune screen")
    p.add_argument("--theme", choices=("light", "dark"), default="dark")
    p.add_argument("--screen", choices=[m for _, m, _ in NAV], default="checklist", help="screen to open first")
    return p.parse_args(argv)


def run_app(argv: list[str] | None = None) -> int:
    """Open the cockpit; returns the exit code (2 for bad arguments)."""
    try:
        args = parse_args(list(argv or []))
    except SystemExit as exc:
        return int(exc.code or 0)
    app = make_app(profile=args.profile, backend=args.backend, task_file=args.task, theme=args.theme,
                   start_mode=args.screen)
    app.run()
    return int(app.return_code or 0)
