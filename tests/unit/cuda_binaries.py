"""Small real C++/CUDA binaries for `tui inspect`'s tests, built with nvcc (no GPU needed) and gcc.

One program serves every smoke-run case by its first argument (nothing but ``launch`` touches
CUDA, so the others run on a machine without a GPU):

  launch    allocate, launch a kernel, synchronise; print 'ok' or the CUDA error (exit 1)
  ok        print 'ok'
  no-image  print the CUDA runtime's 'no kernel image' error and exit 1
  exit3     print 'bad arguments' and exit 3
  segv      die of SIGSEGV
  sleep     fork a child, print both pids, and sleep (the child too) for 10 minutes
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

PROGRAM = r"""
#include <cstdio>
#include <cstring>
#include <csignal>
#include <unistd.h>
#ifdef WITH_FOO
extern "C" int foo(void);
#endif
__global__ void fill(int *x) { x[threadIdx.x] = threadIdx.x; }
int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "launch";
#ifdef WITH_FOO
    printf("foo() = %d\n", foo());
#endif
    if (!strcmp(mode, "ok")) { printf("ok\n"); return 0; }
    if (!strcmp(mode, "no-image")) {
        fprintf(stderr, "CUDA error: no kernel image is available for execution on the device\n");
        return 1;
    }
    if (!strcmp(mode, "exit3")) { printf("bad arguments\n"); return 3; }
    if (!strcmp(mode, "segv")) { raise(SIGSEGV); return 0; }
    if (!strcmp(mode, "sleep")) {
        pid_t child = fork();
        printf("%s %d\n", child == 0 ? "child" : "parent", (int)getpid());
        fflush(stdout);
        sleep(600);
        return 0;
    }
    int *d = nullptr;
    cudaError_t e = cudaMalloc(&d, 32 * sizeof(int));
    if (e == cudaSuccess) { fill<<<1, 32>>>(d); e = cudaGetLastError(); }  // launch errors (no kernel image)
    if (e == cudaSuccess) e = cudaDeviceSynchronize();                      // errors while it ran
    if (e != cudaSuccess) { fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(e)); return 1; }
    printf("ok\n");
    return 0;
}
"""

FOO = "int foo(void) { return 42; }\n"
HOST_ONLY = '#include <stdio.h>\nint main(void) { puts("no CUDA here"); return 0; }\n'


def build_shared(shared_root: Path, mine: Path, nvcc: str) -> dict[str, Path]:
    """``build_all``'s default set, built once into ``shared_root`` (a folder every pytest-xdist
    worker of the run sees; a lock file serialises the build) and copied into ``mine``, which a
    test may change (it hides a library, for one). The cache is keyed by the programs' text and
    nvcc's version, so a change to either builds anew."""
    import fcntl
    import hashlib
    import json

    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256((PROGRAM + FOO + HOST_ONLY + version).encode()).hexdigest()[:16]
    shared = shared_root / f"cuda_bins_{key}"
    shared_root.mkdir(parents=True, exist_ok=True)
    with open(shared_root / f"cuda_bins_{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        index = shared / "index.json"
        if not index.is_file():
            shutil.rmtree(shared, ignore_errors=True)
            built = build_all(shared, nvcc)
            index.write_text(json.dumps({k: str(v.relative_to(shared)) for k, v in built.items()}))
    shutil.copytree(shared, mine, symlinks=True, dirs_exist_ok=True)
    return {k: mine / rel for k, rel in json.loads(index.read_text()).items()}


def nvcc_path() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    local = Path("/usr/local/cuda/bin/nvcc")
    return str(local) if local.is_file() else None


def _run(cmd: list[str], cwd: Path) -> None:
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")


def build_all(root: Path, nvcc: str, gencodes: dict[str, list[str]] | None = None) -> dict[str, Path]:
    """Build into ``root``: one program per entry of ``gencodes`` (name -> nvcc -gencode values;
    default sm80 = SASS sm_80 only, ptx80 = SASS sm_80 and PTX compute_80), ``foo/app_foo``
    (linked with -cudart shared against ``foo/lib/libfoo.so``, found through RUNPATH
    $ORIGIN/lib), ``libkern.so`` (a shared library with sm_90 SASS) and ``host_only`` (gcc,
    no CUDA at all)."""
    gencodes = gencodes or {"sm80": ["arch=compute_80,code=sm_80"], "ptx80": ["arch=compute_80,code=[sm_80,compute_80]"]}
    root.mkdir(parents=True, exist_ok=True)
    (root / "prog.cu").write_text(PROGRAM)
    out: dict[str, Path] = {}
    for name, codes in gencodes.items():
        flags = [x for c in codes for x in ("-gencode", c)]
        _run([nvcc, *flags, "-o", name, "prog.cu"], root)
        out[name] = root / name
    foo = root / "foo"
    (foo / "lib").mkdir(parents=True, exist_ok=True)
    (foo / "foo.c").write_text(FOO)
    _run(["gcc", "-shared", "-fPIC", "-o", "lib/libfoo.so", "foo.c"], foo)
    _run([nvcc, "-DWITH_FOO", "-gencode", "arch=compute_80,code=[sm_80,compute_80]", "-cudart", "shared",
          "-o", "app_foo", "../prog.cu", "-Llib", "-lfoo", "-Xlinker", "-rpath=$ORIGIN/lib",
          "-Xlinker", "--enable-new-dtags"], foo)
    out["app_foo"] = foo / "app_foo"
    out["libfoo"] = foo / "lib" / "libfoo.so"
    _run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_90,code=sm_90", "-o", "libkern.so",
          "prog.cu"], root)
    out["libkern"] = root / "libkern.so"
    (root / "host_only.c").write_text(HOST_ONLY)
    _run(["gcc", "-o", "host_only", "host_only.c"], root)
    out["host_only"] = root / "host_only"
    return out
