"""SOL Cockpit's headless engine.

Importing this package is cheap and side-effect free: it never loads textual, cupy or pynvml.
The CUDA backend (``engine.backends.cuda`` and its ``cuda_*`` modules) is all that imports cupy,
and ``engine.nvml`` the only module that imports pynvml; both are imported on demand.

The names below are the engine's public surface: the front ends (the cockpit and the headless CLI,
both under ``tui/``) import only these, from ``engine`` itself (``tests/unit/test_import_hygiene.py``
enforces it). Each is loaded on use (PEP 562), so ``import engine`` stays cheap; a name is looked
up in its module each time it is imported from here, never kept, so a test that replaces it in its
module replaces it for every front end too.
"""

# ruff: noqa: F401  (the names imported for type checkers are the public surface, not unused)
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # tasks and plans ("module" or "module:name" where the public name differs)
    "TaskSpec": "engine.task", "DType": "engine.task", "ENV_KNOBS": "engine.task", "Tile": "engine.task",
    "resolve_task": "engine.task", "save_task": "engine.task", "parse_shape_text": "engine.task",
    "parse_schedule_text": "engine.task", "format_pipelining": "engine.task",
    "plan": "engine.planner", "Plan": "engine.planner", "PlanError": "engine.planner", "TunedKnobs": "engine.tuned_knobs",
    "tuned_here": "engine.tuned_knobs",
    "kernel_names": "engine.user_kernels", "kernel_dims": "engine.planner", "kernel_default_shape": "engine.planner",
    "normalize_shape": "engine.planner",
    # kernels
    "get_spec": "kernels", "builtin_kernel_names": "kernels:builtin_names", "DeviceLimits": "kernels.spec",
    "UserKernelSpec": "kernels.user_spec", "discover_user_kernels": "engine.user_kernels:discover",
    "load_kernel_file": "engine.user_kernels", "trust_reference": "engine.user_kernels",
    "user_kernels_dir": "engine.user_kernels",
    # running
    "prepare": "engine.runner", "run_prepared": "engine.runner", "resolve_profile": "engine.runner",
    "PreparedRun": "engine.runner", "DEFAULT_SIM_PROFILE": "engine.runner", "choose_backend": "engine.backends.select",
    "BackendChoice": "engine.backends.select", "start_engine_server": "engine.process",
    "STAGES": "engine.events", "Event": "engine.events", "StageEvent": "engine.events", "LogEvent": "engine.events",
    "ProgressEvent": "engine.events", "TrialEvent": "engine.events", "SoakEvent": "engine.events",
    "describe_energy": "engine.energy:describe",
    "run_soak": "engine.soak", "SoakOptions": "engine.soak_options",
    "parse_duration": "engine.soak", "parse_percent": "engine.soak",
    "load_batch": "engine.batch", "run_batch": "engine.batch", "batch_stopped_early": "engine.batch:stopped_early",
    "BATCH_MAX_ATTEMPTS": "engine.batch:MAX_ATTEMPTS", "BATCH_STOP_AFTER": "engine.batch:STOP_AFTER",
    "measure_ceilings": "engine.calibrate:measure", "measured_profile": "engine.calibrate",
    # every GPU at once
    "sim_device_count": "engine.multi_device", "device_count": "engine.multi_device",
    "DeviceSelection": "engine.multi_device", "is_multi": "engine.multi_device",
    "resolve_devices": "engine.multi_device:resolve", "devices_for": "engine.multi_device",
    "fan_out": "engine.multi_device", "spread": "engine.multi_device", "spread_text": "engine.multi_device",
    "SPREAD_OUTLIER_PCT": "engine.multi_device:OUTLIER_PCT",
    # tuning
    "tune": "engine.tuner", "TuneResult": "engine.tune_types", "Trial": "engine.tune_types",
    "TuneJob": "engine.tune_jobs", "recent_tunes": "engine.tune_jobs:recent",
    "knob_label": "engine.tune_types", "TuningCache": "engine.tuning_cache", "tuned_lookup": "engine.tuning_cache",
    "TUNE_REGIMES": "engine.tuning_cache:REGIMES",
    # results, baselines, profiles, errors
    "RunResult": "engine.result", "RunStatus": "engine.result", "RecordedTask": "engine.recorded_task",
    "SolRecord": "engine.run_records", "EnergyRecord": "engine.run_records", "LaunchRecord": "engine.run_records",
    "ValidityRecord": "engine.run_records",
    "ResultStore": "engine.store",
    "Baselines": "engine.baseline", "baseline_marks": "engine.baseline:marks",
    "baseline_guard": "engine.baseline:guard_for", "parse_tolerance": "engine.baseline",
    "shape_text": "engine.baseline",
    "Profile": "engine.profiles", "ProfileSet": "engine.profiles", "load_profiles": "engine.profiles",
    "save_user_profile": "engine.profiles", "BUILTIN_DIR": "engine.profiles",
    "PROVISIONAL_LABEL": "engine.profiles",
    "CockpitError": "engine.errors", "InputError": "engine.errors", "BackendUnavailable": "engine.errors",
    "sol_figures": "engine.sol", "describe_bounds": "engine.sol", "config_dir": "engine.paths", "load_toml": "engine.tomlio",
    "read_text": "engine.safe_files", "write_atomic": "engine.safe_files", "visible": "engine.text_safety",
    "for_rich": "engine.text_safety",
    # fleets, reports and exports
    "load_fleet": "engine.fleet", "FLEET_OUTLIER_PCT": "engine.fleet:DEFAULT_OUTLIER_PCT",
    "collect_fleet_report": "engine.fleet_report:collect", "write_fleet_report": "engine.fleet_report:write_report",
    "fleet_report_host": "engine.fleet_report:default_host", "safe_file_name": "engine.fleet_report",
    "FleetJob": "engine.fleet_job", "parse_pairs": "engine.fleet_job",
    "K8sOptions": "engine.k8s_export", "k8s_manifests": "engine.k8s_export:manifests",
    "k8s_to_yaml": "engine.k8s_export:to_yaml", "k8s_as_list": "engine.k8s_export:as_list",
    "DEFAULT_IMAGE": "engine.k8s_export", "IMAGE_UID": "engine.k8s_export",
    "K8S_DEFAULT_HOST_PATH": "engine.k8s_export:DEFAULT_HOST_PATH",
    "SlurmOptions": "engine.slurm_export", "slurm_script": "engine.slurm_export:script",
    "Exporter": "engine.exporter", "CockpitCollector": "engine.exporter",
    "EXPORTER_DEFAULT_HOST": "engine.exporter:DEFAULT_HOST", "EXPORTER_DEFAULT_PORT": "engine.exporter:DEFAULT_PORT",
    "build_report": "engine.report", "report_markdown": "engine.report:to_markdown",
    "inspect_binary": "engine.binary_inspect",
    # telemetry, checks, rules, checklist
    "TelemetrySampler": "engine.telemetry", "GpuTelemetry": "engine.telemetry", "Snapshot": "engine.telemetry",
    "nvml_sampler": "engine.telemetry", "simulated_sampler": "engine.telemetry", "SimulatedSource": "engine.telemetry",
    "gpu_processes": "engine.telemetry",
    "HARMFUL_THROTTLE_MASK": "engine.nvml", "run_checks": "engine.checks", "checks_summary": "engine.checks:summary",
    "CHECKS": "engine.checks", "CheckContext": "engine.checks",
    "checked_profile": "engine.checks.arch:profile_in_use", "CHECK_SIM_HINT": "engine.checks.driver:SIM_HINT",
    "match_text": "engine.troubleshoot", "match_check": "engine.troubleshoot",
    "match_slow_knobs": "engine.troubleshoot", "rehearsed_fault": "engine.troubleshoot",
    "read_log": "engine.log_reader", "LogText": "engine.log_reader", "LOG_HEAD_BYTES": "engine.log_reader:HEAD_BYTES",
    "LOG_TAIL_BYTES": "engine.log_reader:TAIL_BYTES", "LOG_STREAM_MAX_BYTES": "engine.log_reader:STREAM_MAX_BYTES",
    "match_telemetry": "engine.troubleshoot", "Checklist": "engine.checklist",
    "checklist_step_ids": "engine.checklist:step_ids",
    # the GPU's pieces for research probes and product-data tools (bench/): each loads cupy on use
    "device_limits": "engine.backends.cuda_stages", "compile_inputs": "engine.backends.cuda_stages",
    "compile_cubin_cached": "engine.backends.cuda_stages:compile_cubin", "input_sets": "engine.backends.cuda_support",
    "queued_timer": "engine.backends.cuda_timer", "time_queued": "engine.backends.cuda_timer",
    "launch_times": "engine.backends.cuda_timer", "Blas": "engine.backends.cuda_blas",
    "NvmlSampler": "engine.backends.cuda_observers", "run_on": "engine.backends.stages",
    "Emitter": "engine.backends.base", "RunContext": "engine.backends.base",
    "encode_tensor_map": "engine.backends.tensormap:encode",
    "tensor_map_kernel_arg": "engine.backends.tensormap:as_kernel_arg",
    "fit_cluster_grid": "engine.backends.clusters:fit_grid", "pdl_enabled": "engine.backends.pdl:enabled",
    "DependentLaunch": "engine.backends.pdl",
}
_MODULES = ("nvml",)
"""Modules that are public as a whole: ``engine.nvml``, the one module per piece of hardware."""

__all__ = ["__version__", *_EXPORTS, *_MODULES]


if TYPE_CHECKING:  # the same names for type checkers; tests/unit/test_import_hygiene.py keeps both lists equal
    from engine import nvml as nvml
    from engine.backends.base import Emitter as Emitter
    from engine.backends.base import RunContext as RunContext
    from engine.backends.clusters import fit_grid as fit_cluster_grid
    from engine.backends.cuda_blas import Blas as Blas
    from engine.backends.cuda_observers import NvmlSampler as NvmlSampler
    from engine.backends.cuda_stages import compile_cubin as compile_cubin_cached
    from engine.backends.cuda_stages import compile_inputs as compile_inputs
    from engine.backends.cuda_stages import device_limits as device_limits
    from engine.backends.cuda_support import input_sets as input_sets
    from engine.backends.cuda_timer import launch_times as launch_times
    from engine.backends.cuda_timer import queued_timer as queued_timer
    from engine.backends.cuda_timer import time_queued as time_queued
    from engine.backends.pdl import DependentLaunch as DependentLaunch
    from engine.backends.pdl import enabled as pdl_enabled
    from engine.backends.select import BackendChoice as BackendChoice
    from engine.backends.select import choose_backend as choose_backend
    from engine.backends.stages import run_on as run_on
    from engine.backends.tensormap import as_kernel_arg as tensor_map_kernel_arg
    from engine.backends.tensormap import encode as encode_tensor_map
    from engine.baseline import Baselines as Baselines
    from engine.baseline import guard_for as baseline_guard
    from engine.baseline import marks as baseline_marks
    from engine.baseline import parse_tolerance as parse_tolerance
    from engine.baseline import shape_text as shape_text
    from engine.batch import MAX_ATTEMPTS as BATCH_MAX_ATTEMPTS
    from engine.batch import STOP_AFTER as BATCH_STOP_AFTER
    from engine.batch import load_batch as load_batch
    from engine.batch import run_batch as run_batch
    from engine.batch import stopped_early as batch_stopped_early
    from engine.binary_inspect import inspect_binary as inspect_binary
    from engine.calibrate import measure as measure_ceilings
    from engine.calibrate import measured_profile as measured_profile
    from engine.checklist import Checklist as Checklist
    from engine.checklist import step_ids as checklist_step_ids
    from engine.checks import CHECKS as CHECKS
    from engine.checks import CheckContext as CheckContext
    from engine.checks import run_checks as run_checks
    from engine.checks import summary as checks_summary
    from engine.checks.arch import profile_in_use as checked_profile
    from engine.checks.driver import SIM_HINT as CHECK_SIM_HINT
    from engine.energy import describe as describe_energy
    from engine.errors import BackendUnavailable as BackendUnavailable
    from engine.errors import CockpitError as CockpitError
    from engine.errors import InputError as InputError
    from engine.events import STAGES as STAGES
    from engine.events import Event as Event
    from engine.events import LogEvent as LogEvent
    from engine.events import ProgressEvent as ProgressEvent
    from engine.events import SoakEvent as SoakEvent
    from engine.events import StageEvent as StageEvent
    from engine.events import TrialEvent as TrialEvent
    from engine.exporter import DEFAULT_HOST as EXPORTER_DEFAULT_HOST
    from engine.exporter import DEFAULT_PORT as EXPORTER_DEFAULT_PORT
    from engine.exporter import CockpitCollector as CockpitCollector
    from engine.exporter import Exporter as Exporter
    from engine.fleet import DEFAULT_OUTLIER_PCT as FLEET_OUTLIER_PCT
    from engine.fleet import load_fleet as load_fleet
    from engine.fleet_job import FleetJob as FleetJob
    from engine.fleet_job import parse_pairs as parse_pairs
    from engine.fleet_report import collect as collect_fleet_report
    from engine.fleet_report import default_host as fleet_report_host
    from engine.fleet_report import safe_file_name as safe_file_name
    from engine.fleet_report import write_report as write_fleet_report
    from engine.k8s_export import DEFAULT_HOST_PATH as K8S_DEFAULT_HOST_PATH
    from engine.k8s_export import DEFAULT_IMAGE as DEFAULT_IMAGE
    from engine.k8s_export import IMAGE_UID as IMAGE_UID
    from engine.k8s_export import K8sOptions as K8sOptions
    from engine.k8s_export import as_list as k8s_as_list
    from engine.k8s_export import manifests as k8s_manifests
    from engine.k8s_export import to_yaml as k8s_to_yaml
    from engine.log_reader import HEAD_BYTES as LOG_HEAD_BYTES
    from engine.log_reader import STREAM_MAX_BYTES as LOG_STREAM_MAX_BYTES
    from engine.log_reader import TAIL_BYTES as LOG_TAIL_BYTES
    from engine.log_reader import LogText as LogText
    from engine.log_reader import read_log as read_log
    from engine.multi_device import OUTLIER_PCT as SPREAD_OUTLIER_PCT
    from engine.multi_device import DeviceSelection as DeviceSelection
    from engine.multi_device import device_count as device_count
    from engine.multi_device import devices_for as devices_for
    from engine.multi_device import fan_out as fan_out
    from engine.multi_device import is_multi as is_multi
    from engine.multi_device import resolve as resolve_devices
    from engine.multi_device import sim_device_count as sim_device_count
    from engine.multi_device import spread as spread
    from engine.multi_device import spread_text as spread_text
    from engine.nvml import HARMFUL_THROTTLE_MASK as HARMFUL_THROTTLE_MASK
    from engine.paths import config_dir as config_dir
    from engine.planner import Plan as Plan
    from engine.planner import PlanError as PlanError
    from engine.planner import kernel_default_shape as kernel_default_shape
    from engine.planner import kernel_dims as kernel_dims
    from engine.planner import normalize_shape as normalize_shape
    from engine.planner import plan as plan
    from engine.process import start_engine_server as start_engine_server
    from engine.profiles import BUILTIN_DIR as BUILTIN_DIR
    from engine.profiles import PROVISIONAL_LABEL as PROVISIONAL_LABEL
    from engine.profiles import Profile as Profile
    from engine.profiles import ProfileSet as ProfileSet
    from engine.profiles import load_profiles as load_profiles
    from engine.profiles import save_user_profile as save_user_profile
    from engine.recorded_task import RecordedTask as RecordedTask
    from engine.report import build_report as build_report
    from engine.report import to_markdown as report_markdown
    from engine.result import RunResult as RunResult
    from engine.result import RunStatus as RunStatus
    from engine.run_records import EnergyRecord as EnergyRecord
    from engine.run_records import LaunchRecord as LaunchRecord
    from engine.run_records import SolRecord as SolRecord
    from engine.run_records import ValidityRecord as ValidityRecord
    from engine.runner import DEFAULT_SIM_PROFILE as DEFAULT_SIM_PROFILE
    from engine.runner import PreparedRun as PreparedRun
    from engine.runner import prepare as prepare
    from engine.runner import resolve_profile as resolve_profile
    from engine.runner import run_prepared as run_prepared
    from engine.safe_files import read_text as read_text
    from engine.safe_files import write_atomic as write_atomic
    from engine.slurm_export import SlurmOptions as SlurmOptions
    from engine.slurm_export import script as slurm_script
    from engine.soak import parse_duration as parse_duration
    from engine.soak import parse_percent as parse_percent
    from engine.soak import run_soak as run_soak
    from engine.soak_options import SoakOptions as SoakOptions
    from engine.sol import describe_bounds as describe_bounds
    from engine.sol import sol_figures as sol_figures
    from engine.store import ResultStore as ResultStore
    from engine.task import ENV_KNOBS as ENV_KNOBS
    from engine.task import DType as DType
    from engine.task import TaskSpec as TaskSpec
    from engine.task import Tile as Tile
    from engine.task import format_pipelining as format_pipelining
    from engine.task import parse_schedule_text as parse_schedule_text
    from engine.task import parse_shape_text as parse_shape_text
    from engine.task import resolve_task as resolve_task
    from engine.task import save_task as save_task
    from engine.telemetry import GpuTelemetry as GpuTelemetry
    from engine.telemetry import SimulatedSource as SimulatedSource
    from engine.telemetry import Snapshot as Snapshot
    from engine.telemetry import TelemetrySampler as TelemetrySampler
    from engine.telemetry import gpu_processes as gpu_processes
    from engine.telemetry import nvml_sampler as nvml_sampler
    from engine.telemetry import simulated_sampler as simulated_sampler
    from engine.text_safety import for_rich as for_rich
    from engine.text_safety import visible as visible
    from engine.tomlio import load_toml as load_toml
    from engine.troubleshoot import match_check as match_check
    from engine.troubleshoot import match_slow_knobs as match_slow_knobs
    from engine.troubleshoot import match_telemetry as match_telemetry
    from engine.troubleshoot import match_text as match_text
    from engine.troubleshoot import rehearsed_fault as rehearsed_fault
    from engine.tune_jobs import TuneJob as TuneJob
    from engine.tune_jobs import recent as recent_tunes
    from engine.tune_types import Trial as Trial
    from engine.tune_types import TuneResult as TuneResult
    from engine.tune_types import knob_label as knob_label
    from engine.tuned_knobs import TunedKnobs as TunedKnobs
    from engine.tuned_knobs import tuned_here as tuned_here
    from engine.tuner import tune as tune
    from engine.tuning_cache import REGIMES as TUNE_REGIMES
    from engine.tuning_cache import TuningCache as TuningCache
    from engine.tuning_cache import tuned_lookup as tuned_lookup
    from engine.user_kernels import discover as discover_user_kernels
    from engine.user_kernels import kernel_names as kernel_names
    from engine.user_kernels import load_kernel_file as load_kernel_file
    from engine.user_kernels import trust_reference as trust_reference
    from engine.user_kernels import user_kernels_dir as user_kernels_dir
    from kernels import builtin_names as builtin_kernel_names
    from kernels import get_spec as get_spec
    from kernels.spec import DeviceLimits as DeviceLimits
    from kernels.user_spec import UserKernelSpec as UserKernelSpec


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    module, _, attr = where.partition(":")
    return getattr(importlib.import_module(module), attr or name)
