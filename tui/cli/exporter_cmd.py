"""`tui exporter [--host 127.0.0.1] [--port 9401] [--interval S] [--backend cuda|sim|auto] [--once] [--json]`: serve
per-GPU telemetry and the results store's latest figures on /metrics for Prometheus, until stopped
(Ctrl-C or SIGTERM: exit 0). Exit 2 for a port in use or an address that cannot be bound."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tui.cli.output import print_json, stderr_console, stdout_console
from tui.cli.task_args import add_alias, add_backend_arg


def port_arg(text: str) -> int:
    t = text.strip()
    if not (t.isascii() and t.isdigit()) or len(t) > 5 or int(t) > 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port from 0 to 65535 (0: any free one), got {text[:40]!r}")
    return int(t)


def interval_arg(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, e.g. 5, got {text[:40]!r}") from None
    if not 0.1 <= v <= 3600:
        raise argparse.ArgumentTypeError(f"must be from 0.1 to 3600 seconds, got {text[:40]}")
    return v


def register(sub: argparse._SubParsersAction) -> None:
    from engine import EXPORTER_DEFAULT_HOST as DEFAULT_HOST
    from engine import EXPORTER_DEFAULT_PORT as DEFAULT_PORT

    p = sub.add_parser("exporter", help="serve GPU telemetry and stored results on /metrics for Prometheus")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to bind (default {DEFAULT_HOST}; another is served with a warning in the log)")
    p.add_argument("--port", type=port_arg, default=DEFAULT_PORT,
                   help=f"TCP port (default {DEFAULT_PORT}, dcgm-exporter's 9400 + 1; 0 picks a free one)")
    p.add_argument("--interval", type=interval_arg, default=5.0, metavar="S",
                   help="seconds between GPU polls and between reads of the store (default 5)")
    add_backend_arg(p, "cuda", "cuda: NVML's telemetry (default); sim: the simulated device's, labelled "
                               "simulated=\"true\"; auto: NVML's when it sees a GPU, else the simulated device's")
    add_alias(p, "--sim", "backend", action="store_const", const="sim")
    p.add_argument("--profile", help="with --backend sim: the profile the simulated GPU is shaped like "
                                     "(default h100-sxm)")
    p.add_argument("--once", action="store_true", help="print the metrics once on stdout and exit (no server)")
    p.add_argument("--store", type=Path, help="results store path (env SOL_COCKPIT_STORE)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: where it serves (or, with --once, the metrics)")
    p.set_defaults(func=run)


def _sampler(args: argparse.Namespace) -> tuple[Any, dict[int, Any], str]:
    """The telemetry sampler, device labels by index, and the simulated GPU's model name."""
    from engine import nvml_sampler, simulated_sampler

    if args.backend == "auto":
        sampler = nvml_sampler(interval_s=args.interval, history_s=60)
        if sampler.indices:
            return _nvml_devices(sampler)
        sampler.stop()
        args.backend = "sim"
    if args.backend == "sim":
        from engine import DEFAULT_SIM_PROFILE, load_profiles

        prof = load_profiles().get(args.profile or DEFAULT_SIM_PROFILE)
        return simulated_sampler(interval_s=args.interval, history_s=60, profile=prof), {}, \
            f"SIMULATED {prof.display_name}"
    return _nvml_devices(nvml_sampler(interval_s=args.interval, history_s=60))


def _nvml_devices(sampler: Any) -> tuple[Any, dict[int, Any], str]:
    from engine import BackendUnavailable, nvml

    devices: dict[int, Any] = {}
    if sampler.indices:
        try:
            devices = {d.index: d for d in nvml.devices()}
        except BackendUnavailable:
            pass
    return sampler, devices, "SIMULATED GPU"


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of the record, not the one at set-up."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


@contextlib.contextmanager
def _log_to_stderr() -> Iterator[None]:
    """The exporter's warnings on stderr while the command runs; the logger as it was afterwards."""
    logger = logging.getLogger("engine.exporter")
    before = (logger.level, logger.propagate)
    h = _StderrHandler()
    h.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    logger.addHandler(h)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(h)
        logger.setLevel(before[0])
        logger.propagate = before[1]


def _families_json(registry: Any) -> list[dict[str, Any]]:
    return [{"name": m.name, "type": m.type, "help": m.documentation,
             "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in m.samples]}
            for m in registry.collect()]


def run(args: argparse.Namespace) -> int:
    with _log_to_stderr():
        return _serve(args)


def _serve(args: argparse.Namespace) -> int:
    from engine import CockpitCollector, Exporter, ResultStore

    if args.profile and args.backend != "sim":
        from engine import InputError

        raise InputError("--profile: only with --backend sim (real GPUs label themselves)",
                         fix="add --backend sim or drop --profile")
    store = ResultStore(args.store)
    store.check()  # an unusable store is exit 2 before anything binds
    sampler, devices, sim_model = _sampler(args)
    collector = CockpitCollector(store, sampler, devices, interval_s=args.interval, simulated_model=sim_model)
    err = stderr_console()
    if sampler.problem:
        err.print(f"[yellow]no GPU telemetry:[/] {sampler.problem} (serving the store's metrics, "
                  "sol_cockpit_nvml_up 0)", highlight=False)
    exporter = Exporter(collector, args.host, args.port)
    if args.once:
        sampler.poll_once()
        if args.json:
            print_json({"status": "ok", "metrics": _families_json(exporter.registry)})
        else:
            from prometheus_client import generate_latest

            sys.stdout.write(generate_latest(exporter.registry).decode())
            sys.stdout.flush()
        return 0
    sampler.poll_once()  # the first scrape has figures
    exporter.start()
    try:
        info = {"status": "serving", "url": exporter.url, "host": args.host, "port": exporter.port,
                "gpus": len(sampler.indices), "simulated": bool(sampler.simulated), "nvml_problem": sampler.problem}
        if args.json:
            print_json(info)
        else:
            stdout_console().print(f"serving {exporter.url} ({info['gpus']} GPU(s)"
                                   + (", SIMULATED" if sampler.simulated else "") + "); Ctrl-C stops",
                                   highlight=False)
            sys.stdout.flush()
        while True:  # until Ctrl-C or SIGTERM (raised here as KeyboardInterrupt by tui.cli.main)
            time.sleep(1.0)
    except KeyboardInterrupt:
        err.print("exporter stopped")
    finally:
        exporter.stop()
    return 0
