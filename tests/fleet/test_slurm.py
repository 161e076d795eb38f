"""The script `tui export slurm` writes runs for real on a single-node Slurm (slurmctld and slurmd
on this machine, started here and stopped after): one step per GPU, bound by ``--gres=gpu:1`` to
one of two fake GPUs, each benching the simulated device and writing its report, which `tui fleet`
then reads. Slow (daemons, a job); skipped where Slurm is not installed (tests/fleet/setup_slurm.sh
installs it) or without root (slurmd needs it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fleet.slurm_cluster import SlurmCluster, missing_programs
from tui.cli.main import main

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(missing_programs()), reason=f"Slurm/munge not installed ({', '.join(missing_programs())} "
                                                        "missing): run tests/fleet/setup_slurm.sh"),
    pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="slurmd needs root"),
]

TUI = Path(sys.executable).with_name("tui")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"), cpus=2, gpus=2)
    try:
        cluster.start()
    except Exception:
        cluster.stop()
        raise
    yield cluster
    cluster.stop()
    left = [p for p in _pids_of("slurmstepd") if _alive(p)]
    assert not left, f"job steps still running after the cluster stopped: {left}"


def _pids_of(exe: str) -> set[int]:
    out = subprocess.run(["pgrep", "-x", exe], capture_output=True, text=True)
    return {int(p) for p in out.stdout.split()}


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.timeout(240)
@pytest.mark.skipif(not TUI.exists() or shutil.which("pgrep") is None, reason="needs the venv's tui and pgrep")
def test_exported_script_runs_one_step_per_gpu_and_fleet_reads_the_reports(slurm, tmp_path, capsys):
    work = tmp_path / "submit"
    work.mkdir()
    script = work / "fleet.sbatch"
    assert main(["export", "slurm", "--gpus", "2", "--backend", "sim", "--no-peers", "--tui", str(TUI),
                 "--results-dir", "reports", "--time", "5", "-o", str(script)]) == 0
    capsys.readouterr()
    env = {**os.environ, "SOL_SIM_DELAY": "0"}
    job = slurm.submit(script, work, env)
    final = slurm.wait_job(job, timeout_s=180)
    log = next(work.glob("*.out"), None)
    log_text = log.read_text() if log else "(no job log)"
    # The checks find no NVIDIA driver on this machine, so each step exits 1 and so does the job;
    # what matters here is that both steps ran to their report.
    assert final["JobState"] in ("COMPLETED", "FAILED"), (final, log_text, slurm.logs())
    assert "gpu:2" in final.get("TresPerNode", ""), final  # the job held both (fake) GPUs as gres
    reports = sorted((work / "reports").glob("*.json"))
    assert [p.name for p in reports] == [f"{slurm.host}.gpu0.json", f"{slurm.host}.gpu1.json"], log_text
    steps = set()
    for p in reports:
        doc = json.loads(p.read_text())
        assert doc["host"] == slurm.host and doc["simulated"] is True
        assert doc["job"]["SLURM_JOB_ID"] == job
        steps.add(doc["job"]["SLURM_STEP_ID"])
        assert doc["benches"][0]["result"]["status"] == "ok"
    assert len(steps) == 2  # one step per GPU
    code = main(["fleet", str(work / "reports"), "--json"])
    view = json.loads(capsys.readouterr().out)
    assert code in (0, 1) and view["hosts"] == [slurm.host] and len(view["rows"]) == 2 and not view["errors"]
    assert [r["gpu"] for r in view["rows"]] == ["0", "1"]
