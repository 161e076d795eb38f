"""A throwaway single-node Slurm for the tests: munged, slurmctld and slurmd started from a config
written into a temporary folder (free ports, no cgroups, no accounting), stopped and waited for on
``stop()``. Two fake GPUs are declared as gres backed by plain files, so ``--gres=gpu:N`` schedules
and binds as on a GPU node; the jobs bench the simulated device. Needs root (slurmd) and the Debian
packages that ``tests/fleet/setup_slurm.sh`` installs."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol")


def missing_programs() -> list[str]:
    return [p for p in (*DAEMONS, *CLIENTS) if shutil.which(p) is None]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


CONF = """\
ClusterName=solfleet
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
GresTypes=gpu
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 Gres=gpu:{gpus} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


class SlurmCluster:
    """``start()`` brings the three daemons up and waits until the node is idle; ``stop()`` ends
    each by its pid (never by name) and waits for it."""

    def __init__(self, root: Path, cpus: int = 2, gpus: int = 2) -> None:
        self.root = root
        self.cpus, self.gpus = cpus, gpus
        self.host = socket.gethostname().split(".")[0]
        self.procs: dict[str, subprocess.Popen] = {}
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    # --- set-up ------------------------------------------------------------------------------
    def _write_config(self) -> None:
        for d in ("munge", "state", "spool", "dev"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o700)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        for i in range(self.gpus):
            (self.root / "dev" / f"fakegpu{i}").touch()
        self.conf.write_text(CONF.format(host=self.host, root=self.root, cpus=self.cpus, gpus=self.gpus,
                                         ctld_port=_free_port(), slurmd_port=_free_port()))
        files = f"{self.root}/dev/fakegpu[0-{self.gpus - 1}]" if self.gpus > 1 else f"{self.root}/dev/fakegpu0"
        (self.root / "gres.conf").write_text(f"NodeName={self.host} Name=gpu File={files}\n")

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.root / f"{name}.stdout", "wb")  # noqa: SIM115 (closed with the process)
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                            start_new_session=True)
        log.close()

    def start(self, timeout_s: float = 60.0) -> None:
        self._write_config()
        m = self.root / "munge"
        self._spawn("munged", ["munged", "--foreground", "--force", f"--socket={m}/munge.socket",
                               f"--key-file={m}/munge.key", f"--pid-file={m}/munged.pid",
                               f"--log-file={m}/munged.log", f"--seed-file={m}/munged.seed"])
        self._wait_for(lambda: (m / "munge.socket").exists(), 10, "munged's socket")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._wait_for(lambda: self.run("scontrol", "ping").returncode == 0
                       and "UP" in self.run("scontrol", "ping").stdout, 20, "slurmctld")
        self._spawn("slurmd", ["slurmd", "-D", "-N", self.host, "-f", str(self.conf)])
        self._wait_for(self._node_idle, timeout_s, "the node to be idle")

    def _node_idle(self) -> bool:
        out = self.run("scontrol", "show", "node", self.host).stdout
        return "State=IDLE" in out

    def _wait_for(self, cond, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{dead[0]} exited while waiting for {what}:\n{self.logs()}")
            if cond():
                return
            time.sleep(0.3)
        raise RuntimeError(f"timed out waiting for {what}:\n{self.logs()}")

    # --- use ---------------------------------------------------------------------------------
    def run(self, *argv: str, timeout_s: float = 30.0) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env, timeout=timeout_s)

    def submit(self, script: Path, cwd: Path, env: dict[str, str]) -> str:
        out = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True,
                             cwd=cwd, env={**env, "SLURM_CONF": str(self.conf)}, timeout=30)
        if out.returncode != 0:
            raise RuntimeError(f"sbatch failed ({out.returncode}): {out.stderr}\n{self.logs()}")
        return out.stdout.strip().split(";")[0]

    def wait_job(self, job_id: str, timeout_s: float = 120.0) -> dict[str, str]:
        """The job's final fields (JobState, ExitCode, ...) from ``scontrol show job``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            out = self.run("scontrol", "show", "job", "-o", job_id).stdout
            fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
            if fields.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
                                          "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"):
                return fields
            time.sleep(0.5)
        self.run("scancel", job_id)
        raise RuntimeError(f"job {job_id} did not finish in {timeout_s} s:\n{self.logs()}")

    def logs(self) -> str:
        parts = []
        for name in ("slurmctld.log", "slurmd.log", "munge/munged.log", "slurmctld.stdout", "slurmd.stdout"):
            p = self.root / name
            if p.exists():
                parts.append(f"--- {name} ---\n" + "\n".join(p.read_text(errors="replace").splitlines()[-25:]))
        return "\n".join(parts)

    # --- tear-down ---------------------------------------------------------------------------
    def stop(self) -> None:
        """Cancel what still runs, then slurmd (it ends the job steps it started), slurmctld and
        munged, each by its pid."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            self.run("scancel", "--full", "--quiet", "--user", "root", timeout_s=15)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and self.run("squeue", "--noheader", timeout_s=15).stdout.strip():
                time.sleep(0.3)
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
