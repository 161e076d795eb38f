"""`tui profiles [--json] [NAME]`: list the hardware profiles, or show one."""

from __future__ import annotations

import argparse

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from engine import PROVISIONAL_LABEL, load_profiles
from tui.cli.output import human, print_json, stderr_console, stdout_console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profiles", help="list hardware profiles (datasheet peaks and limits)")
    p.add_argument("name", nargs="?", help="show one profile (name or alias); unknown exits 2")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def detected_device() -> tuple[str | None, str | None]:
    """(device name, problem) from NVML, without creating a CUDA context."""
    from engine import nvml

    ok, problem, _ = nvml.probe()
    if not ok:
        return None, problem
    info = nvml.device_info(0)
    return (info.name if info else None), None


def run(args: argparse.Namespace) -> int:
    ps = load_profiles()
    if args.name:
        prof = ps.get(args.name)  # InputError -> exit 2 with the known names
        if args.json:
            print_json(prof.model_dump(mode="json") | {"origin": str(ps.origins[prof.name])})
        else:
            con = stdout_console()
            t = Table(title=Text(f"{prof.display_name} ({prof.name})"), show_header=False)
            for k, v in prof.model_dump(mode="json").items():
                t.add_row(k, Text(human(v)))  # Text: a user profile's '[...]' is not rich markup
            con.print(t)
        return 0
    device, problem = detected_device()
    detected = ps.detect(device) if device else None
    if args.json:
        print_json({
            "profiles": [p.model_dump(mode="json") | {"origin": str(ps.origins[p.name])}
                         for p in sorted(ps.profiles.values(), key=lambda p: p.name)],
            "detected_device": device,
            "detected_profile": detected.name if detected else None,
            "device_problem": problem,
            "errors": ps.errors,
        })
        return 0
    con = stdout_console()
    t = Table(title="Hardware profiles (dense peaks)", caption=PROVISIONAL_LABEL.replace(" (", ": ").rstrip(")"))
    for col in ("name", "aliases", "GPU", "cc", "SMs", "bf16 TF/s", "fp32 TF/s", "HBM GB/s", "mem GB",
                "smem/block KiB", "source"):
        t.add_column(col, overflow="fold")
    for p in sorted(ps.profiles.values(), key=lambda p: p.name):
        mark = " *" if detected is not None and p.name == detected.name else ""
        t.add_row(*(Text(c) for c in (  # Text: a user profile's '[...]' is not rich markup
            p.name + mark, ", ".join(p.aliases), p.display_name, p.compute_capability, str(p.sm_count),
            f"{p.peak_tflops.bf16:g}", f"{p.peak_tflops.fp32:g}", f"{p.memory_bandwidth_gbps:g}",
            f"{p.memory_gb:g}", f"{p.shared_memory_per_block_bytes / 1024:g}",
            "measured" if p.measured else "provisional" if p.provisional else "datasheet")))
    con.print(t)
    if device:
        con.print(f"detected device: {device} -> profile {detected.name if detected else 'none matches'} (*)",
                  markup=False)
    else:
        con.print(f"no GPU detected ({problem})", markup=False)
    err = stderr_console()
    for e in ps.errors:
        err.print(f"[yellow]warning:[/] skipped user profile: {escape(e)}")
    return 0
