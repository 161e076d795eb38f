"""Can CUDA see the GPUs: device nodes, the *_VISIBLE_DEVICES variables, the container's mapping."""

from __future__ import annotations

import re

from engine.checks.context import CheckContext
from engine.checks.model import NO_DRIVER_SKIP, Status, ok, skip

CONTAINER_FIX = ("start the container with the GPU mapped in: `docker run --gpus all ...` (needs the "
                 "NVIDIA Container Toolkit: `sudo nvidia-ctk runtime configure --runtime=docker`), "
                 "`podman run --device nvidia.com/gpu=all ...` (CDI: `sudo nvidia-ctk cdi generate "
                 "--output=/etc/cdi/nvidia.yaml`), or on Kubernetes request `nvidia.com/gpu` in the "
                 "pod's resources.limits (and check the device plugin's logs)")


def device_nodes(ctx: CheckContext) -> list[str] | None:
    names = ctx.fs.listdir("/dev")
    if names is None:
        return None
    return [n for n in names if re.fullmatch(r"nvidia\d+", n)]


def check_nodes(ctx: CheckContext) -> tuple[Status, str, str]:
    if not ctx.driver_ok():
        return skip(NO_DRIVER_SKIP)
    names = ctx.fs.listdir("/dev")
    if names is None:
        return skip("cannot list /dev")
    nodes = [n for n in names if re.fullmatch(r"nvidia\d+", n)]
    count = len(ctx.devices())
    found = f"{len(nodes)} device node(s) ({', '.join('/dev/' + n for n in nodes) or 'none'}), NVML sees {count} GPU(s)"
    if count == 0:
        return "fail", "the driver answers but sees no GPU; " + found, (
            "check CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES, the container's device mapping, and "
            "`nvidia-smi`; a GPU that fell off the bus needs a reset or a reboot (`sudo dmesg | grep Xid`)")
    if not nodes and "dxg" in names:
        return ok(f"WSL: GPUs through /dev/dxg; NVML sees {count} GPU(s)")
    if "nvidiactl" not in names or "nvidia-uvm" not in names:
        missing = [n for n in ("nvidiactl", "nvidia-uvm") if n not in names]
        return "fail", f"missing {', '.join('/dev/' + n for n in missing)}: CUDA cannot initialise; " + found, (
            "create the nodes: `sudo nvidia-modprobe -u -c=0` (or `sudo modprobe nvidia-uvm`); in a "
            "container map them in (the NVIDIA Container Toolkit or CDI does this)")
    if len(nodes) < count:
        return "warn", "fewer device nodes than GPUs: " + found, CONTAINER_FIX
    if len(nodes) > count:
        return "warn", "more device nodes than GPUs NVML can see (a GPU may have fallen off the bus): " + found, (
            "run `nvidia-smi` and `sudo dmesg | grep -i xid`; a lost GPU needs a reset or a reboot")
    return ok(found)


def _check_list(var: str, value: str, count: int, uuids: list[str]) -> str | None:
    """What is wrong with a CUDA_VISIBLE_DEVICES-style list, or None."""
    tokens = [t.strip() for t in value.split(",")]
    seen: set[str] = set()
    for tok in tokens:
        if not tok:
            return f"{var}={value!r} has an empty entry"
        if tok in seen:
            return f"{var}={value!r} names {tok} twice"
        seen.add(tok)
        if tok.isdigit():
            if count and int(tok) >= count:
                return f"{var}={value!r}: index {tok} does not exist (NVML sees {count} GPU(s))"
        elif re.match(r"^(GPU|MIG)-", tok):
            if uuids and tok.startswith("GPU-") and not any(u.startswith(tok) for u in uuids):
                return f"{var}={value!r}: {tok} matches no GPU's UUID"
        else:
            return f"{var}={value!r}: {tok!r} is neither an index nor a GPU-/MIG- UUID"
    return None


def check_visible_env(ctx: CheckContext) -> tuple[Status, str, str]:
    devs = ctx.devices()
    count = len(devs)
    uuids = [d.uuid for d in devs if getattr(d, "uuid", None)]
    found = []
    fix = "unset it (`unset CUDA_VISIBLE_DEVICES`) or list existing GPUs by index or UUID (`nvidia-smi -L`)"
    cvd = ctx.env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        if cvd.strip() in ("", "-1", "none", "NoDevFiles"):
            return "fail", f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU from CUDA", fix
        problem = _check_list("CUDA_VISIBLE_DEVICES", cvd, count, uuids)
        if problem:
            return "fail", problem + " (CUDA ignores every entry from the first bad one on)", fix
        found.append(f"CUDA_VISIBLE_DEVICES={cvd}")
    nvd = ctx.env.get("NVIDIA_VISIBLE_DEVICES")
    if nvd is not None:
        if nvd.strip().lower() in ("void", "none", ""):
            return "fail", (f"NVIDIA_VISIBLE_DEVICES={nvd!r}: the container runtime maps no GPU into this "
                            "container"), "start the container with NVIDIA_VISIBLE_DEVICES=all (or the GPU's index/UUID)"
        if nvd.strip().lower() != "all":
            problem = _check_list("NVIDIA_VISIBLE_DEVICES", nvd, 0, [])
            if problem:
                return "warn", problem, "use `all`, indices or GPU UUIDs"
        found.append(f"NVIDIA_VISIBLE_DEVICES={nvd}")
    return ok("; ".join(found) if found else "CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES are unset (all GPUs)")


def container_kind(ctx: CheckContext) -> str | None:
    """'docker', 'podman', 'kubernetes', ... when running inside a container, else None."""
    if ctx.fs.exists("/run/.containerenv"):
        return "podman"
    if ctx.fs.exists("/.dockerenv"):
        return "docker"
    cg = ctx.fs.read_text("/proc/1/cgroup") or ""
    for key, name in (("kubepods", "kubernetes"), ("docker", "docker"), ("libpod", "podman"),
                      ("containerd", "containerd"), ("lxc", "lxc")):
        if key in cg:
            return name
    env = ctx.env.get("container")
    return env or None


def check_container(ctx: CheckContext) -> tuple[Status, str, str]:
    kind = container_kind(ctx)
    if kind is None:
        return skip("not running in a container")
    nodes = device_nodes(ctx) or []
    caps = ctx.env.get("NVIDIA_DRIVER_CAPABILITIES")
    if not nodes and not ctx.driver_ok():
        return "fail", f"inside a {kind} container with no GPU passed in (no /dev/nvidia* device nodes)", CONTAINER_FIX
    if caps is not None:
        have = {c.strip() for c in caps.split(",")}
        missing = [c for c in ("compute", "utility") if c not in have and "all" not in have]
        if missing:
            return "fail", (f"NVIDIA_DRIVER_CAPABILITIES={caps!r} lacks {', '.join(missing)} "
                            "(compute mounts libcuda, utility mounts NVML and nvidia-smi)"), (
                "start the container with `-e NVIDIA_DRIVER_CAPABILITIES=compute,utility`")
    if not ctx.driver_ok():
        return "fail", (f"inside a {kind} container: {len(nodes)} device node(s) mapped, but NVML does not "
                        "answer (driver libraries not mounted)"), CONTAINER_FIX
    return ok(f"inside a {kind} container with {len(nodes)} GPU device node(s)"
              + (f", capabilities {caps}" if caps else ""))
