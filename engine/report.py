"""A shareable report of one box: the checks, the profile, the best stored runs, the rules that
fired and the checklist, as JSON (for scripts) or Markdown (for a ticket or a chat)."""

from __future__ import annotations

import platform
import socket
from datetime import datetime, timezone
from typing import Any

from engine import __version__

MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


def _failed_run_rules(store: Any, limit: int = 50) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rules matched by recent failed runs (newest first), one entry per rule, and the runs that
    rehearsed an injected fault on the simulated device (left out of the rules: not findings). A
    store that cannot be read is an error (naming the row), not a report that silently leaves its
    rules out."""
    from engine.troubleshoot import rehearsed_fault

    out: dict[str, dict[str, Any]] = {}
    rehearsals: list[dict[str, Any]] = []
    recs = [r for r in store.list(limit=limit) if r.status != "ok"]
    for rec in recs:
        res = store.get(rec.id)
        fault = rehearsed_fault(res)
        if fault is not None:
            rehearsals.append({"run": rec.id, "kind": rec.kind, "fault": fault, "status": rec.status})
            continue
        for m in (res.matched_rules if res else []):
            out.setdefault(m.get("id", "?"), {"id": m.get("id"), "title": m.get("title"),
                                               "fix": m.get("fix"), "source": f"run #{rec.id} ({rec.status})",
                                               "evidence": m.get("evidence", "")})
    return list(out.values()), rehearsals


def build_report(store: Any, profile_name: str | None = None, checks: list[Any] | None = None,
                 ctx: Any = None, best_limit: int = 5) -> dict[str, Any]:
    """Everything the report shows, as plain data. Runs the checks unless ``checks`` is given."""
    from engine.checklist import Checklist
    from engine.checks import run_checks, summary

    checklist = Checklist(store)
    profile_name = profile_name or checklist.confirmed_profile()
    if checks is None:
        checks = run_checks(profile_name=profile_name, ctx=ctx)
    rules_fired: dict[str, dict[str, Any]] = {}
    from engine.troubleshoot import rule_by_id

    for c in checks:
        for rid in c.rules:
            rule = rule_by_id(rid)
            if rule is not None and rid not in rules_fired:
                rules_fired[rid] = {"id": rid, "title": rule.title, "fix": rule.fix,
                                    "source": f"check {c.id} ({c.status})", "evidence": c.detail}
    failed_rules, rehearsals = _failed_run_rules(store)
    for r in failed_rules:
        rules_fired.setdefault(r["id"], r)
    best = [r.to_dict() for r in store.best(limit=best_limit)]
    profile = None
    if profile_name:
        from engine.profiles import load_profiles

        try:
            profile = load_profiles().get(profile_name).model_dump(mode="json")
        except Exception as exc:
            profile = {"name": profile_name, "error": str(exc)}
    return {
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cockpit_version": __version__,
        "profile": profile,
        "summary": summary(checks),
        "checks": [c.to_dict() for c in checks],
        "best_runs": best,
        "rules_fired": list(rules_fired.values()),
        "rehearsals": rehearsals,
        "checklist": [_agreeing(s.model_dump(mode="json"), summary(checks)) for s in checklist.steps()],
    }


def _agreeing(step: dict[str, Any], checks: dict[str, int]) -> dict[str, Any]:
    """The checklist step as the report's own checks leave it: "Environment checks pass" is not
    ticked above checks that fail now, whatever was recorded or ticked before."""
    if step["id"] == "checks" and checks.get("fail", 0) and step["done"]:
        from engine.checklist import STEPS

        how = next(h for sid, _, h in STEPS if sid == "checks")
        return step | {"done": False, "detail": f"{checks['fail']} check(s) fail in this report", "next_action": how}
    return step


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def to_markdown(rep: dict[str, Any]) -> str:
    """The report as Markdown; simulated runs are labelled SIMULATED."""
    s = rep["summary"]
    lines = [f"# SOL Cockpit report: {rep['host']}", "",
             f"Generated {rep['generated_at']} by sol-cockpit {rep['cockpit_version']} on {rep['platform']}.", "",
             f"**Checks:** {s['pass']} pass, {s['warn']} warn, {s['fail']} fail, {s['skip']} skip.", ""]
    prof = rep.get("profile")
    lines += ["## Profile", ""]
    if prof and "error" not in prof:
        lines.append(f"{prof.get('display_name')} (`{prof.get('name')}`), cc {prof.get('compute_capability')}, "
                     f"bf16 {prof.get('peak_tflops', {}).get('bf16')} TFLOP/s, "
                     f"{prof.get('memory_bandwidth_gbps')} GB/s ({'measured' if prof.get('measured') else 'datasheet'}).")
    else:
        lines.append(f"No profile confirmed{': ' + prof['error'] if prof else ''}.")
    lines += ["", "## Checks", "", "| status | check | found | fix |", "|---|---|---|---|"]
    for c in rep["checks"]:
        lines.append(f"| {MARK[c['status']]} | {_cell(c['title'])} (`{c['id']}`) | {_cell(c['detail'])} | "
                     f"{_cell(c['fix']) if c['status'] in ('fail', 'warn') else ''} |")
    lines += ["", "## Best runs", ""]
    if rep["best_runs"]:
        lines += ["| run | kernel | profile | backend | dtype | block | stages | fusion | median ms | TFLOP/s | SOL % |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rep["best_runs"]:
            backend = "SIMULATED" if r.get("simulated") else r["backend"]
            lines.append("| " + " | ".join(_cell(v) for v in (
                f"#{r['id']}", r["kernel"], r["profile"], backend, r.get("dtype"), r.get("block_size"),
                r.get("memory_pipelining") or "off", None if r.get("fusion") is None else
                ("fused" if r["fusion"] else "unfused"), r.get("median_ms"), r.get("tflops"),
                r.get("sol_pct"))) + " |")
    else:
        lines.append("No successful runs stored yet.")
    lines += ["", "## Rules that fired", ""]
    if rep["rules_fired"]:
        for r in rep["rules_fired"]:
            lines.append(f"- **{r['title']}** (`{r['id']}`, from {r['source']}): {r['fix']}")
    else:
        lines.append("None.")
    if rep.get("rehearsals"):
        lines += ["", "Rehearsals on the simulated device (injected faults, not findings): "
                  + ", ".join(f"run #{r['run']} {r['fault']}" for r in rep["rehearsals"]) + "."]
    lines += ["", "## Checklist", ""]
    for st in rep["checklist"]:
        lines.append(f"- [{'x' if st['done'] else ' '}] {st['title']}: {st['detail'] or st['next_action']}")
    return "\n".join(lines) + "\n"
