"""``--msweep-alt``: the default build at each M of ``--m-list``, timed in alternation."""

from __future__ import annotations

from bench.sm90.gemm import (
    Runner,
)
from bench.sm90.report import alternate, alternation_rows, make_sampler, write_table
from kernels.gemm_residual_experiments import hopper_knobs


def msweep_alt_mode(args, limits, report, failures, verify, get, out_dir, build) -> int:
    """The default build at each M of ``--m-list`` (N = K = 2560, bf16), timed in alternation, so
    that the sweep's order (the card heating from one M to the next) does not rank the shapes:
    median ms and TFLOP/s per M over ``--rounds`` rounds of 20 launches."""
    n = k = 2560
    sampler = make_sampler()
    runs, flops = {}, {}
    for m in args.m_list:
        shape = {"m": m, "n": n, "k": k}
        bs, st = hopper_knobs(limits, "bf16", shape)
        v = (bs, st, "bf16", True, True)
        verify(m, n, k, v, label="msweep-alt")
        b = build(m, n, k, v)
        name = f"M={m} {bs} s{st} {b.info['consumers'].split(' ')[0]} {b.info['schedule']}"
        runs[name] = Runner(b, get(m, n, k, "bf16")[0], "bf16")
        flops[name] = 2 * m * n * k
    per = alternate(runs, args.rounds, sampler, tag="alt ")
    lines = [f"default builds, bf16, N = K = 2560, {args.rounds} alternating rounds x 20 launches"]
    for nm, med, best, _r, clk, _p in alternation_rows(per, sampler, tag="alt "):
        lines.append(f"   {nm:60s} {med:8.4f} ms (best round {best:.4f}) "
                     f"{flops[nm] / med / 1e9:6.0f} TFLOP/s  SM {clk:5.0f} MHz")
        report["sweep"].append({"name": nm, "rounds": per[nm]})
    if sampler:
        sampler.stop.set()
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_msweep_alt")
    return 0 if not failures else 1
