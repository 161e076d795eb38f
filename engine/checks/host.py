"""The host around the GPU: the account, disk, memory for compiling, writable folders."""

from __future__ import annotations

from engine.checks.context import CheckContext
from engine.checks.model import Status, ok, skip

GIB = 2**30


def check_user(ctx: CheckContext) -> tuple[Status, str, str]:
    if ctx.euid < 0:
        return skip("the user id is not available on this platform")
    if ctx.euid == 0:
        return "warn", "running as root", (
            "use an unprivileged account (add it to the `video`/`render` group if /dev/nvidia* needs it); "
            "in containers set `--user`")
    return ok(f"running as uid {ctx.euid}")


def check_disk(ctx: CheckContext) -> tuple[Status, str, str]:
    seen: dict[str, int] = {}
    for label, path in ctx.dirs.items():
        free = ctx.disk_free(path)
        if free is not None:
            seen[f"{label} ({path})"] = free
    if not seen:
        return skip("free disk space is not available")
    text = "; ".join(f"{k}: {v / GIB:.1f} GiB free" for k, v in seen.items())
    low = min(seen.values())
    fix = ("free space, or point the cockpit elsewhere: SOL_COCKPIT_CACHE_DIR (kernel cache), "
           "SOL_COCKPIT_DATA_DIR (results)")
    if low < 1 * GIB:
        return "fail", text, fix
    if low < 5 * GIB:
        return "warn", text, fix
    return ok(text)


def meminfo(ctx: CheckContext) -> dict[str, int] | None:
    text = ctx.fs.read_text("/proc/meminfo")
    if not text:
        return None
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0]) * 1024
    return out


def check_memory(ctx: CheckContext) -> tuple[Status, str, str]:
    mem = meminfo(ctx)
    if not mem or "MemTotal" not in mem:
        return skip("/proc/meminfo is not readable")
    avail = mem.get("MemAvailable", mem.get("MemFree", 0))
    swap = mem.get("SwapTotal", 0)
    text = (f"{avail / GIB:.1f} GiB of {mem['MemTotal'] / GIB:.1f} GiB available, "
            f"swap {swap / GIB:.1f} GiB")
    fix = ("compilers (nvcc's cicc, ptxas, NVRTC) are killed when memory runs out: add swap "
           "(`sudo fallocate -l 8G /swapfile && sudo mkswap /swapfile && sudo swapon /swapfile`), build with "
           "fewer parallel jobs (`make -j2`), or compile on a larger instance")
    if avail < 1 * GIB:
        return "fail", text, fix
    if avail < 4 * GIB and swap == 0:
        return "warn", text + " (tight for compiling, and no swap)", fix
    return ok(text)


def check_dirs(ctx: CheckContext) -> tuple[Status, str, str]:
    bad = [f"{label} ({path})" for label, path in ctx.dirs.items() if not ctx.writable(path)]
    if bad:
        return "fail", "not writable: " + "; ".join(bad), (
            "fix the permissions, or set SOL_COCKPIT_CACHE_DIR / SOL_COCKPIT_DATA_DIR / SOL_COCKPIT_CONFIG_DIR "
            "(or SOL_COCKPIT_STORE) to writable folders")
    return ok("writable: " + "; ".join(f"{k} ({v})" for k, v in ctx.dirs.items()))
