"""`tui kernels [--json] [--profile NAME]`: the kernels and their knob spaces on a profile."""

from __future__ import annotations

import argparse
from pathlib import Path

from engine import (
    DeviceLimits,
    InputError,
    UserKernelSpec,
    format_pipelining,
    get_spec,
    load_kernel_file,
    load_profiles,
    trust_reference,
    user_kernels_dir,
)
from engine import builtin_kernel_names as builtin_names
from engine import discover_user_kernels as discover
from tui.cli.output import print_json, stdout_console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kernels", help="list kernels and the BLOCK_SIZE / MEMORY_PIPELINING values that fit")
    p.add_argument("--profile", default="h100", help="profile whose limits decide what fits (default h100, "
                                                     "named in the first line)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--store", type=Path, help="results store whose tuning cache is listed (env SOL_COCKPIT_STORE)")
    p.add_argument("--kernel-file", dest="kernel_file", type=Path, metavar="PATH.toml",
                   help="also check and list a user kernel's spec file (exit 2 naming each bad field)")
    p.add_argument("--trust-reference", dest="trust_reference", action="store_true",
                   help="with --kernel-file: trust its reference.file (Python code) as it reads now, so "
                        "benches verify against it; runs nothing")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine import PlanError, ResultStore, TaskSpec, plan

    prof = load_profiles().get(args.profile)
    limits = DeviceLimits.from_profile(prof)
    try:
        tuned = [e for e in ResultStore(args.store).list_tuned() if e["sm_count"] == prof.sm_count]
    except Exception:  # a store that cannot be read lists no tuned entries
        tuned = []
    if getattr(args, "trust_reference", False) and not getattr(args, "kernel_file", None):
        raise InputError("--trust-reference: names no spec", fix="add --kernel-file PATH.toml")
    load = trust_reference if getattr(args, "trust_reference", False) else load_kernel_file
    extra = [load(args.kernel_file)] if getattr(args, "kernel_file", None) else []
    found, errors = discover()
    rows = []
    for name in dict.fromkeys([*builtin_names(), *(s.name for s in found), *(s.name for s in extra)]):
        spec = get_spec(name)
        user_file = str(spec.spec_path) if hasattr(spec, "spec_path") else None
        per_dtype = {}
        for dt in spec.dtypes:
            bss = spec.block_size_options(limits, dt)
            try:  # at the kernel's default shape, as a run of the default task resolves it
                task = TaskSpec.model_validate({"kernel": name, "kernel_file": user_file, "dtype": dt, "backend": "sim"})
                p = plan(task, prof)
                if not p.ok:
                    raise PlanError("none fits: " + p.error_text())
                default = [str(p.task.block_size), p.task.memory_pipelining]
                pls = sorted(p.pipelining_options)  # off (0) first, then more stages: one order for every kernel
                sched = {k.name: list(k.values) for k in p.schedule_options}
                source = p.source_label
            except PlanError as exc:
                default, pls, sched, source = [], [], {}, str(exc)
            per_dtype[dt] = {"block_size": bss, "memory_pipelining": pls, "schedule": sched,
                             "default": default, "default_from": source}
        entries = [{k: e[k] for k in ("gpu", "dtype", "shape", "regime", "block_size", "memory_pipelining",
                                      "schedule", "median_ms", "tuned_at", "candidates")}
                   for e in tuned if e["kernel"] == name and e["source_hash"] == spec.source_hash()]
        rows.append({"name": name, "title": spec.title, "dims": list(spec.dims),
                     "default_shape": spec.default_shape, "dtypes": per_dtype, "tuned": entries,
                     "source": user_file or "built-in", "reference": _reference(spec),
                     "knobs": ({k: v.model_dump() for k, v in spec.defn.knobs.items()}  # type: ignore[attr-defined]
                               if user_file else None)})
    if args.json:
        print_json({"profile": prof.name, "kernels": rows, "user_kernels_dir": str(user_kernels_dir()),
                    "user_kernel_errors": errors})
        return 0
    con = stdout_console()
    con.print(f"What fits profile {prof.name} ({prof.display_name}); another: tui kernels --profile NAME "
              "(tui profiles lists them)", markup=False, highlight=False)
    for r in rows:
        con.print(f"[bold]{r['name']}[/]  {r['title']}  dims={','.join(r['dims'])}")
        if r["source"] != "built-in":
            con.print(f"  user kernel from {r['source']}; knobs: " + "; ".join(
                f"{k} = {' | '.join(map(str, v['values']))}" + (f" ({v['role']})" if v["role"] else "")
                for k, v in r["knobs"].items()), markup=False, highlight=False)
            con.print(f"  reference: {r['reference']}", markup=False, highlight=False)
        for dt, d in r["dtypes"].items():
            at = "x".join(map(str, r["default_shape"].values())) or "any shape"
            default_text = f"{d['default'][0]}/{format_pipelining(d['default'][1])}" if d["default"] else "none"
            con.print(f"  {dt}: BLOCK_SIZE {' '.join(d['block_size'])} | MEMORY_PIPELINING at {at} "
                      f"{' '.join(format_pipelining(s) for s in d['memory_pipelining'])} "
                      f"| default at {at} {default_text} ({d['default_from']})", markup=False)
            if d["schedule"]:
                con.print("      schedule: " + "; ".join(f"{k} = {' | '.join(map(str, v))}"
                                                       for k, v in d["schedule"].items()), markup=False)
        for e in r["tuned"]:
            sched_text = ",".join(f"{k}={v}" for k, v in sorted(e["schedule"].items()))
            con.print(f"  tuned on {e['gpu']}: {e['dtype']} {e['shape']} ({e['regime']}) -> {e['block_size']}/"
                      f"{format_pipelining(e['memory_pipelining'])}{' ' + sched_text if sched_text else ''} "
                      f"{e['median_ms']:.4f} ms, {e['tuned_at'][:10]}, {e['candidates']} candidates", markup=False)
    for text in errors:
        con.print(f"skipped user kernel: {text}", markup=False, highlight=False)
    return 0


def _reference(spec: object) -> str | None:
    """How a user kernel's outputs are verified: its expression, or the Python file it runs."""
    if not isinstance(spec, UserKernelSpec):
        return None
    file = spec.reference_file
    if file is None:
        return f"expression {spec.defn.reference.expr}"
    trusted = "trusted" if spec.reference_trusted else "not trusted: --trust-reference to run it"
    return f"runs Python from {file} ({trusted})"
