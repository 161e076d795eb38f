#!/bin/sh
# Installs a single-node Slurm (slurmctld, slurmd, the client commands) and munge from Debian's
# packages, for tests/fleet/test_slurm.py. Idempotent: does nothing when they are there already.
# Needs root (apt-get). The test fixture writes its own slurm.conf in a temporary folder and
# starts and stops the daemons itself; nothing here starts a service.
set -eu
if command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 \
   && command -v sbatch >/dev/null 2>&1 && command -v munged >/dev/null 2>&1; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
# The packages' postinst may start the services with Debian's default config: stop them, the
# fixture runs its own daemons.
for svc in slurmctld slurmd munge; do
    if command -v systemctl >/dev/null 2>&1; then systemctl stop "$svc" >/dev/null 2>&1 || true; fi
done
