"""`tui inspect PATH [--profile NAME] [--run [--timeout S] -- ARGS]`: a C++/CUDA binary checked
before it runs: its GPU architectures against the GPU, its libraries, its CUDA runtime against the
driver, and optionally a smoke run read with the troubleshooting rules."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from engine import InputError
from tui.cli.output import print_json, stdout_console

EXIT_RUNNABLE, EXIT_BLOCKED, EXIT_BAD_INPUT = 0, 1, 2
STYLE = {"error": "bold red", "warn": "yellow", "info": "dim"}
SMOKE_LINES = 20
"""Lines of the smoke run's output shown in the human report."""

_HELP = f"""\
examples:
  tui inspect ./app                      the GPU here (NVML), else an assumed profile
  tui inspect ./libkernels.so --profile h200
  tui inspect ./app --run --timeout 30 -- --size 1024

exit status:
  {EXIT_RUNNABLE}  nothing found that stops it running (warnings may remain)
  {EXIT_BLOCKED}  a finding blocks it: no code for the GPU, a missing library, a driver too old, a failed smoke run
  {EXIT_BAD_INPUT}  bad input: a missing or non-ELF file, a binary without CUDA code, an unknown profile"""


class _ProgramArgsParser(argparse.ArgumentParser):
    """Everything after the first ``--`` belongs to the program ``--run`` starts, whatever it
    looks like (``-- --size 1024 --json``): it is set aside before the options are parsed."""

    def parse_known_args(self, args=None, namespace=None):
        words = list(args or [])
        tail: list[str] | None = None
        if "--" in words:
            cut = words.index("--")
            words, tail = words[:cut], words[cut + 1:]
        ns, extras = super().parse_known_args(words, namespace)
        ns.program_args = tail
        return ns, extras


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0 or value > 86400:
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most 86400 seconds, not {text}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="check a C++/CUDA binary before it runs (architectures, libraries, runtime)",
                       description=__doc__, epilog=_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.__class__ = _ProgramArgsParser
    p.add_argument("path", type=Path, metavar="PATH", help="an executable or shared library (.so)")
    p.add_argument("--profile", help="judge for this profile's GPU (default: the GPU NVML sees)")
    p.add_argument("--device", type=int, default=0, help="which GPU NVML asks about (default 0)")
    p.add_argument("--run", action="store_true",
                   help="also run it once as a smoke test (program arguments after --) and diagnose its output")
    p.add_argument("--timeout", type=_timeout, default=60.0, metavar="S",
                   help="seconds the smoke run may take before it is killed (default 60)")
    p.add_argument("--json", action="store_true",
                   help="print the report as JSON: findings [{id, severity, title, detail, fix, rule}] and more")
    p.set_defaults(func=run, program_args=None)


def run(args: argparse.Namespace) -> int:
    from engine import inspect_binary

    program_args = getattr(args, "program_args", None)
    if program_args is not None and not args.run:
        raise InputError(f"arguments after -- ({' '.join(program_args) or 'none'}) are for the program, which "
                         "only --run starts", fix="add --run, or drop the --")
    if args.device < 0:
        raise InputError(f"device={args.device}: a GPU index is 0 or more", fix="pass --device 0 (the first GPU)")
    if args.profile:
        from tui.cli.known_names import known_profile

        known_profile(args.profile)  # before the binary is read: a typo names the known profiles
    report = inspect_binary(args.path, profile=args.profile, device=args.device,
                            run_args=(program_args or []) if args.run else None, timeout_s=args.timeout)
    code = EXIT_RUNNABLE if report.runnable else EXIT_BLOCKED
    if args.json:
        print_json({"status": "runnable" if report.runnable else "blocked", **report.to_dict(), "exit_code": code})
        return code
    _print_human(report)
    return code


def _print_human(report) -> None:
    con = stdout_console()
    t = report.target
    con.print(f"[bold]{escape(report.path)}[/] ({report.kind}, {report.machine})")
    code = "; ".join(x for x in (f"SASS {', '.join(report.sass)}" if report.sass else "",
                                 f"PTX {', '.join(report.ptx)}" if report.ptx else "") if x) or "none of its own"
    con.print(f"device code: {escape(code)} [dim](from the {report.code_source})[/]")
    origin = {"nvml": "this machine's GPU", "profile": f"profile {t.profile}", "assumed": f"assumed profile {t.profile}"}
    con.print(f"judged for: {escape(t.name)} (cc {t.compute_capability}), {origin[t.source]}; driver: "
              f"{escape(t.driver_version or 'none here')}" + (f" (CUDA {t.driver_cuda})" if t.driver_cuda else ""))
    if t.note:
        con.print(f"[yellow]note:[/] {escape(t.note)}")
    via = {"sass": "its SASS", "ptx-jit": "PTX JIT (compiled by the driver at the first launch)",
           "none": "[bold red]no code for this GPU[/]", "unknown": "the libraries it links (no kernels of its own)"}
    con.print(f"reaches the GPU through: {via[report.runs_via]}")
    rt = report.runtime
    runtime = {"shared": f"{rt.soname} (shared), version {rt.version}", "static": "linked statically"
               + (f", CUDA {rt.version}" if rt.version else ""), "none": "none (driver API or libraries only)"}
    con.print(f"CUDA runtime: {escape(runtime[rt.linkage])}" + (f"; built with CUDA {rt.built_with}" if rt.built_with else ""))
    missing = [lib.name for lib in report.libraries if not lib.found]
    libs = (f"{len(report.libraries)} resolved by ldd" + (f", [bold red]{len(missing)} missing: "
                                                          f"{escape(', '.join(missing))}[/]" if missing else ", none missing"))
    con.print(f"libraries: {libs if not report.libraries_note else escape(report.libraries_note)}")
    if report.smoke:
        s = report.smoke
        how = (f"killed at the {s.timeout_s:g} s timeout" if s.timed_out else
               f"killed by {s.signal}" if s.signal else f"exit status {s.exit_code}")
        con.print(f"smoke run: {escape(' '.join(s.command))}: {how} after {s.wall_s:.2f} s, "
                  f"{s.output_bytes} bytes of output")
        lines = s.output_tail.rstrip().splitlines()[-SMOKE_LINES:]
        for line in lines:
            con.print(f"  [dim]|[/] {escape(line)}", soft_wrap=True)
    if report.findings:
        table = Table(title="Findings (errors block running)", show_lines=True)
        for col in ("severity", "finding", "detail", "fix"):
            table.add_column(col, overflow="fold")
        for f in report.findings:
            table.add_row(f"[{STYLE[f.severity]}]{f.severity.upper()}[/]", f"[bold]{escape(f.title)}[/]\n[dim]{f.id}[/]",
                          escape(f.detail), f"{escape(f.fix)}\n[dim]rule: {f.rule} (tui diagnose)[/]")
        con.print(table)
    blocking = len(report.blocking)
    con.print("[green]runnable: nothing found that stops it[/]" if not blocking else
              f"[bold red]will not run as it is: {blocking} blocking finding{'s' if blocking > 1 else ''}[/]")
