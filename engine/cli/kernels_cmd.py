"""`tui kernels [--json] [--profile NAME]`: the kernels and their knob spaces on a profile."""

from __future__ import annotations

import argparse

from engine.cli.output import print_json, stdout_console
from engine.profiles import load_profiles
from engine.task import format_pipelining
from kernels import get_spec, kernel_names
from kernels.spec import DeviceLimits


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kernels", help="list kernels and the BLOCK_SIZE / MEMORY_PIPELINING values that fit")
    p.add_argument("--profile", default="h100", help="profile whose limits decide what fits (default h100)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    prof = load_profiles().get(args.profile)
    limits = DeviceLimits.from_profile(prof)
    rows = []
    for name in kernel_names():
        spec = get_spec(name)
        per_dtype = {}
        for dt in spec.dtypes:
            bss = spec.block_size_options(limits, dt)
            per_dtype[dt] = {"block_size": bss,
                             "memory_pipelining": spec.pipelining_options(limits, dt, bss[0]) if bss else [],
                             # at the kernel's default shape, as a run of the default task resolves it
                             "default": list(spec.default_knobs(limits, dt, spec.default_shape or None))}
        rows.append({"name": name, "title": spec.title, "dims": list(spec.dims),
                     "default_shape": spec.default_shape, "dtypes": per_dtype})
    if args.json:
        print_json({"profile": prof.name, "kernels": rows})
        return 0
    con = stdout_console()
    for r in rows:
        con.print(f"[bold]{r['name']}[/]  {r['title']}  dims={','.join(r['dims'])}")
        for dt, d in r["dtypes"].items():
            con.print(f"  {dt}: BLOCK_SIZE {' '.join(d['block_size'])} | MEMORY_PIPELINING "
                      f"{' '.join(format_pipelining(s) for s in d['memory_pipelining'])} "
                      f"| default at {'x'.join(map(str, r['default_shape'].values())) or 'any shape'} "
                      f"{d['default'][0]}/{d['default'][1] or 'off'}")
    return 0
