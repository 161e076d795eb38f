"""`tui tune`: search the kernel's knobs for the fastest correct configuration at each shape, keep it
in the tuning cache, and compare it with the planner's default and the peers. ``--export`` and
``--import`` share the cache between machines of the same GPU model.

Exit status: 0 every shape has a correct tuned configuration; 1 a shape has none (or its tune
crashed); 2 bad input; 130 interrupted (what was measured is kept)."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from engine import TUNE_REGIMES as REGIMES
from engine import Event, InputError, TaskSpec, TrialEvent, load_toml, parse_shape_text
from tui.cli.output import fmt, print_json, stderr_console, stdout_console
from tui.cli.task_args import add_task_args, task_from_args

MAX_SHAPES = 256


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="search the kernel's knobs for the fastest correct configuration per shape")
    add_task_args(p)
    p.add_argument("--shapes", type=Path, metavar="FILE.toml",
                   help="a list of shapes to tune, e.g. the projections of one model: [[shape]] tables "
                        "with the kernel's dimensions (m, n, k) and an optional name")
    p.add_argument("--budget", type=float, default=60.0, metavar="SECONDS",
                   help="wall time for one shape, compiles included (default 60)")
    p.add_argument("--regime", choices=REGIMES, default="burst",
                   help="burst: each candidate and peer after a rest (default); sustained: each after "
                        "back-to-back launches at the board's power cap, as a deployed kernel runs")
    p.add_argument("--export", type=Path, metavar="FILE.toml", help="write the tuning cache to a file and exit")
    p.add_argument("--import", dest="import_", type=Path, metavar="FILE.toml",
                   help="read a tuning cache written by --export (same kernel sources) and exit")
    p.add_argument("--list", action="store_true", help="list the tuning cache's entries and exit")
    p.add_argument("--top", type=int, default=10, help="trials shown per shape (default 10)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--store", type=Path, help="results store path (env SOL_COCKPIT_STORE)")
    p.set_defaults(func=run)


def read_shapes(path: Path) -> list[dict[str, Any]]:
    """[[shape]] tables (dimension = integer, optional name) or shapes = ["m=1,n=4096,k=4096", ...]:
    a list of {"name", "shape"}; InputError naming the entry for anything else."""
    doc = load_toml(path, "shapes file")
    rows = doc.get("shape", doc.get("shapes"))
    if not isinstance(rows, list) or not rows:
        raise InputError(f"shapes file {path}: expected [[shape]] tables or shapes = [...]",
                         fix='e.g. [[shape]]\\nname = "o_proj"\\nm = 8192\\nn = 2560\\nk = 2560')
    if len(rows) > MAX_SHAPES:
        raise InputError(f"shapes file {path}: {len(rows)} shapes; at most {MAX_SHAPES} a file")
    out = []
    for i, row in enumerate(rows, 1):
        if isinstance(row, str):
            try:
                shape = parse_shape_text(row)
            except ValueError as exc:
                raise InputError(f"shapes file {path}: shape {i}: {exc}") from None
            out.append({"name": row, "shape": shape})
            continue
        if not isinstance(row, dict):
            raise InputError(f"shapes file {path}: shape {i} is neither a table nor a string")
        row = dict(row)
        name = str(row.pop("name", f"shape {i}"))
        bad = {k: v for k, v in row.items() if isinstance(v, bool) or not isinstance(v, int)}
        if bad or not row:
            got = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in (bad or row).items()) or "nothing"
            raise InputError(f"shapes file {path}: shape {i} ({name}): dimensions must be integers, got {got}")
        out.append({"name": name, "shape": row})
    return out


class Progress:
    """Candidates timed and the best so far, on stderr: one line rewritten in place on a terminal;
    off one (a pipe, a log) a line every ``PIPE_EVERY_S`` seconds at most, not one per trial. The
    fraction is the search step's own ('variations round 2: 3/8'), whose candidates are known when
    it starts; the candidates known in all grow round by round, so no line divides by them."""

    PIPE_EVERY_S = 5.0

    def __init__(self, label: str) -> None:
        self.console = stderr_console()
        self.label = label
        self.tty = sys.stderr.isatty()
        self.last = -1e9

    def __call__(self, ev: Event) -> None:
        if not isinstance(ev, TrialEvent) or ev.state != "done":
            return
        t = ev.trial
        from engine import knob_label

        if t["status"] == "skipped":
            return
        now = time.monotonic()
        if not self.tty and now - self.last < self.PIPE_EVERY_S:
            return
        self.last = now
        knobs = knob_label(t["block_size"], t["memory_pipelining"], t.get("schedule"))
        took = fmt(t.get("median_ms"), ".4f") + " ms" if t.get("median_ms") else t["status"]
        best = f"best {ev.best_ms:.4f} ms" if ev.best_ms else "no correct candidate yet"
        count = (f"{ev.step}: {ev.step_done}/{ev.step_total}, " if ev.step else "") + f"{ev.done} timed"
        line = f"{self.label} {count}: {knobs:<38} {took:<12} {best}"
        if self.tty:  # one row rewritten in place: a wrapped line would leave its first rows behind
            width = self.console.width - 1
            self.console.print(line if len(line) <= width else line[:width - 1] + "…", markup=False, end="\r")
        else:  # a log keeps each line whole, however wide
            self.console.print(line, markup=False, soft_wrap=True)


def _task_for(args: argparse.Namespace, shape: dict[str, int] | None) -> TaskSpec:
    task = task_from_args(args)
    if shape is not None:
        task = TaskSpec.model_validate({**task.model_dump(mode="json"), "shape": shape})
    return task


def run(args: argparse.Namespace) -> int:
    from engine import ResultStore, TuningCache

    store = ResultStore(args.store)
    if args.export or args.import_ or args.list:
        return _cache_command(args, store, TuningCache(store))
    if not 1 <= args.budget <= 86_400:
        raise InputError(f"--budget={args.budget:g}: seconds for one shape, 1..86400")
    if args.top < 0:
        raise InputError(f"--top={args.top}: a number of trials, 0 or more")
    store.list(limit=1)  # opens and checks the store before anything runs
    shapes = read_shapes(args.shapes) if args.shapes else [{"name": None, "shape": None}]
    tasks = [(s["name"], _task_for(args, s["shape"])) for s in shapes]  # every shape read before any runs
    results = []
    cancel = threading.Event()
    code = 0
    try:
        for name, task in tasks:
            res = _tune_one(args, task, name, store, cancel)
            results.append((name, res))
            if res.best is None:
                code = 1
    except KeyboardInterrupt as exc:
        cancel.set()
        stderr_console().print("interrupted: the trials measured so far are stored")
        code = 128 + getattr(exc, "signum", 2)
    if args.json:
        print_json({"status": "ok" if code == 0 else "failed" if code == 1 else "interrupted",
                    "store": str(store.path), "shapes": [dict(r.to_dict(), name=n) for n, r in results]})
    else:
        for name, res in results:
            print_tune(res, name, args.top)
    return code


def _tune_one(args: argparse.Namespace, task: TaskSpec, name: str | None, store: Any, cancel: threading.Event) -> Any:
    from engine import tune

    label = name or "x".join(str(v) for v in task.shape.values())
    progress = Progress(label) if not args.json else None
    return tune(task, args.profile, budget_s=args.budget, regime=args.regime, store=store, on_event=progress,
                cancel=cancel, client="tui tune")


def print_tune(res: Any, name: str | None, top: int) -> None:
    from rich.table import Table

    con = stdout_console()
    shape = ",".join(f"{k}={v}" for k, v in res.task.shape.items())
    head = f"[bold]{res.task.kernel}[/] {name + ' ' if name else ''}{shape} {res.task.dtype.value} on {res.gpu}"
    if res.simulated:
        con.print("[reverse bold yellow] SIMULATED [/] timings come from the roofline model, not from a GPU")
    con.print(f"{head}: {res.regime}, {len(res.trials)} of {res.total} candidates timed in {res.elapsed_s:.1f} s "
              f"(budget {res.budget_s:g} s), {len(res.skipped)} skipped; status {res.status}")
    tab = Table(title=None)
    for col in ("knobs", "median ms", "SOL %", "status", "note"):
        tab.add_column(col, justify="right" if col in ("median ms", "SOL %") else "left")
    timed = sorted(res.trials, key=lambda t: (not t.correct, t.median_ms or 1e9))
    for t in timed[:top]:
        tab.add_row(t.key + (" (default)" if t.default else ""), fmt(t.median_ms, ".4f"), fmt(t.sol_pct, ".1f"),
                    t.status, t.reason[:60])
    if top:
        con.print(tab)
    best, default = res.best, res.default
    peers = {n: p for n, p in res.peers.items() if p.get("median_ms")}
    line = [f"T_SOL {res.t_sol_ms:.4f} ms"]
    if default is not None and default.correct:
        line.append(f"default {default.key} {default.median_ms:.4f} ms")
    if best is not None:
        line.append(f"tuned {best.key} {best.median_ms:.4f} ms ({best.sol_pct or 0:.1f} % of SOL)")
    con.print("; ".join(line))
    for p in peers.values():
        ratio = f", ours / it {best.median_ms / p['median_ms']:.3f}" if best else ""
        con.print(f"  {p['label']}: {p['median_ms']:.4f} ms{ratio}", markup=False)
    if res.skipped:
        con.print(f"skipped ({len(res.skipped)}):", markup=False)
        for t in res.skipped:
            con.print(f"  {t.key}: {t.reason}", markup=False)
    for n in res.notes:
        con.print(f"note: {n}", markup=False)
    con.print("saved in the tuning cache" if res.saved else "[yellow]not saved in the tuning cache[/]")


def _cache_command(args: argparse.Namespace, store: Any, cache: Any) -> int:
    if args.export:
        n = cache.export(args.export)
        out = {"status": "ok", "exported": n, "file": str(args.export)}
    elif args.import_:
        n, skipped = cache.import_(args.import_)
        out = {"status": "ok", "imported": n, "skipped_other_source": skipped, "file": str(args.import_)}
    else:
        out = {"status": "ok", "entries": store.list_tuned()}
    if args.json:
        print_json(out)
        return 0
    con = stdout_console()
    if "entries" in out:
        from rich.table import Table

        tab = Table(title=f"tuning cache in {store.path}")
        for col in ("gpu", "SMs", "kernel", "dtype", "shape", "regime", "knobs", "ms", "default ms", "tuned"):
            tab.add_column(col)
        for e in out["entries"]:
            from engine import knob_label

            tab.add_row(e["gpu"], str(e["sm_count"]), e["kernel"], e["dtype"], e["shape"], e["regime"],
                        knob_label(e["block_size"], e["memory_pipelining"], e["schedule"]),
                        fmt(e["median_ms"], ".4f"), fmt(e.get("default_ms"), ".4f"),
                        f"{e['tuned_at'][:10]}, {e['candidates']} candidates" + (" SIMULATED" if e["simulated"] else ""))
        con.print(tab)
    elif "exported" in out:
        con.print(f"wrote {out['exported']} tuning cache entries to {out['file']}")
    else:
        con.print(f"imported {out['imported']} entries from {out['file']}"
                  + (f"; {out['skipped_other_source']} skipped (another kernel source: they would never match)"
                     if out["skipped_other_source"] else ""))
    return 0
