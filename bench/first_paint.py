"""How long the cockpit takes to show its first frame: from the interpreter's start to Textual's
``Ready`` (posted once the first screen has been composed and drawn), headless at 80x24 on the
simulated device (``tui --backend sim``), each time in a fresh process with fresh config, data and
cache dirs. Prints each figure, the min and the median, and the machine's load average.

    python bench/first_paint.py [--repeat 5] [--size 80x24]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import sys, time
from tui.app import CockpitApp, app_from_command_line

def on_ready(self, event):
    sys.stdout.write(f"{time.time():.6f}\\n")
    sys.stdout.flush()
    self.exit()

CockpitApp.on_ready = on_ready
w, h = map(int, sys.argv[1].split("x"))
app_from_command_line(["--backend", "sim"]).run(headless=True, size=(w, h))
"""


def once(size: str) -> float:
    """Seconds from spawning a fresh interpreter to the cockpit's first frame."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, SOL_COCKPIT_CONFIG_DIR=f"{tmp}/config", SOL_COCKPIT_DATA_DIR=f"{tmp}/data",
                   SOL_COCKPIT_CACHE_DIR=f"{tmp}/cache", SOL_COCKPIT_STORE=f"{tmp}/data/results.sqlite",
                   PYTHONPATH=str(ROOT))
        t0 = time.time()
        out = subprocess.run([sys.executable, "-c", CHILD, size], env=env, cwd=ROOT, capture_output=True,
                             text=True, timeout=60)
        if out.returncode != 0 or not out.stdout.strip():
            raise SystemExit(f"the cockpit did not start: {out.stderr[-2000:]}")
        return float(out.stdout.strip().splitlines()[-1]) - t0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--size", default="80x24")
    args = p.parse_args()
    load = os.getloadavg()
    times = [once(args.size) for _ in range(args.repeat)]
    print("first paint s:", " ".join(f"{t:.3f}" for t in times))
    print(f"min {min(times):.3f} s, median {statistics.median(times):.3f} s; {os.cpu_count()} CPUs, "
          f"load average before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, after "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
