"""`tui calibrate [--device N] [--profile BASE] [--name NAME] [--json] [--no-save]`."""

from __future__ import annotations

import argparse

from engine import LogEvent, Profile, is_multi, load_profiles, measured_profile, save_user_profile
from tui.cli.device_args import add_spread_arg, device_arg
from tui.cli.output import print_json, stderr_console, stdout_console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure this GPU's copy bandwidth and GEMM rates; save them as a profile")
    p.add_argument("--device", type=device_arg, default=0,
                   help="GPU index (default 0); all or a list such as 0,2,5 measures each at once and compares them")
    p.add_argument("--profile", help="datasheet profile to measure against (default: detected)")
    p.add_argument("--name", help="name of the saved profile (default: <profile>-measured)")
    p.add_argument("--timeout", type=float, default=300.0, help="wall-clock limit in seconds")
    p.add_argument("--no-save", action="store_true", help="measure and print only")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_spread_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine import measure_ceilings, nvml  # looked up per run, as the every-GPU run does

    if is_multi(args.device):  # every GPU at once (tui.cli.every_gpu)
        from tui.cli.every_gpu import run_calibrate_all

        return run_calibrate_all(args)
    ps = load_profiles()
    base: Profile | None
    if args.profile:
        base = ps.get(args.profile)
    else:
        ok, problem, fix = nvml.probe()
        info = nvml.device_info(args.device) if ok else None
        base = ps.detect(info.name) if info else None
        if base is None:
            from engine import BackendUnavailable, InputError

            if not ok:  # the backends' fix offers the simulated device, which has nothing to measure
                fix = (fix or "").replace("; or use --backend sim", "")
                raise BackendUnavailable(problem or "no GPU", fix=(fix + "; " if fix else "")
                                         + "calibration measures a real GPU (the simulated device has no ceilings)")
            raise InputError(f"no profile matches '{info.name if info else '?'}'", fix="pass --profile NAME")
    err = stderr_console()

    def progress(ev: object) -> None:
        if isinstance(ev, LogEvent):
            err.print(ev.message, markup=False)

    ceilings = measure_ceilings(args.device, on_event=progress, timeout_s=args.timeout)
    prof = measured_profile(base, ceilings, args.name)
    path = None if args.no_save else save_user_profile(prof)
    if args.json:
        print_json({"base_profile": base.name, "ceilings": ceilings, "profile": prof.model_dump(mode="json"),
                    "saved_to": str(path) if path else None})
        return 0
    con = stdout_console()
    t = prof.peak_tflops
    con.print(f"[bold]{ceilings['gpu_name']}[/] measured against {base.name} (datasheet):")
    for label, got, sheet in (("copy GB/s", prof.memory_bandwidth_gbps, base.memory_bandwidth_gbps),
                              ("bf16 TFLOP/s", t.bf16, base.peak_tflops.bf16), ("fp16 TFLOP/s", t.fp16, base.peak_tflops.fp16),
                              ("tf32 TFLOP/s", t.tf32, base.peak_tflops.tf32), ("fp32 TFLOP/s", t.fp32, base.peak_tflops.fp32)):
        con.print(f"  {label:<13} {got:9.1f}  datasheet {sheet:9.1f}  ({100 * got / sheet:.0f} %)")
    if path:
        con.print(f"saved as profile {prof.name} ({path}); runs on {base.name} now also show SOL against it")
    return 0
