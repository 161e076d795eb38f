"""`tui <command> ...`: argument parsing and dispatch to one module per command."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import sys
import threading

from engine import CockpitError, __version__

COMMANDS = {
    "bench": "tui.cli.bench",
    "soak": "tui.cli.soak_cmd",
    "tune": "tui.cli.tune_cmd",
    "profiles": "tui.cli.profiles_cmd",
    "history": "tui.cli.history",
    "kernels": "tui.cli.kernels_cmd",
    "calibrate": "tui.cli.calibrate_cmd",
    "check": "tui.cli.check",
    "diagnose": "tui.cli.diagnose",
    "inspect": "tui.cli.inspect_cmd",
    "checklist": "tui.cli.checklist_cmd",
    "report": "tui.cli.report",
    "fleet-report": "tui.cli.fleet_report_cmd",
    "fleet": "tui.cli.fleet_cmd",
    "export": "tui.cli.export_cmd",
    "serve": "tui.cli.serve_cmd",
    "baseline": "tui.cli.baseline_cmd",
    "batch": "tui.cli.batch_cmd",
    "exporter": "tui.cli.exporter_cmd",
}
"""Command name -> module with ``register(subparsers)`` and ``run(args) -> int``."""

SUMMARIES = {
    "bench": "run one kernel task: compile, time, verify, compare with peers",
    "soak": "run the kernel back to back for a duration: drift, throttling, silent data corruption, ECC and "
            "Xid errors (exit 1 on an error or drift)",
    "tune": "search the kernel's knobs for the fastest correct configuration per shape",
    "profiles": "list hardware profiles (datasheet peaks and limits)",
    "history": "list stored runs",
    "kernels": "list kernels and the BLOCK_SIZE / MEMORY_PIPELINING values that fit",
    "calibrate": "measure this GPU's copy bandwidth and GEMM rates; save them as a profile",
    "check": "check the driver, CUDA stack, GPU health and host (exit 1 on a failure)",
    "diagnose": "explain a log: matching troubleshooting rules, best first",
    "inspect": "check a C++/CUDA binary before it runs (architectures, libraries, runtime)",
    "checklist": "the operators' checklist for this host (resumable)",
    "report": "write a shareable report (checks, profile, best runs, rules fired)",
    "fleet-report": "checks + the seed bench on each GPU, as one JSON report per host (what the Kubernetes "
                    "and Slurm exports run)",
    "fleet": "one table of the fleet reports in a folder, outliers marked (exit 1 when any)",
    "export": "a Kubernetes Job/DaemonSet or a Slurm script that runs the fleet report",
    "serve": "serve the cockpit to web browsers (textual-serve; loopback only by default)",
    "baseline": "performance baselines: set, list, clear (bench --against-baseline judges them)",
    "batch": "run the tasks of a TOML file in turn: timeouts, one retry, stop after 3 failures",
    "exporter": "serve GPU telemetry and stored results on /metrics for Prometheus",
}
"""Each command's one line in ``tui --help``, the same as its module registers (a test holds them
equal): the top-level help and a mistyped command's list need no command's module."""


def build_parser(command: str | None = None, *, summaries_only: bool = False) -> argparse.ArgumentParser:
    """The whole CLI's parser; with ``command`` (one of COMMANDS), the same parser holding that
    command alone: a run of one command neither imports nor registers the others (a fifth of a
    second at start), and its usage, help and errors are the same. Anything else (no command, an
    option, a typo) gets them all, for the help and the 'invalid choice' list; with
    ``summaries_only`` as bare entries with their one line (what ``tui --help`` and a typo show),
    so that neither imports any command's module."""
    parser = argparse.ArgumentParser(
        prog="tui",
        description="SOL Cockpit: environment checks, hardware profiles, fused kernels and their "
                    "Speed-of-Light figures. Without a command, opens the terminal cockpit.",
    )
    parser.add_argument("--version", action="version", version=f"sol-cockpit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, modname in COMMANDS.items():
        if name == command or (command not in COMMANDS and not summaries_only):
            importlib.import_module(modname).register(sub)
        elif command not in COMMANDS:
            sub.add_parser(name, help=SUMMARIES[name])
    return parser


class Signalled(KeyboardInterrupt):
    """SIGTERM or SIGHUP (a closed terminal or SSH session), raised where the command is, so it
    unwinds like Ctrl-C: the engine process is killed on the way out and the exit status is
    128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_signalled(signum: int, frame: object) -> None:
    raise Signalled(signum)


def _handle_stop_signals() -> dict[int, object]:
    """SIGTERM and SIGHUP as Ctrl-C, unless ignored already (``nohup`` means keep running).
    Returns the handlers replaced, for a caller (a test) that goes on after the command."""
    replaced: dict[int, object] = {}
    if threading.current_thread() is not threading.main_thread():
        return replaced
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None and signal.getsignal(sig) is signal.SIG_DFL:
            replaced[sig] = signal.signal(sig, _raise_signalled)
    return replaced


def _say(text: str) -> None:
    """To stderr, if it is still there (after SIGHUP the terminal may be gone)."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _drop_dead_streams() -> None:
    """Point stdout and stderr at /dev/null when they can no longer be written (a closed
    terminal), so that the flush at exit does not turn the exit status into 120."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            try:
                fd = os.open(os.devnull, os.O_WRONLY)
                os.dup2(fd, stream.fileno())
                os.close(fd)
            except (OSError, ValueError):
                pass


def error_json(message: str, fix: str | None, code: int) -> dict[str, object]:
    """The one JSON object a --json command prints when it fails before a result: status, the error,
    the field it names, the fix and the exit code. The field is read from the message as errors here
    are written: argparse's 'argument --limit: ...', a 'field=value: ...' part before the reason
    ('task file t.toml: shape=m=10: ...'), or 'unknown profile ...'."""
    head = message.split(": ", 1)[0]
    field: str | None = None
    if head.startswith("argument "):  # argparse: 'argument --limit: ...'
        field = head.removeprefix("argument ").split("/")[0]
    else:
        for part in message.split(": ")[:3]:
            name = part.split("=", 1)[0]
            if "=" in part and name and " " not in name:
                field = name
                break
        else:
            unknown = re.match(r"unknown (kernel|profile|check|step)\b", message)
            field = unknown.group(1) if unknown else None
    return {"status": {2: "invalid", 3: "unavailable"}.get(code, "error"), "error": message, "field": field,
            "fix": fix, "exit_code": code}


def _innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command's own parser that ``args`` went through: ``tui baseline set`` -> its ``set``."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, subs[0].dest, None) if subs and subs[0].dest != argparse.SUPPRESS else None
        if not subs or chosen not in subs[0].choices:
            return parser
        parser = subs[0].choices[chosen]


def parse_command_line(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """argparse's parse, with a word no option takes reported by the command's own parser (its
    usage, ``tui soak: error: ...``), not by the top level's ``usage: tui [-h] COMMAND``."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        _innermost(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None, want_json: bool) -> argparse.Namespace:
    """argparse's parse, whose errors (exit 2) become one JSON object where --json was asked for."""
    if not want_json:
        return parse_command_line(parser, argv)
    import contextlib
    import io

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parse_command_line(parser, argv)
    except SystemExit as exc:
        text = err.getvalue().strip()
        if exc.code not in (0, None):
            message = text.splitlines()[-1].split("error: ", 1)[-1] if text else "invalid arguments"
            _print_json(error_json(message, "see --help", 2))
        if text:  # argparse's own words still go to stderr
            _say(text)
        raise


def _print_json(obj: object) -> None:
    from tui.cli.output import print_json

    print_json(obj)


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(words[0] if words else None, summaries_only=True)
    want_json = "--json" in words
    args = _parse(parser, argv, want_json)
    if not args.command:
        parser.print_help()
        return 0
    replaced = _handle_stop_signals()
    try:
        return int(args.func(args) or 0)
    except CockpitError as exc:
        _say(f"error: {exc}")
        if exc.exit_code == 3 and hasattr(args, "backend") and args.backend != "sim":
            # The engine's fix names no front end's control: here it is a flag (the cockpit says S);
            # said on stderr, the JSON's fix stays the engine's.
            _say("  or rehearse without a GPU: --backend sim")
        if getattr(args, "json", False):
            _print_json(error_json(exc.message, exc.fix, exc.exit_code))
        return exc.exit_code
    except KeyboardInterrupt as exc:
        signum = getattr(exc, "signum", signal.SIGINT)  # Signalled, or a Stopped job that carries it
        _say("interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}")
        _drop_dead_streams()
        return 128 + int(signum)
    finally:
        for sig, handler in replaced.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
