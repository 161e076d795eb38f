"""The Run screen's pure renderers: the result table (kernel and peers), the summary lines, the
knobs line, the comparison with the previous run of the same task, and what a failed or cancelled
run says. Tested without an app."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from engine import PlanError, RecordedTask, RunResult, describe_bounds, format_pipelining, plan
from tui.widgets.format import NA, fmt, fmt_delta_pct, fmt_ms, fmt_shape, fmt_value


def result_table(result: RunResult, wide: bool = False, width: int = 0) -> Table:
    """Time, throughput and correctness of the kernel and its peers, one row each (p10 and p90
    columns only on wide terminals; the summary line above has the kernel's). ``width``: the
    cells available, so long peer names are cut and the figures stay whole."""
    t = Table(box=None, expand=False, pad_edge=False, header_style="bold")
    cols = ["implementation", "median"] + (["p10", "p90"] if wide else []) + ["TFLOP/s", "GB/s", "SOL %", "ok"]
    names = max(30, width - 60) if wide else 30
    for col in cols:
        t.add_column(col, justify="left" if col == "implementation" else "right", no_wrap=True,
                     max_width=names if col == "implementation" else None, overflow="ellipsis")

    def row(label, tm, tflops, gbps, sol_pct, ok, style=""):
        times = [fmt_ms(tm.median_ms if tm else None)]
        if wide:
            times += [fmt_ms(tm.p10_ms if tm else None), fmt_ms(tm.p90_ms if tm else None)]
        t.add_row(label, *times, fmt(tflops, digits=1), fmt(gbps), fmt(sol_pct, digits=1), ok, style=style)

    sol = result.sol
    ok = NA if result.correctness is None else ("yes" if result.correctness.correct else "NO")
    row("this kernel" + (" [SIM]" if result.simulated else ""), result.timing, sol and sol.tflops,
        sol and sol.gbps, sol and sol.sol_pct, ok, style="bold")
    for p in result.peers:
        label = p.label.replace(" [SIMULATED]", "")
        if p.baseline:  # the baseline's mark survives a cut name
            label = (label if len(label) <= names - 2 else label[:names - 3] + "…") + " *"
        pok = NA if p.correct is None else ("yes" if p.correct else "NO")
        row(label, p.timing, p.tflops, p.gbps, p.sol_pct, p.error[:20] if p.error else pok)
    return t


def summary_text(result: RunResult) -> Text:
    """Status, T_SOL and bound, score, correctness: the few lines an operator reads first."""
    sol = result.sol
    out = Text()
    style = "bold green" if result.ok else "bold red"
    out.append(f"{result.status.value.upper()}", style=style)
    if result.simulated:
        out.append("  SIMULATED", style="bold magenta")
    if result.run_id is not None:
        out.append(f"  run #{result.run_id}", style="dim")
    if result.timing is not None:
        tm = result.timing
        out.append(f"\nmedian {fmt_ms(tm.median_ms)}  p10 {fmt_ms(tm.p10_ms)}  p90 {fmt_ms(tm.p90_ms)}"
                   f"  {fmt(sol and sol.tflops, 'TFLOP/s', 1)}  {fmt(sol and sol.gbps, 'GB/s')}")
    out.append(f"\n{describe_bounds(sol)}  score {fmt(result.solexec_score, digits=3)}")
    if result.peers_caveat:
        out.append(f"\nnote: {result.peers_caveat}", style="dim")
    if result.timing_note:
        out.append(f"\ntiming: {result.timing_note}", style="dim")
    if result.sol_measured:
        sm = result.sol_measured
        out.append(f"\nvs measured ceilings ({result.measured_profile}): T_SOL {fmt_ms(sm.t_sol_ms)}  "
                   f"SOL {fmt(sm.sol_pct, '%', 1)}")
    c = result.correctness
    if c is not None:
        out.append(f"\nmax abs err {c.max_abs_err:.3g}  rel {c.normwise_rel_err:.3g}  "
                   f"NaN {c.nan_count}  Inf {c.inf_count}")
    e = result.energy
    if e is not None:
        out.append("\n" + (f"energy not measured: {e.note}" if e.note is not None or e.watts is None else
                           f"board {e.watts:.0f} W  {e.mj_per_launch or 0:.3g} mJ/launch  "
                           f"{fmt(e.gflop_per_j, 'GFLOP/J')}"))
    return out


def resolved_knobs(task: Any, profile: Any, tuned: Any = None) -> dict[str, Any]:
    """The task with the knobs that will run (the engine's plan: the task's own, tuned or the
    kernel's defaults for this profile and shape) and where they came from (``knobs_from``), so
    the cockpit shows what will run. ``tuned``: the tuning cache lookup the run will use."""
    d = task.model_dump(mode="json")
    if profile is None:
        return d
    try:
        p = plan(task, profile, tuned)
    except PlanError:
        return d
    d["block_size"] = None if p.task.block_size is None else str(p.task.block_size)
    d["memory_pipelining"] = p.task.memory_pipelining
    d["schedule"] = dict(p.task.schedule)
    d["knobs_from"] = p.source_label
    return d


def knobs_of(task: dict[str, Any]) -> str:
    pl = task.get("memory_pipelining")
    sched = ",".join(f"{k}={v}" for k, v in (task.get("schedule") or {}).items())
    return (f"BLOCK_SIZE={task.get('block_size')} MEMORY_PIPELINING={format_pipelining(pl)} "
            + (f"schedule={sched} " if sched else "")
            + f"fusion={'on' if task.get('fusion') else 'off'}"
            + (f" (knobs: {task['knobs_from']})" if task.get("knobs_from") else ""))


def pipe_text(stages: int | None) -> str:
    """MEMORY_PIPELINING as shown: 'off', a stage count, or '-' when not recorded."""
    return "-" if stages is None else format_pipelining(stages)


def task_identity(task: RecordedTask) -> tuple[Any, ...]:
    """What makes two runs comparable: the same kernel, shape and dtype."""
    return task.kernel, task.shape, task.dtype


def comparison_table(new: RunResult, old: RunResult | None) -> Table | Text:
    """The change from the previous run of the same kernel, shape and dtype (``old``): the knobs
    that differ and the headline figures."""
    if old is None:
        what = f"{new.task.kernel or 'this kernel'} {fmt_shape(new.task.shape)} {new.task.dtype or ''}"
        return Text(f"No earlier stored run of {what.strip()} on {new.profile} to compare with: "
                    "change a knob (3 Tune) and run again.", style="dim")
    t = Table(box=None, pad_edge=False, header_style="bold", title_justify="left")
    t.add_column("vs previous", no_wrap=True)
    t.add_column(f"#{old.run_id}" if old.run_id else "previous", justify="right", no_wrap=True)
    t.add_column(f"#{new.run_id}" if new.run_id else "this", justify="right", no_wrap=True)
    t.add_column("change", no_wrap=True)
    o, n = old.task, new.task
    knobs: tuple[tuple[str, Any, Any], ...] = (
        ("BLOCK_SIZE", o.block_size, n.block_size), ("MEMORY_PIPELINING", o.memory_pipelining, n.memory_pipelining),
        ("schedule", o.schedule, n.schedule), ("fusion", o.fusion, n.fusion), ("iterations", o.iterations, n.iterations))
    for label, a, b in knobs:
        if label == "schedule" and not a and not b:
            continue
        sa, sb = (pipe_text(a), pipe_text(b)) if label == "MEMORY_PIPELINING" else (fmt_value(a), fmt_value(b))
        t.add_row(label, sa, sb, "changed" if a != b else "", style="yellow" if a != b else "")
    om, nm = (old.timing.median_ms if old.timing else None), (new.timing.median_ms if new.timing else None)
    t.add_row("median", fmt_ms(om), fmt_ms(nm), fmt_delta_pct(nm, om))
    osol, nsol = old.sol and old.sol.sol_pct, new.sol and new.sol.sol_pct
    t.add_row("SOL %", fmt(osol, digits=1), fmt(nsol, digits=1), fmt_delta_pct(nsol, osol, lower_is_better=False))
    t.add_row("score", fmt(old.solexec_score, digits=3), fmt(new.solexec_score, digits=3),
              fmt_delta_pct(new.solexec_score, old.solexec_score, lower_is_better=False))
    oe, ne = old.energy and old.energy.mj_per_launch, new.energy and new.energy.mj_per_launch
    if oe is not None or ne is not None:  # at a power cap the joules per launch set the pace
        t.add_row("mJ/launch", fmt(oe, digits=1), fmt(ne, digits=1), fmt_delta_pct(ne, oe))
    return t


def failure_text(result: RunResult, rules: list[dict[str, Any]]) -> Text:
    """A run that did not produce a result: its error and the matching rules. A cancelled run is
    no failure: it says so and where it stopped, and matches no rule."""
    out = Text()
    if result.status.value == "cancelled":
        out.append("CANCELLED", style="bold magenta")
        out.append(f": {result.error or 'cancelled by the user'}. Nothing was measured; r runs the task again.")
        return out
    out.append(f"{result.status.value}: ", style="bold red")
    out.append((result.error or "").strip().splitlines()[0] if result.error else "no detail")
    if rules:
        for r in rules[:2]:
            out.append(f"\nrule {r.get('id')}: ", style="bold")
            out.append(str(r.get("title") or ""))
            if r.get("fix"):
                out.append(f"\n  fix: {r['fix']}", style="green")
        out.append("\nMore in 6 Diagnose.", style="dim")
    else:
        out.append("\nNo troubleshooting rule matched; the run log is below.", style="dim")
    return out
