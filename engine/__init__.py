"""SOL Cockpit's headless engine.

Importing this package is cheap and side-effect free: it never loads textual, cupy or pynvml.
The CUDA backend (``engine.backends.cuda`` and its ``cuda_*`` modules) is all that imports cupy,
and ``engine.nvml`` the only module that imports pynvml; both are imported on demand.

The names below are the engine's public surface: the cockpit (``tui/``) imports only these, from
``engine`` itself (``tests/unit/test_import_hygiene.py`` enforces it). Each is loaded on first use
(PEP 562), so ``import engine`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # tasks and plans
    "TaskSpec": "engine.task", "DType": "engine.task", "ENV_KNOBS": "engine.task",
    "resolve_task": "engine.task", "save_task": "engine.task", "parse_shape_text": "engine.task",
    "parse_schedule_text": "engine.task", "format_pipelining": "engine.task",
    "plan": "engine.planner", "Plan": "engine.planner", "PlanError": "engine.planner", "TunedKnobs": "engine.tuned_knobs",
    "kernel_names": "engine.user_kernels", "kernel_dims": "engine.planner", "kernel_default_shape": "engine.planner",
    "normalize_shape": "engine.planner",
    # running
    "prepare": "engine.runner", "run_prepared": "engine.runner", "resolve_profile": "engine.runner",
    "PreparedRun": "engine.runner", "choose_backend": "engine.backends.select",
    "BackendChoice": "engine.backends.select", "start_engine_server": "engine.process",
    "STAGES": "engine.events",
    "run_soak": "engine.soak", "SoakOptions": "engine.soak_options", "SoakEvent": "engine.events",
    "parse_duration": "engine.soak", "parse_percent": "engine.soak", "sim_device_count": "engine.multi_device",
    # tuning
    "tune": "engine.tuner", "TuneResult": "engine.tune_types", "Trial": "engine.tune_types", "TuningCache": "engine.tuning_cache",
    "tuned_lookup": "engine.tuning_cache", "baseline_marks": "engine.baseline",
    # results, profiles, errors
    "RunResult": "engine.result", "RunStatus": "engine.result", "RecordedTask": "engine.recorded_task",
    "ResultStore": "engine.store",
    "ProfileSet": "engine.profiles", "load_profiles": "engine.profiles", "BUILTIN_DIR": "engine.profiles",
    "CockpitError": "engine.errors", "InputError": "engine.errors", "sol_figures": "engine.sol",
    "config_dir": "engine.paths",
    "read_text": "engine.safe_files", "write_atomic": "engine.safe_files", "visible": "engine.text_safety",
    "for_rich": "engine.text_safety",
    "load_fleet": "engine.fleet",
    # telemetry, checks, rules, checklist
    "TelemetrySampler": "engine.telemetry", "GpuTelemetry": "engine.telemetry", "Snapshot": "engine.telemetry",
    "nvml_sampler": "engine.telemetry", "simulated_sampler": "engine.telemetry", "SimulatedSource": "engine.telemetry",
    "gpu_processes": "engine.telemetry",
    "HARMFUL_THROTTLE_MASK": "engine.nvml", "run_checks": "engine.checks", "checks_summary": "engine.checks",
    "match_text": "engine.troubleshoot", "match_check": "engine.troubleshoot",
    "match_telemetry": "engine.troubleshoot", "Checklist": "engine.checklist",
    # the headless CLI the console command hands its subcommands to
    "cli_main": "engine.cli.main", "CLI_COMMANDS": "engine.cli.main",
}
_RENAMED = {"checks_summary": "summary", "cli_main": "main", "CLI_COMMANDS": "COMMANDS", "baseline_marks": "marks"}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), _RENAMED.get(name, name))
    globals()[name] = value
    return value
