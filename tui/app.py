"""The cockpit app: state the screens read (attributes down), the telemetry sampler, the work in
flight (cancelled when the cockpit quits), and the ``run_app``/``make_app`` entry points shared by
the console command, the tests and the GPU script."""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from textual.app import ScreenStackError, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from engine import (
    BackendChoice,
    CockpitError,
    ProfileSet,
    ResultStore,
    RunResult,
    SimulatedSource,
    TaskSpec,
    TelemetrySampler,
    choose_backend,
    load_profiles,
    nvml_sampler,
    resolve_profile,
    resolve_task,
    sim_device_count,
    simulated_sampler,
    start_engine_server,
)
from tui.app_work import BackgroundWork
from tui.cli_options import THEMES, combine, parse_args
from tui.preferences import Preferences, PreferencesFile
from tui.screen_list import MODES as SCREEN_MODES
from tui.screen_list import SCREENS, entry
from tui.widgets.status_line import run_status_word


def with_fields(task: TaskSpec, **update: Any) -> TaskSpec:
    """A validated copy of ``task`` with ``update`` applied (model_copy would skip validation)."""
    return TaskSpec.model_validate({**task.model_dump(mode="json", exclude_none=True), **update})


TEXTUAL_THEMES = {"dark": "textual-dark", "light": "textual-light"}
PALETTE_SKIP = {"Quit", "Theme", "Keys"}
"""Textual's own palette commands that a cockpit key already offers (q, ctrl+t, ?)."""


def screen_class(mode: str) -> type[Screen]:
    """The class of a mode's screen, its module imported on first use: which screens the cockpit
    has, their keys and order are the list's (``tui.screen_list.SCREENS``)."""
    found = entry(mode)
    if found is None:
        raise KeyError(mode)
    module, name = found.screen_path
    cls = getattr(importlib.import_module(module), name)
    assert cls.MODE == mode, (cls, mode)
    return cls


def _new_screen(mode: str) -> Callable[[], Screen]:
    """The mode's factory for Textual's ``MODES``: the screen's module is imported when the mode
    is first shown, not when the cockpit starts (its first frame waits for one screen only)."""
    return lambda: screen_class(mode)()

PREFERENCE_CHOICES = {"theme": THEMES, "screen": SCREEN_MODES}
"""The values the preferences file may hold for a key; another is reported and the file left alone."""


class CockpitApp(BackgroundWork):
    """SOL Cockpit. Holds the shared state; each screen is a mode reached by its number key
    (``tui.screen_list``)."""

    CSS_PATH = "cockpit.tcss"
    TITLE = "SOL Cockpit"
    MODES = {s.mode: _new_screen(s.mode) for s in SCREENS}
    BINDINGS = [
        *[Binding(s.key, f"switch_mode('{s.mode}')", f"Go to {s.label}", show=False, tooltip=s.tooltip)
          for s in SCREENS],
        Binding("S", "use_simulated", "Use sim", tooltip="Switch to the SIMULATED device (no GPU needed)"),
        Binding("ctrl+t", "toggle_theme", "Theme", tooltip="Switch between the light and dark theme"),
        Binding("ctrl+p", "command_palette", "Palette", priority=True,
                tooltip="Open the command palette: every key by name"),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="Show the keys of this screen"),
        Binding("j", "jobs", "Jobs", show=False,
                tooltip="Runs, tunes and soaks in flight and recent: status, elapsed (x cancels one)"),
        Binding("q", "quit", "Quit", tooltip="Quit the cockpit (asks first while a run or a tune is in flight)"),
    ]

    def __init__(self, *, profile: str | None = None, backend: str = "auto", task_file: Path | None = None,
                 theme: str = "dark", telemetry: TelemetrySampler | None = None, start_telemetry: bool = True,
                 store: ResultStore | None = None, start_mode: str = "checklist",
                 backend_choice: BackendChoice | None = None, checks_on_start: bool = True,
                 task: dict[str, Any] | None = None, preferences: PreferencesFile | None = None) -> None:
        """``task``: a saved task (used without ``task_file``); ``preferences``: the file read at
        start, written when the cockpit quits (None: nothing is remembered)."""
        super().__init__()
        # Before Textual captures stderr: afterwards the resource tracker could not start.
        start_engine_server()
        self.animation_level = "none"
        self.theme = TEXTUAL_THEMES.get(theme, theme)
        self.start_mode = start_mode if start_mode in self.MODES else "checklist"
        self.profile_name = profile
        self.requested_backend = backend
        self.startup_problems: list[str] = []
        """Things that went wrong while starting (bad task file, bad profiles): shown, never fatal."""
        self.preferences = preferences
        if preferences is not None and preferences.problem:
            self.startup_problems.append(preferences.problem)
        self.checks_on_start = checks_on_start
        self.form_problems: list[str] = []
        """The Tune form's problems while it holds an invalid task (runs are refused); [] otherwise."""
        self.task_spec = self._load_task(task_file, task, backend)
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
        self.run_active = False
        self.runs_finished = 0
        """Runs that ended this session (any status): tests and scripts wait on it."""
        self.work: dict[str, threading.Event] = {}
        """The cancel event of each piece of work in flight ('run', 'tune'), set when quitting."""
        self.applied_best: dict[str, Any] = {}
        """Knobs a tune's best set in the task this session (``a``), as the saved task would hold
        them: left out of the saved task while unchanged, so that after a restart the tuning cache's
        entry chooses them (and follows the shape) instead of a pin."""
        self.jobs: list[Any] = []
        """Runs, tunes and soaks of this session, oldest first (the Jobs view, ``j``)."""
        self.check_results: list[Any] = []
        """The engine's check results from the last check run (objects, for match_check)."""
        self.checks_state = "not run"
        """'not run', 'running', 'done' or 'not available': Diagnose never reads "not run" as fine."""
        self.checks_problem: str | None = None
        """Why the last check run gave no results (the checks could not run here)."""
        self.focus_rule_source: str | None = None
        """Set before switching to Troubleshoot, to select the rules of one source (e.g. a check id)."""

    @property
    def profile_name(self) -> str | None:
        """--profile as asked, or the one ``u`` chose on Profile (None = detect from the device)."""
        return self._profile_name

    @profile_name.setter
    def profile_name(self, name: str | None) -> None:
        changed = getattr(self, "_profile_name", name) != name
        self._profile_name = name
        if changed and getattr(self, "telemetry", None) is not None:
            self._profile_changed()

    def _profile_changed(self) -> None:
        """The simulated card takes the new profile's memory and power at once (Live, the header),
        not at the next run; a real GPU's telemetry does not depend on the profile."""
        source = getattr(self.telemetry, "sim_source", None)
        prof = self.effective_profile()
        if source is not None and prof is not None:
            source.configure(prof)
            if not self.telemetry.running:
                self.telemetry.poll_once()
        self.refresh_header()

    @property
    def task_spec(self) -> TaskSpec:
        """The task runs and tunes use: the Tune form's last valid one, or one another screen set."""
        return self._task_spec

    @task_spec.setter
    def task_spec(self, task: TaskSpec) -> None:
        self._task_spec = task
        self.form_problems = []  # a task set by any screen replaces the form's invalid one

    # --- start-up ------------------------------------------------------------------------------
    def _load_task(self, task_file: Path | None, saved: dict[str, Any] | None, backend: str) -> TaskSpec:
        if task_file is None and saved:
            try:
                return TaskSpec.model_validate({**saved, "backend": backend})
            except ValidationError as exc:
                err = exc.errors()[0]
                where = ".".join(str(p) for p in err["loc"])
                self.startup_problems.append(f"the saved task is not valid any more ({where}: {err['msg']}); "
                                             "using the default task.")
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
            return self._sim_sampler()
        return nvml_sampler()

    def _sim_sampler(self) -> TelemetrySampler:
        """The simulated card's sampler, with as many GPUs as SOL_COCKPIT_SIM_DEVICES says (one when
        it is unset or malformed: the Live screen is no place for an input error)."""
        try:
            count = sim_device_count()
        except CockpitError:
            count = 1
        return simulated_sampler(SimulatedSource(gpu_count=count), profile=self._sim_profile())

    def _sim_profile(self):
        """The profile the simulated card takes its memory and power from (None before one resolves)."""
        try:
            return self.effective_profile()
        except Exception:  # profiles not loaded yet: the generic simulated card
            return None

    @property
    def simulated(self) -> bool:
        return self.backend_choice is not None and self.backend_choice.name == "sim"

    def on_mount(self) -> None:
        if self.start_telemetry:
            self.telemetry.start()
        else:
            self.telemetry.poll_once()
        self.switch_mode(self.start_mode)
        if self.checks_on_start:  # whatever the first screen: Diagnose and the checklist read them
            self.run_checks()
        for problem in self.startup_problems:
            self.notify(problem, title="Start-up", severity="error", timeout=15)
        if self.simulated and self.backend_choice is not None and self.backend_choice.notice:
            self.notify(self.backend_choice.notice, title="SIMULATED device", timeout=10)

    def on_unmount(self) -> None:
        self.cancel_work()
        self.save_preferences()
        self.telemetry.stop()

    # --- what the screens read ----------------------------------------------------------------
    def device_note(self) -> str:
        """The device in words, in full: why there is no GPU and the key that fixes it, or that the
        device is simulated and why. The header shows it cut to one line; its tooltip and the help
        show all of it."""
        if self.backend_problem:
            return f"No usable GPU. Press S to use the SIMULATED device. {self.backend_problem}"
        if self.simulated:
            notice = self.backend_choice.notice if self.backend_choice else None
            return (f"SIMULATED device: {notice}" if notice else
                    "SIMULATED device: timings and telemetry are simulated, not measured on a GPU.")
        return ""

    def profile_source(self) -> str:
        """How the profile in use was picked: 'chosen', 'detected' or the simulated device's default."""
        if self.profile_name:
            return "chosen"
        device = self.backend_choice.device_name if self.backend_choice else None
        if device and self.profiles.detect(device) is not None:
            return "detected"
        return "SIMULATED device's default" if self.simulated else "none detected"

    def effective_profile(self):
        """The profile runs will use: the asked one, else the detected one, else the sim default."""
        device = self.backend_choice.device_name if self.backend_choice else None
        try:
            prof, _, _ = resolve_profile(self.profiles, self.profile_name, device, self.simulated)
            return prof
        except CockpitError:
            return None

    def record_result(self, result: RunResult) -> None:
        self.last_result = result
        self.refresh_header()

    def refresh_header(self) -> None:
        """Redraw the header now (work started or ended, a result came in), not at its next tick."""
        try:
            screen = self.screen
        except ScreenStackError:  # not started yet
            return
        refresh = getattr(screen, "refresh_status", None)
        if refresh is not None:
            refresh()

    def form_error(self) -> str | None:
        """Why the task cannot run: the Tune form holds an invalid task (None when it can)."""
        if not self.form_problems:
            return None
        return f"the task on 3 Tune has problems: {'; '.join(self.form_problems)}"

    # --- preferences ------------------------------------------------------------------------------
    def current_preferences(self) -> Preferences:
        theme = next((k for k, v in TEXTUAL_THEMES.items() if v == self.theme), None)
        task = self.task_spec.model_dump(mode="json", exclude_none=True)
        for key in ("backend", "fault"):  # the backend comes from --backend; a fault is a one-off
            task.pop(key, None)
        for key, value in self.applied_best.items():  # the tuned entry chooses them next time
            if task.get(key) == value:
                task.pop(key)
        base = self.preferences.prefs if self.preferences is not None else Preferences()
        mode = self.current_mode if self.current_mode in SCREEN_MODES else self.start_mode
        return Preferences(theme=theme, profile=self.profile_name, screen=mode, task=task, extra=base.extra)

    def save_preferences(self) -> None:
        if self.preferences is not None and self.preferences.writable:
            self.preferences.save(self.current_preferences())

    # --- messages up ----------------------------------------------------------------------------
    def on_run_screen_started(self, message) -> None:
        self.run_active = True
        self.telemetry.set_run_active(True, self.task_spec, self._sim_profile() if self.simulated else None)
        self.refresh_header()

    def on_run_screen_finished(self, message) -> None:
        self.run_active = False
        self.telemetry.set_run_active(False)
        self.record_result(message.result)
        self.runs_finished += 1
        self.job_result("run", run_status_word(message.result),
                        f"run #{message.result.run_id}" if message.result.run_id is not None else "not stored")

    # --- actions --------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "use_simulated":
            return not self.simulated and self.backend_problem is not None
        return True

    def action_toggle_theme(self) -> None:
        self.theme = TEXTUAL_THEMES["light"] if self.theme == TEXTUAL_THEMES["dark"] else TEXTUAL_THEMES["dark"]

    def action_help(self) -> None:
        from tui.screens.overlays import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    async def action_quit(self) -> None:
        """Quit; with a run or a tune in flight, ask first, then cancel it so the cockpit exits at
        once (a hung kernel would otherwise hold the process until its timeout)."""
        from tui.screens.overlays import ConfirmQuitScreen

        busy = self.busy_with()
        if not busy:
            self.exit()
            return
        if not isinstance(self.screen, ConfirmQuitScreen):
            self.clear_notifications()  # a toast over the question would hide it (defect 14)
            self.push_screen(ConfirmQuitScreen(busy), callback=self._quit_answered)

    def _quit_answered(self, quit_now: bool | None) -> None:
        if quit_now:
            self.cancel_work()
            self.exit()

    def action_use_simulated(self) -> None:
        if self.simulated:
            return
        self.backend_choice = BackendChoice(name="sim", notice="switched to the SIMULATED device by the operator")
        self.backend_problem = None
        self.task_spec = with_fields(self.task_spec, backend="sim")
        self.telemetry.stop()
        self.telemetry = self._sim_sampler()
        if self.start_telemetry:
            self.telemetry.start()
        if isinstance(self.screen, Screen) and hasattr(self.screen, "refresh_chrome"):
            self.screen.refresh_chrome()
            self.screen.refresh_view()
        self.notify("Using the SIMULATED device.", title="Backend")

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Every binding of the current screen and of the app, once, by its description; Textual's
        own commands except those a cockpit key already offers."""
        for command in super().get_system_commands(screen):
            if command.title not in PALETTE_SKIP:
                yield command
        seen = set()
        for owner in (screen, self):
            for binding in getattr(owner, "BINDINGS", []):
                if not isinstance(binding, Binding) or binding.action in seen:
                    continue
                seen.add(binding.action)
                desc = binding.tooltip or binding.description
                yield SystemCommand(f"{binding.description} ({self.get_key_display(binding)})", desc,
                                    lambda o=owner, a=binding.action: self.call_later(self.run_action, a, o))


def make_app(**kwargs: Any) -> CockpitApp:
    """The one factory for the console command, the tests and the GPU script."""
    return CockpitApp(**kwargs)


def app_from_command_line(argv: list[str], preferences: PreferencesFile | None = None,
                          **kwargs: Any) -> CockpitApp:
    """The cockpit the command line asks for, over the saved preferences (read from the config dir
    unless given). ``kwargs`` go to ``make_app`` (tests: telemetry, checks). Bad arguments raise
    SystemExit, as argparse does."""
    args = parse_args(argv)
    prefs = preferences or PreferencesFile.load(allowed=PREFERENCE_CHOICES)
    opts = combine(args, prefs.prefs)
    return make_app(profile=opts.profile, backend=opts.backend, task_file=opts.task_file, task=opts.task,
                    theme=opts.theme, start_mode=opts.screen, preferences=prefs, **kwargs)


STOP_WAIT_S = 10.0
"""How long the cockpit, stopped by a signal, waits for the work it cancelled to store its record."""


def stop_on_signals(app: CockpitApp) -> dict[int, Any]:
    """SIGHUP (a closed terminal or SSH session) and SIGTERM end the cockpit as q does, instead of
    killing it where it stands: the preferences are saved at once (the terminal may be gone before
    the exit finishes), the work in flight is cancelled (its engine stores the cancelled run), and
    the app exits with 128 + the signal. A signal already ignored (``nohup``) stays ignored.
    Returns the handlers replaced (a test puts them back)."""
    import asyncio
    import signal

    def stop(signum: int, frame: object) -> None:
        try:
            app.save_preferences()
        except Exception:  # noqa: BLE001 (the exit matters more than a preferences file)
            pass
        app.cancel_work()
        try:
            asyncio.get_running_loop().call_soon(lambda: app.exit(return_code=128 + signum))
        except RuntimeError:  # not inside the app's loop: nothing more to end
            pass

    replaced: dict[int, Any] = {}
    if threading.current_thread() is not threading.main_thread():
        return replaced
    for sig in (getattr(signal, "SIGHUP", None), signal.SIGTERM):
        if sig is not None and signal.getsignal(sig) is signal.SIG_DFL:
            replaced[sig] = signal.signal(sig, stop)
    return replaced


def wait_for_work(timeout_s: float = STOP_WAIT_S) -> None:
    """Let the threads still running (a cancelled run's worker, storing its record) finish, up to
    ``timeout_s`` in all: at exit they would be cut off mid-write."""
    deadline = time.monotonic() + timeout_s
    for t in threading.enumerate():
        if t is not threading.main_thread() and t.is_alive() and not t.daemon:
            t.join(max(0.0, deadline - time.monotonic()))


def run_app(argv: list[str] | None = None) -> int:
    """Open the cockpit; returns the exit code (2 for bad arguments; 128 + the signal that stopped
    it, after the work it cancelled has stored its record)."""
    try:
        app = app_from_command_line(list(argv or []))
    except SystemExit as exc:
        return int(exc.code or 0)
    stop_on_signals(app)
    app.run()
    code = int(app.return_code or 0)
    if code > 128:
        wait_for_work()
    return code
