"""``--device all`` or a list on bench, soak, check and calibrate: one job per GPU in parallel
(``engine.multi_device.fan_out``; bench, soak and calibrate each in its own engine process), a row
per GPU, and the spread: slowest against fastest and the outlier. Exit 1 when a GPU fails or is the
outlier, 2 for a GPU that does not exist (nothing runs then)."""

from __future__ import annotations

import argparse
import threading
from dataclasses import replace
from typing import Any

from engine import Event, LogEvent, StageEvent, devices_for, fan_out, spread, spread_text
from engine import resolve_devices as resolve
from tui.cli import check_context
from tui.cli.output import fmt, print_json, stderr_console, stdout_console
from tui.cli.soak_args import check_fault
from tui.cli.soak_report import SoakProgress, summary_json
from tui.cli.task_args import task_from_args


class Lines:
    """Stage lines on stderr, prefixed with the GPU (several GPUs write at once)."""

    lock = threading.Lock()

    def __init__(self, device: int) -> None:
        self.prefix = f"GPU {device}: "
        self.con = stderr_console()

    def __call__(self, ev: Event) -> None:
        if isinstance(ev, StageEvent) and ev.state in ("done", "fail"):
            text = f"{ev.stage}: {ev.state} {ev.detail}".rstrip()
        elif isinstance(ev, LogEvent) and ev.level != "info":
            text = f"{ev.level}: {ev.message}"
        else:
            return
        with self.lock:
            self.con.print(self.prefix + text, markup=False, highlight=False)


def _base_task(args: argparse.Namespace) -> Any:
    return task_from_args(argparse.Namespace(**{**vars(args), "device": None}))


def _on(task: Any, device: int) -> Any:
    from engine import TaskSpec

    return TaskSpec.model_validate({**task.model_dump(mode="json", exclude_none=True), "device": device})


def _failure(exc: BaseException) -> str:
    return getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"


def _table(title: str, cols: list[str], rows: list[list[str]]) -> None:
    from rich.table import Table

    t = Table(title=title)
    for c in cols:
        t.add_column(c, justify="left" if c in ("GPU", "name", "status", "error") else "right")
    for r in rows:
        t.add_row(*r)
    stdout_console().print(t)


def _prepare_all(args: argparse.Namespace, store: Any) -> tuple[list[int], dict[int, Any]]:
    """Every GPU's PreparedRun (all validated before anything runs); notices printed once."""
    from engine import ResultStore, prepare

    task = _base_task(args)
    indices, _ = devices_for(args.device, task.backend.value)
    untuned = getattr(args, "untuned", False)
    preps = {i: prepare(_on(task, i), args.profile, store=None if untuned else (store or ResultStore(args.store)))
             for i in indices}
    err = stderr_console()
    for n in dict.fromkeys(n for p in preps.values() for n in p.notices):
        err.print(f"[yellow]{n}[/]")
    return indices, preps


def _store(args: argparse.Namespace) -> Any:
    from engine import ResultStore

    store = None if args.no_store else ResultStore(args.store)
    if store is not None:
        store.check()
    return store


def run_bench_all(args: argparse.Namespace) -> int:
    """`tui bench --device all|0,2,5`."""
    from engine import CockpitError, run_prepared

    store = _store(args)
    indices, preps = _prepare_all(args, store)
    guards: dict[int, Any] = {}
    if getattr(args, "against_baseline", False):
        from tui.cli.baseline_cmd import bench_guard

        guards = {i: bench_guard(args, preps[i]) for i in indices}
    got = fan_out(indices, lambda i, cancel: run_prepared(preps[i], on_event=Lines(i), cancel=cancel))
    rows, out, medians, failed = [], [], {}, False
    for i in indices:
        res = got[i]
        if isinstance(res, BaseException):
            failed = True
            out.append({"device": i, "status": "error", "error": _failure(res)})
            rows.append([str(i), "-", "[red]error[/]", "-", "-", "-", "-", _failure(res)])
            continue
        if store is not None:
            try:
                store.save(res)
            except CockpitError as exc:
                res.log.append(f"not stored: {exc}")
        verdict = guards[i].judge(res) if guards.get(i) is not None else None
        failed |= not res.ok or bool(verdict is not None and verdict.regression)
        if res.ok and res.timing is not None:
            medians[i] = res.timing.median_ms
        row = {"device": i, **res.summary_json()}
        if verdict is not None:
            row["against_baseline"] = verdict.to_json()
        out.append(row)
        tm, sol = res.timing, res.sol
        rows.append([str(i), res.fingerprint.gpu_name or "-", res.status.value if res.ok else f"[red]{res.status.value}[/]",
                     fmt(tm.median_ms if tm else None, ".4f"), fmt(tm.p90_ms if tm else None, ".4f"),
                     fmt(sol and sol.sol_pct, ".1f"), "-" if res.correctness is None else
                     ("yes" if res.correctness.correct else "[red]NO[/]"), res.error or ""])
    sp = spread(medians, threshold_pct=args.outlier_pct, metric="median_ms")
    return _finish(args, "bench", out, sp, failed, preps, ["GPU", "name", "status", "median ms", "p90", "SOL %",
                                                            "correct", "error"], rows, "ms")


def _finish(args: argparse.Namespace, what: str, out: list[dict[str, Any]], sp: dict[str, Any], failed: bool,
            preps: dict[int, Any] | None, cols: list[str], rows: list[list[str]], unit: str, fmt_spec: str = ".4f",
            extra: dict[str, Any] | None = None) -> int:
    ok = not failed and sp.get("outlier") is None
    simulated = bool(preps and all(p.simulated for p in preps.values()))
    if args.json:
        print_json({"status": "ok" if ok else "failed", "ok": ok, "simulated": simulated, "devices": out,
                    "spread": sp, **(extra or {})})
    else:
        if simulated:
            stdout_console().print("[reverse bold yellow] SIMULATED [/] every GPU below is the simulated device")
        _table(f"{what} per GPU", cols, rows)
        stdout_console().print(spread_text(sp, unit, fmt_spec), highlight=False)
    return 0 if ok else 1


def run_soak_all(args: argparse.Namespace, opts: Any) -> int:
    """`tui soak --device all|0,2,5`: one soak per GPU at once; the spread of the last minute's times."""
    from engine import run_soak

    store = _store(args)
    indices, preps = _prepare_all(args, store)
    for p in preps.values():
        check_fault(p, opts)
    got = fan_out(indices, lambda i, cancel: run_soak(preps[i], opts, on_event=SoakProgress(opts, f"GPU {i}: "),
                                                      cancel=cancel, store=store)[0])
    rows, out, last, failed = [], [], {}, False
    for i in indices:
        s = got[i]
        if isinstance(s, BaseException):
            failed = True
            out.append({"device": i, "status": "error", "ok": False, "error": _failure(s)})
            rows.append([str(i), "-", "[red]error[/]", "-", "-", "-", "-", _failure(s)])
            continue
        failed |= not s.ok
        if s.last_ms:
            last[i] = s.last_ms
        out.append({**summary_json(s, args.series)})
        rows.append([str(i), s.gpu_name or "-", s.status if s.ok else f"[red]{s.status}[/]", fmt(s.last_ms, ".4f"),
                     fmt(s.drift_pct, "+.2f"), fmt(s.throttled_share_pct, ".1f"), str(s.verify_failures),
                     (s.rule or {}).get("id", "") if s.error else ""])
    sp = spread(last, threshold_pct=args.outlier_pct, metric="last_ms")
    return _finish(args, "soak", out, sp, failed, preps, ["GPU", "name", "status", "last ms", "drift %",
                                                           "throttled %", "bad verifies", "rule"], rows, "ms")


DEVICE_CHECKS = ("gpu.profile", "gpu.kernel_arch", "health.")
"""Checks that judge one GPU (the rest judge the machine and run once)."""


def _per_device(check_id: str) -> bool:
    return check_id != "health.xid" and any(check_id == p or (p.endswith(".") and check_id.startswith(p))
                                            for p in DEVICE_CHECKS)


def run_check_all(args: argparse.Namespace) -> int:
    """`tui check --device all|0,2,5`: the machine's checks once, each GPU's checks per GPU in parallel;
    the spread says which GPU disagrees with the others on which check."""
    from engine import CHECKS, run_checks
    from engine import checks_summary as summary

    ctx = check_context.make_context(args.profile)
    devs = ctx.devices()
    indices = resolve(args.device, len(devs))
    wanted = [c.id for c in CHECKS if not args.only or any(c.id == w or c.id.startswith(w.rstrip(".") + ".")
                                                            for w in args.only)]
    machine = run_checks(only=[c for c in wanted if not _per_device(c)] or ["-"], ctx=ctx)
    status = ctx.nvml_status()
    got = fan_out(indices, lambda i, cancel: run_checks(
        only=[c for c in wanted if _per_device(c)] or ["-"],
        ctx=replace(ctx, _cache={"nvml_status": status, "devices": [devs[i]]})))
    out, rows, failed = [], [], any(r.status == "fail" for r in machine)
    per: dict[int, dict[str, str]] = {}
    for i in indices:
        res = got[i]
        if isinstance(res, BaseException):
            failed = True
            out.append({"device": i, "error": _failure(res), "checks": []})
            rows.append([str(i), "-", "error", "", "", _failure(res)])
            continue
        per[i] = {r.id: r.status for r in res}
        s = summary(res)
        failed |= s["fail"] > 0
        out.append({"device": i, "name": getattr(devs[i], "name", None), "summary": s,
                    "checks": [{"id": r.id, "title": r.title, "status": r.status, "detail": r.detail, "fix": r.fix,
                                "rules": r.rules} for r in res]})
        bad = [f"{r.id}: {r.status}" for r in res if r.status in ("fail", "warn")]
        rows.append([str(i), getattr(devs[i], "name", "-"), "[red]fail[/]" if s["fail"] else "ok",
                     str(s["warn"]), str(s["fail"]), "; ".join(bad)])
    sp = disagreement(per)
    extra = {"machine": [{"id": r.id, "title": r.title, "status": r.status, "detail": r.detail, "fix": r.fix,
                          "rules": r.rules} for r in machine], "machine_summary": summary(machine)}
    if args.json:
        print_json({"status": "failed" if failed else "ok", "ok": not failed, "devices": out, "spread": sp, **extra})
        return 1 if failed else 0
    s = summary(machine)
    stdout_console().print(f"machine checks: {s['pass']} pass, {s['warn']} warn, {s['fail']} fail, {s['skip']} skip"
                           + "".join(f"\n  {r.status.upper()} {r.id}: {r.detail}" for r in machine
                                     if r.status in ("fail", "warn")), highlight=False)
    _table("checks per GPU", ["GPU", "name", "status", "warn", "fail", "not passing"], rows)
    stdout_console().print(sp["text"], highlight=False)
    return 1 if failed else 0


def disagreement(per: dict[int, dict[str, str]]) -> dict[str, Any]:
    """For checks whose status differs between GPUs: the majority's status and the GPUs off it; the
    outlier is the GPU off the majority on the most checks (None when all agree or it is a tie)."""
    from collections import Counter

    odd: dict[str, dict[str, Any]] = {}
    count: Counter[int] = Counter()
    for cid in sorted({c for st in per.values() for c in st}):
        statuses = {i: st[cid] for i, st in per.items() if cid in st}
        common, n = Counter(statuses.values()).most_common(1)[0]
        if n == len(statuses):
            continue
        off = [i for i, s in statuses.items() if s != common]
        odd[cid] = {"majority": common, "gpus": {str(i): statuses[i] for i in off}}
        count.update(off)
    top = count.most_common(2)
    outlier = top[0][0] if top and (len(top) == 1 or top[0][1] > top[1][1]) and len(per) > 2 else None
    text = ("every GPU agrees on every check" if not odd else
            "GPUs disagree: " + "; ".join(f"{cid}: GPU {', '.join(v['gpus'])} "
                                          f"{'/'.join(sorted(set(v['gpus'].values())))} (others {v['majority']})"
                                          for cid, v in odd.items()))
    if outlier is not None:
        text += f"; OUTLIER: GPU {outlier}"
    return {"metric": "check status", "gpus": len(per), "disagreements": odd, "outlier": outlier, "text": text}


def run_calibrate_all(args: argparse.Namespace) -> int:
    """`tui calibrate --device all|0,2,5`: each GPU measured in its own engine process at once; the
    spread of copy bandwidth and bf16 GEMM rate. Nothing is saved (a profile is one GPU's)."""
    from engine import BackendUnavailable, nvml
    from engine import measure_ceilings as measure

    ok, problem, fix = nvml.probe()
    if not ok:
        raise BackendUnavailable(problem or "no GPU", fix=(fix or "").replace("; or use --backend sim", "")
                                 + "; calibration measures real GPUs (the simulated device has no ceilings)")
    indices = resolve(args.device, nvml.device_count())
    got = fan_out(indices, lambda i, cancel: measure(i, on_event=Lines(i), cancel=cancel, timeout_s=args.timeout))
    out, rows, copy, bf16, failed = [], [], {}, {}, False
    for i in indices:
        c = got[i]
        if isinstance(c, BaseException):
            failed = True
            out.append({"device": i, "error": _failure(c)})
            rows.append([str(i), "-", "[red]error[/]", "-", "-", _failure(c)])
            continue
        copy[i], bf16[i] = c["copy_gbps"], c["tflops"]["bf16"]
        out.append({"device": i, "ceilings": c})
        rows.append([str(i), c.get("gpu_name") or "-", "ok", fmt(c["copy_gbps"], ".0f"), fmt(c["tflops"]["bf16"], ".1f"), ""])
    sp = spread(copy, higher_is_better=True, threshold_pct=args.outlier_pct, metric="copy_gbps")
    sp_gemm = spread(bf16, higher_is_better=True, threshold_pct=args.outlier_pct, metric="bf16_tflops")
    if sp.get("outlier") is None and sp_gemm.get("outlier") is not None:
        sp, sp_gemm = sp_gemm, sp
    code = _finish(args, "calibrate", out, sp, failed, None, ["GPU", "name", "status", "copy GB/s", "bf16 TFLOP/s",
                                                                "error"], rows, "", ".1f",
                   extra={"spread_other": sp_gemm, "saved_to": None})
    if not args.json:
        stdout_console().print(spread_text(sp_gemm, "", ".1f"), highlight=False)
        stdout_console().print("nothing saved: a measured profile is one GPU's (calibrate one --device to save it)")
    return code
