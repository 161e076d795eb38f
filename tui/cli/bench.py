"""`tui bench`: validate, run one task in the engine process, print the result, store it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.markup import escape

from engine import (
    Event,
    LogEvent,
    ProgressEvent,
    RunResult,
    StageEvent,
    describe_bounds,
    describe_energy,
    is_multi,
    match_slow_knobs,
    prepare,
    run_prepared,
)
from tui.cli.baseline_cmd import add_bench_args, bench_guard, print_verdict
from tui.cli.device_args import add_spread_arg
from tui.cli.interruptible import Stopped, run_cancellable
from tui.cli.output import fmt, human, print_json, stderr_console, stdout_console
from tui.cli.task_args import add_task_args, task_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run one kernel task: compile, time, verify, compare with peers")
    add_task_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--store", type=Path, help="results store path (env SOL_COCKPIT_STORE)")
    p.add_argument("--no-store", action="store_true", help="do not save the result")
    p.add_argument("--untuned", action="store_true",
                   help="use the kernel's default knobs even where the tuning cache has a tuned entry")
    add_bench_args(p)
    add_spread_arg(p)
    p.set_defaults(func=run)


class Progress:
    """Stage progress on stderr: a live bar on a terminal, plain lines otherwise."""

    def __init__(self) -> None:
        self.console = stderr_console()
        self.tty = sys.stderr.isatty()
        self._bar: Any = None
        self._task_id: Any = None

    def __enter__(self) -> Progress:
        if self.tty:
            from rich.progress import BarColumn, TextColumn
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(TextColumn("{task.description:<10}"), BarColumn(), TextColumn("{task.fields[detail]}"),
                                     console=self.console, transient=True)
            self._bar.start()
            self._task_id = self._bar.add_task("compile", total=None, detail="")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            try:
                self._bar.stop()
            except OSError:  # the terminal is gone (SIGHUP): the signal in flight is what matters
                pass

    def __call__(self, ev: Event) -> None:
        if isinstance(ev, StageEvent):
            if self._bar is not None:
                self._bar.update(self._task_id, description=ev.stage, detail=ev.detail[:60], total=None, completed=0)
                if ev.state == "fail":
                    self.console.print(f"[red]{ev.stage} failed[/]: {ev.detail}")
            elif ev.state in ("done", "fail", "skip"):
                self.console.print(f"{ev.stage}: {ev.state} {ev.detail}".rstrip(), markup=False)
        elif isinstance(ev, ProgressEvent) and self._bar is not None:
            self._bar.update(self._task_id, total=ev.total, completed=ev.done, detail=f"{ev.done}/{ev.total}")
        elif isinstance(ev, LogEvent) and ev.level != "info":
            self.console.print(f"{ev.level}: {ev.message}", markup=False)


WIDE_TABLE = 100
"""Below this many columns the bench table leaves out p10 and p90, so that the labels keep room."""


def print_result(res: RunResult, notices: list[str], knobs_from: str = "default") -> None:
    con = stdout_console()
    if res.simulated:
        con.print("[reverse bold yellow] SIMULATED [/] timings come from the roofline model, not from a GPU")
    t = res.task
    con.print(f"[bold]{t.kernel}[/] shape={'x'.join(str(v) for v in (t.shape or {}).values())} "
              f"dtype={t.dtype} "
              f"BLOCK_SIZE={t.block_size} MEMORY_PIPELINING={t.memory_pipelining or 'off'} "
              f"fusion={'on' if t.fusion else 'off'} profile={res.profile}"
              + (f" schedule={','.join(f'{k}={v}' for k, v in sorted(t.schedule.items()))}" if t.schedule else "")
              + f" (knobs: {knobs_from})")
    if res.status.value != "ok" and res.timing is None:
        con.print(f"[red]status: {res.status.value}[/]  {res.error}")
        for r in res.matched_rules:
            con.print(f"  [yellow]rule {r.get('id')}[/]: {r.get('title')} -- fix: {r.get('fix')}")
        return
    _print_figures(con, res)
    _print_findings(con, res)


def _print_figures(con: Any, res: RunResult) -> None:
    """The table of ours and the peers (median, spread, rates, SOL, correct) and its notes."""
    from rich.table import Table

    sol = res.sol
    wide = con.width >= WIDE_TABLE
    cols = ["implementation", "median ms", "p10", "p90", "TFLOP/s", "GB/s", "SOL %", "correct"]
    shown = cols if wide else [c for c in cols if c not in ("p10", "p90")]
    tab = Table(title=f"status: {res.status.value}" + ("  [SIMULATED]" if res.simulated else ""))
    for col in shown:  # the figures never wrap; the labels take what is left
        tab.add_column(col, justify="right" if col != "implementation" else "left",
                       no_wrap=col != "implementation", overflow="fold")
    c = res.correctness
    tm = res.timing
    info = res.launch.info or {}
    if info.get("path"):  # the whole line: a table column would cut it at 80 columns
        con.print(f"ours: {info['path']}" + (f"; {info['math']}" if info.get("math") else ""))

    def row(label: str, median: str, p10: str, p90: str, rest: tuple[str, ...]) -> None:
        cells = dict(zip(cols, (label, median, p10, p90, *rest), strict=True))
        tab.add_row(*(cells[col] for col in shown))

    row("ours", fmt(tm.median_ms if tm else None, ".4f"), fmt(tm.p10_ms if tm else None, ".4f"),
        fmt(tm.p90_ms if tm else None, ".4f"), (fmt(sol and sol.tflops, ".1f"), fmt(sol and sol.gbps, ".0f"),
                                                fmt(sol and sol.sol_pct, ".1f"),
                                                "-" if c is None else ("yes" if c.correct else "[red]NO[/]")))
    not_timed = []
    for p in res.peers:
        label = escape(p.label.replace(" [SIMULATED]", "") if res.simulated else p.label)
        if p.timing is None:
            missing = any(w in (p.error or "") for w in ("not installed", "No module named"))
            row(label, "[dim]not run[/]" if missing else "[red]failed[/]", "", "", ("", "", "", "-"))
            not_timed.append(f"{label}: {escape(p.error or 'no time')}")
            continue
        row(label + (" (score baseline)" if p.name == res.baseline_peer else ""), fmt(p.timing.median_ms, ".4f"),
            fmt(p.timing.p10_ms, ".4f"), fmt(p.timing.p90_ms, ".4f"),
            (fmt(p.tflops, ".1f"), fmt(p.gbps, ".0f"), fmt(p.sol_pct, ".1f"),
             "-" if p.correct is None else ("yes" if p.correct else "[red]NO[/]")))
    con.print(tab)
    for line in not_timed:
        con.print(f"[dim]not timed:[/] {line}")
    if not wide:
        con.print(f"[dim]p10 and p90 not shown at {con.width} columns (--json has them)[/]")


def _print_findings(con: Any, res: RunResult) -> None:
    """What the figures mean and what was seen: bounds and score, measured ceilings, verification,
    energy, throttling, other processes, the rules' findings and where the run is stored."""
    sol, c = res.sol, res.correctness
    if res.peers_caveat:
        con.print(f"[yellow]note:[/] {res.peers_caveat}")
    if res.timing_note:
        con.print(f"timing: {res.timing_note}", markup=False)
    con.print(f"{describe_bounds(sol)}; compute {fmt(sol and sol.compute_util_pct, '.1f')} % / "
              f"bandwidth {fmt(sol and sol.bandwidth_util_pct, '.1f')} % of {res.profile} peaks; "
              f"{score_text(res)}", markup=False)
    if res.sol_measured:
        sm = res.sol_measured
        con.print(f"against measured ceilings ({res.measured_profile}): T_SOL {sm.t_sol_ms:.4f} ms, SOL "
                  f"{fmt(sm.sol_pct, '.1f')} %, compute {fmt(sm.compute_util_pct, '.1f')} % / bandwidth "
                  f"{fmt(sm.bandwidth_util_pct, '.1f')} %")
    if c is not None:
        con.print(f"verification: max abs err {c.max_abs_err:.3g}, max rel err {c.max_rel_err:.3g} (rtol {c.rtol:g}), "
                  f"normwise {c.normwise_rel_err:.3g}, NaN {c.nan_count}, Inf {c.inf_count}, unwritten {c.unwritten_count}"
                  + (f" -- {c.note}" if c.note else ""))
    if res.energy is not None:
        con.print(describe_energy(res.energy))
    v = res.validity
    if v.throttle_reasons_seen:
        con.print(f"[yellow]clocks throttled during the run:[/] {', '.join(v.throttle_reasons_seen)}")
    if v.other_processes:
        procs = "; ".join(human(p.model_dump()) for p in v.other_processes)
        con.print(f"[yellow]other processes on the GPU:[/] {procs}", highlight=False)
    if res.error:
        con.print(f"[red]{res.error}[/]")
    for r in res.matched_rules:  # an ok run's findings (a failed one's are printed above)
        con.print(f"[yellow]finding ({r.get('id')}):[/] {escape(str(r.get('title')))}: "
                  f"{escape(str(r.get('evidence')))}; fix: {escape(str(r.get('fix')))}")
    if res.run_id is not None:
        con.print(f"stored as run {res.run_id}")


def _keep_cancelled(store: Any, res: Any) -> None:
    """Store the record of a run a signal stopped (status cancelled, the stage it reached)."""
    if store is None or res is None:
        return
    from engine import CockpitError

    try:
        store.save(res)
    except CockpitError:
        return
    try:
        print(f"the cancelled run is stored as run {res.run_id}", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # the terminal is gone (SIGHUP)
        pass


def score_text(res: Any) -> str:
    """The SOL-ExecBench score with the one peer it is against."""
    if res.solexec_score is None:
        return "SOL-ExecBench score -" + (" (no baseline peer timed)" if res.baseline_peer is None else "")
    peer = next((p for p in res.peers if p.name == res.baseline_peer), None)
    return f"SOL-ExecBench score {res.solexec_score:.3f} against {peer.label if peer else res.baseline_peer}"


def run(args: argparse.Namespace) -> int:
    """The store is opened and checked before the run (an unusable one is exit 2 with nothing
    run); one that fails after the run still gets the result printed, with a line saying it was
    not stored, and the run's own exit status."""
    from engine import CockpitError, ResultStore

    if is_multi(args.device):  # every GPU at once (tui.cli.every_gpu)
        from tui.cli.every_gpu import run_bench_all

        return run_bench_all(args)
    task = task_from_args(args)
    store = None if args.no_store else ResultStore(args.store)
    if store is not None:
        store.check()
    prep = prepare(task, args.profile, store=None if args.untuned else (store or ResultStore(args.store)))
    guard = bench_guard(args, prep)  # --against-baseline: found before anything runs
    err = stderr_console()
    for n in prep.notices:
        err.print(f"[yellow]{n}[/]")
    with Progress() as progress:
        try:
            res = run_cancellable(lambda cancel: run_prepared(prep, on_event=progress, cancel=cancel))
        except Stopped as stop:
            _keep_cancelled(store, stop.result)
            raise
    not_stored = None
    if store is not None:
        try:
            res.matched_rules += [m.to_dict() for m in match_slow_knobs(res, store)]
            store.save(res)
        except CockpitError as exc:
            not_stored = exc
    knobs_from = prep.plan.source_label if prep.plan else "default"
    verdict = None if guard is None else guard.judge(res)
    if args.json:
        out = res.summary_json()
        out["notices"] = prep.notices
        out["knobs_from"] = knobs_from
        out["profile_provisional"] = prep.profile.provisional
        if verdict is not None:
            out["against_baseline"] = verdict.to_json()
        print_json(out)
    else:
        print_result(res, prep.notices, knobs_from)
        if verdict is not None:
            print_verdict(verdict)
    if not_stored is not None:
        print(f"error: the run was not stored: {not_stored}", file=sys.stderr)
    return 0 if res.ok and not (verdict is not None and verdict.regression) else 1
