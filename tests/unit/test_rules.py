"""Every troubleshooting rule matches at least one real-looking sample, and ranks first on it alone."""

from __future__ import annotations

import pytest

from engine.troubleshoot import load_rules, match_text, rules

SAMPLES: dict[str, list[str]] = {
    "cuda-insufficient-driver": [
        "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version",
        "cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_INSUFFICIENT_DRIVER: CUDA driver version is insufficient for CUDA runtime version"],
    "cuda-system-driver-mismatch": ["CUDARuntimeError: cudaErrorSystemDriverMismatch: system has unsupported display driver / cuda driver combination"],
    "cluster-does-not-fit": ["RunFailure: thread-block clusters: no cluster of 2 CTAs with 230528 bytes of shared memory fits this device",
                             "thread-block clusters: cuOccupancyMaxActiveClusters failed (CUresult 1)"],
    "cuda-compat-not-supported": ["CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: forward compatibility was attempted on non supported HW"],
    "cuda-no-device": ["cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorNoDevice: no CUDA-capable device is detected"],
    "cuda-devices-unavailable": ["CUDARuntimeError: cudaErrorDevicesUnavailable: CUDA-capable device(s) is/are busy or unavailable"],
    "cuda-no-kernel-image": ["CUDARuntimeError: cudaErrorNoKernelImageForDevice: no kernel image is available for execution on the device"],
    "cuda-unsupported-ptx": ["cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the provided PTX was compiled with an unsupported toolchain."],
    "cuda-too-many-resources": ["cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many resources requested for launch"],
    "cuda-invalid-configuration": ["CUDARuntimeError: cudaErrorInvalidConfiguration: invalid configuration argument"],
    "cuda-illegal-address": ["cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"],
    "cuda-misaligned-address": ["cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorMisalignedAddress: misaligned address"],
    "cuda-launch-failure": ["cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure"],
    "cuda-launch-timeout": ["CUDA_ERROR_LAUNCH_TIMEOUT: the launch timed out and was terminated"],
    "cuda-device-assert": [
        "/tmp/kernel.cu:42: sol_kernel: block: [3,0,0], thread: [31,0,0] Assertion `row < M` failed.\n"
        "CUDARuntimeError: cudaErrorAssert: device-side assert triggered"],
    "cupy-out-of-memory": [
        "cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 42,949,672,960 bytes (allocated so far: 1,073,741,824 bytes).",
        "CUDADriverError: CUDA_ERROR_OUT_OF_MEMORY: out of memory"],
    "knobs-much-slower": ["this run took 0.3120 ms with 16x64/12: 2.0x the 0.1556 ms of run #7 with 128x128/5"],
    "torch-out-of-memory": [
        "RuntimeError: CUDA error: out of memory",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB "
        "of which 1.19 GiB is free. Including non-PyTorch memory, this process has 77.90 GiB memory in use.",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity)"],
    "nvrtc-compile-error": [
        "cupy.cuda.compiler.CompileException: /tmp/tmpab12/kern.cu(17): error: identifier \"BLOCK_M\" is undefined\n1 error detected in the compilation of \"/tmp/tmpab12/kern.cu\"."],
    "nvrtc-invalid-arch": ["nvrtc: error: invalid value for --gpu-architecture (-arch)"],
    "nvcc-unsupported-arch": ["nvcc fatal   : Unsupported gpu architecture 'compute_100'"],
    "undefined-symbol": ["ImportError: /opt/app/build/libtinydl.so: undefined symbol: _ZN3c104cuda20CUDACachingAllocator9allocatorE"],
    "missing-shared-object": ["./mnist_train: error while loading shared libraries: libcudart.so.12: cannot open shared object file: No such file or directory"],
    "compile-out-of-memory": [
        "c++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated.",
        "nvcc error   : 'cicc' died due to signal 9 (Kill signal)"],
    "shared-memory-over-allocated": [
        "ptxas error   : Entry function 'gemm_residual_bf16' uses too much shared data (0x30000 bytes, 0xc000 max)",
        "block_size=256x128x64: needs 147456 bytes > 232448 bytes shared memory per block"],
    "nvml-library-not-found": ["pynvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found"],
    "nvml-driver-not-loaded": [
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."],
    "nvml-version-mismatch": ["Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.65"],
    "nvml-not-supported": ["pynvml.NVMLError_NotSupported: Not Supported"],
    "nvml-gpu-lost": ["Unable to determine the device handle for GPU0000:18:00.0: Unknown Error\nGPU requires reset"],
    "nouveau-loaded": ["ERROR: The Nouveau kernel driver is currently in use by your system.  This driver is incompatible with the NVIDIA driver"],
    "xid-fallen-off-bus": ["[ 4812.133] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, name=swapper/0, GPU has fallen off the bus."],
    "xid-memory-error": ["[  912.5] NVRM: Xid (PCI:0000:18:00): 94, pid=2211, name=python, Contained: SM (0x1). RST: No, D-RST: No"],
    "xid-app-fault": ["[ 1123.9] NVRM: Xid (PCI:0000:18:00): 31, pid=4242, name=python, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f12_00000000"],
    "xid-other": ["[ 77.2] NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (Reset Required)"],
    "docker-gpus-without-toolkit": [
        'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].'],
    "podman-cdi-unresolvable": ["Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=all"],
    "device-not-visible": [
        "Warning  FailedScheduling  default-scheduler  0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        "Failed to initialize NVML: Unknown Error"],
    "nan-inf-output": ["output does not match the reference: max rel err nan > rtol 0.02, 4096 NaN, 0 Inf, 0 unwritten elements"],
    "race-or-out-of-bounds": [
        "========= Invalid __global__ read of size 16 bytes\n=========     at gemm_residual_bf16+0x1a30",
        "========= Race reported between Write access at smem_tile+0x90 and Read access"],
    "output-mismatch": ["output does not match the reference: max rel err 0.31 > rtol 0.02, 0 NaN, 0 Inf, 0 unwritten elements"],
    "task-timeout-hang": ["timed out after 60 s during timed: the engine process was killed (a hung kernel, or a run longer than the timeout)"],
    "engine-crashed": ["the engine process died during compile (exit code -11)", "[ 991.1] python[4242]: segfault at 10 ip 00007f sp 00007ffd error 6 in libcuda.so.1"],
    "tensor-cores-starved": [
        "Warp Stall Sampling: On average, each warp of this kernel spends 18.2 cycles being stalled waiting for a L1TEX (local, global, surface, texture) operation."],
    "bandwidth-bound": ["kernel=rmsnorm_residual dtype=bf16 median=0.041 ms bound: memory SOL 88 %"],
    "thermal-slowdown": ["    Clocks Event Reasons\n        HW Thermal Slowdown               : Active"],
    "power-cap": ["    Clocks Event Reasons\n        SW Power Cap                      : Active"],
    "performance-below-expectation": ["gemm_residual bf16 16x512x2560: 0.412 ms, 198 TFLOP/s, SOL 12.5 % (score 0.31)"],
    "other-processes": ["|    0   N/A  N/A     4242      C   python3                                 2048MiB |"],
    "cuda-debug-env": ["env: CUDA_LAUNCH_BLOCKING=1 PYTHONUNBUFFERED=1", "$ export CUDA_LAUNCH_BLOCKING=1",
                       "WARN env.cuda_debug: CUDA_LAUNCH_BLOCKING=1 (serialises every launch)"],
    "persistence-off": ["    Persistence Mode                      : Disabled"],
    "pcie-link-degraded": ["\t\tLnkSta:\tSpeed 32GT/s, Width x8 (downgraded)"],
    "mig-enabled": ["    MIG Mode\n        Current                           : Enabled\n        Pending                           : Enabled"],
    "running-as-root": ["WARN host.user: running as root"],
    "disk-full": ["OSError: [Errno 28] No space left on device: '/home/op/.cache/sol-cockpit/kernels/ab12.cubin.tmp'"],
    "cupy-not-installed": ["ModuleNotFoundError: No module named 'cupy'"],
    "cupy-multiple-packages": [
        "UserWarning: CuPy may not function correctly because multiple CuPy packages are installed in your environment: cupy-cuda12x, cupy-cuda13x"],
    "pynvml-shadowing": ["FutureWarning: The pynvml package is deprecated. Please install nvidia-ml-py instead."],
    "silent-data-corruption": ["soak stopped: silent data corruption at 312.5 s into the soak: the output verified at "
                               "the start, now max rel err 0.41 > rtol 0.016 (12 elements)"],
    "ptx-jit-warmup": ["WARN arch.ptx-jit: runs on cc 9.0 only through PTX JIT (no SASS for cc 9.0)"],
    "binary-smoke-failed": ["smoke run: exited with status 3; no known failure pattern in its output",
                            "smoke run: killed by SIGSEGV; no known failure pattern in its output"],
}


def test_at_least_thirty_rules_and_unique_ids() -> None:
    rs = load_rules()
    assert len(rs) >= 30
    assert len({r.id for r in rs}) == len(rs)


def test_every_rule_has_a_sample() -> None:
    assert set(SAMPLES) == {r.id for r in rules()}


@pytest.mark.parametrize(("rule_id", "sample"), [(k, s) for k, v in SAMPLES.items() for s in v])
def test_sample_ranks_its_rule_first_alone(rule_id: str, sample: str) -> None:
    matches = match_text(sample)
    assert matches, f"{rule_id}: nothing matched {sample!r}"
    assert matches[0].id == rule_id, [(m.id, m.score) for m in matches]
    tied = [m.id for m in matches[1:] if m.score == matches[0].score]
    assert not tied, f"{rule_id} ties with {tied} on {sample!r}"
    assert matches[0].evidence


def test_sticky_cuda_errors_say_restart() -> None:
    for rid in ("cuda-illegal-address", "cuda-misaligned-address", "cuda-launch-failure", "cuda-launch-timeout",
                "cuda-device-assert"):
        m = match_text(SAMPLES[rid][0])[0]
        assert m.sticky and "restart" in (m.title + m.fix).lower()


def test_seed_rows_carry_structured_knobs() -> None:
    by_id = {r.id: r for r in rules()}
    assert by_id["shared-memory-over-allocated"].knob == {"block_size": "smaller"}
    assert by_id["tensor-cores-starved"].knob == {"memory_pipelining": 3}
    assert by_id["bandwidth-bound"].knob["fusion"] is True
    assert by_id["performance-below-expectation"].knob == {"fusion": True}


def test_insufficient_driver_mentions_the_no_driver_case() -> None:
    m = match_text(SAMPLES["cuda-insufficient-driver"][0])[0]
    assert "no NVIDIA driver" in m.cause and "install the NVIDIA driver" in m.fix
    assert "--backend sim" in m.engine_note  # the cockpit's own way round it, not a fix for any log


PYTORCH_HINT = ("CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
                "below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
                "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")


@pytest.mark.parametrize(("error", "rule_id"), [
    ("RuntimeError: CUDA error: out of memory", "torch-out-of-memory"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda-illegal-address"),
    ("RuntimeError: CUDA error: device-side assert triggered", "cuda-device-assert"),
])
def test_pytorch_debugging_hint_is_not_a_setting(error: str, rule_id: str) -> None:
    """PyTorch prints the hint under every CUDA error; it says what one could set, not what is set."""
    ids = [m.id for m in match_text(f"{error}\n{PYTORCH_HINT}")]
    assert ids[0] == rule_id and "cuda-debug-env" not in ids
    assert "cuda-debug-env" not in [m.id for m in match_text("Try setting CUDA_LAUNCH_BLOCKING=1 to debug.")]
