"""Launch the default gemm_residual configurations for Nsight Compute to profile (GPU machine).

    ncu --clock-control none -k regex:gemm_residual_sm90 --section SpeedOfLight ... \
        python3 bench/ncu_probe.py [--cases seed-bf16,seed-fp16,m256-bf16] [--launches 2]

Each case builds the Hopper path with the engine's default knobs for its shape (as `tui bench`
would), fills N(0,1) inputs and launches it `--launches` times, synchronising after each; nothing
is timed here (ncu measures). Prints one line per case with its knobs and schedule so that the
profile's launches can be told apart (they come in the order printed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # sm90_gemm, beside this file

import cupy as cp  # noqa: E402
from sm90_gemm import Runner, limits_of_device, make_inputs  # noqa: E402

from kernels import gemm_residual_sm90 as sm90  # noqa: E402

CASES = {
    "seed-bf16": (8192, 2560, 2560, "bf16"),
    "seed-fp16": (8192, 2560, 2560, "fp16"),
    "seed-fp32": (8192, 2560, 2560, "fp32"),
    "m256-bf16": (256, 2560, 2560, "bf16"),
    "m512-bf16": (512, 2560, 2560, "bf16"),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="seed-bf16,seed-fp16,m256-bf16")
    ap.add_argument("--launches", type=int, default=2)
    args = ap.parse_args()
    names = args.cases.split(",")
    unknown = [nm for nm in names if nm not in CASES]
    if unknown:
        ap.error(f"--cases: unknown {', '.join(unknown)}; known: {', '.join(CASES)}")
    limits = limits_of_device()
    for name in names:
        m, n, k, dt = CASES[name]
        shape = {"m": m, "n": n, "k": k}
        bs, st = sm90.default_knobs(limits, dt, shape)
        build = sm90.build(SimpleNamespace(shape=shape, dtype=dt), limits, bs, st)
        run = Runner(build, make_inputs(m, n, k, dt, seed=1), dt, False)
        print(f"{name}: {bs} s{st} {build.info['consumers']}, {build.info['schedule']}, "
              f"grid {build.info['grid']}, launches {[ln.function for ln in build.launches]}",
              flush=True)
        for _ in range(args.launches):
            run()
            cp.cuda.runtime.deviceSynchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
