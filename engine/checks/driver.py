"""Is the NVIDIA driver there, is it the one NVML talks to, and is nouveau in the way?"""

from __future__ import annotations

import re

from engine.checks.context import CheckContext
from engine.checks.model import NO_DRIVER_SKIP, Status, ok, skip

PROC_VERSION = "/proc/driver/nvidia/version"

SIM_HINT = "or rehearse without a GPU: `tui bench --backend sim`"


def proc_driver_version(ctx: CheckContext) -> str | None:
    """The kernel module's version from /proc/driver/nvidia/version (absent on WSL and without it)."""
    text = ctx.fs.read_text(PROC_VERSION)
    if not text:
        return None
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else None


def no_driver_message(ctx: CheckContext) -> str:
    return "no NVIDIA driver found: NVML (libnvidia-ml.so.1) cannot be loaded and no kernel module is loaded"


def check_loaded(ctx: CheckContext) -> tuple[Status, str, str]:
    kmod = proc_driver_version(ctx)
    good, problem, _ = ctx.nvml_status()
    if good:
        ver = ctx.nvml.driver_version() or "?"
        cuda = ctx.nvml.cuda_driver_version()
        n = len(ctx.devices())
        return ok(f"driver {ver}" + (f" (CUDA {cuda})" if cuda else "") + f"; NVML answers and sees {n} GPU(s)")
    low = (problem or "").lower()
    if "mismatch" in low:
        return "warn", (f"kernel module {kmod or '?'} is loaded, but NVML refuses it: {problem} "
                        "(see driver.version_mismatch)"), "reboot, or reload the nvidia kernel modules"
    if "not loaded" in low:
        return "fail", f"the NVIDIA user-space driver is installed but its kernel module is not loaded ({problem})", (
            "load it: `sudo modprobe nvidia`; if that fails read `sudo dmesg | grep -i -e nvidia -e nouveau` "
            "(Secure Boot refusing an unsigned module, nouveau holding the GPU, a kernel upgrade without "
            f"DKMS rebuilding the module); {SIM_HINT}")
    if kmod and ("libnvidia-ml" in low or "not found" in low or "not installed" in low):
        return "fail", (f"kernel module {kmod} is loaded, but NVML (libnvidia-ml.so.1) cannot be loaded: "
                        f"{problem}"), (
            "in a container pass the utility capability (NVIDIA_DRIVER_CAPABILITIES=compute,utility) or "
            "use `--gpus all`; on the host reinstall the driver's user-space libraries")
    if kmod is None and ("libnvidia-ml" in low or "no nvidia driver" in low or "not found" in low):
        return "fail", no_driver_message(ctx), (
            "install the NVIDIA driver (e.g. `sudo apt install nvidia-driver-580` or NVIDIA's .run "
            "installer) and reboot; in a container run with `--gpus all` (NVIDIA Container Toolkit) or "
            f"`--device nvidia.com/gpu=all` (CDI); {SIM_HINT}")
    return "fail", f"NVML does not answer: {problem}", f"run `nvidia-smi` to see what the driver says; {SIM_HINT}"


def check_nouveau(ctx: CheckContext) -> tuple[Status, str, str]:
    text = ctx.fs.read_text("/proc/modules")
    if text is None:
        return skip("cannot read /proc/modules")
    mods = {line.split()[0] for line in text.splitlines() if line.strip()}
    nvidia = "nvidia" in mods
    if "nouveau" in mods:
        fix = ("blacklist nouveau: `echo -e 'blacklist nouveau\\noptions nouveau modeset=0' | sudo tee "
               "/etc/modprobe.d/blacklist-nouveau.conf && sudo update-initramfs -u` (dracut -f on RHEL), "
               "then reboot")
        if nvidia:
            return "warn", "both nouveau and nvidia kernel modules are loaded", fix
        return "fail", "the open-source nouveau driver is loaded instead of the NVIDIA driver", fix
    return ok("nouveau is not loaded" + ("; the nvidia module is" if nvidia else ""))


def check_mismatch(ctx: CheckContext) -> tuple[Status, str, str]:
    good, problem, _ = ctx.nvml_status()
    kmod = proc_driver_version(ctx)
    fix = ("the kernel module and the user-space libraries differ (usually after a driver upgrade "
           "without a reboot): reboot, or `sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && "
           "sudo modprobe nvidia`")
    if not good:
        if "mismatch" in (problem or "").lower():
            return "fail", f"driver/library version mismatch: {problem}" + (
                f" (kernel module {kmod})" if kmod else ""), fix
        return skip(NO_DRIVER_SKIP)
    lib = ctx.nvml.driver_version()
    if kmod and lib and kmod != lib:
        return "fail", f"kernel module {kmod} but user-space driver {lib}", fix
    if kmod is None:
        return ok(f"user-space driver {lib or '?'}; no /proc/driver/nvidia/version to compare (WSL or a container)")
    return ok(f"kernel module and user-space driver are both {lib}")
