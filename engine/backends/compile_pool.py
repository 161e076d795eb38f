"""A pool of processes that compile ahead (NVRTC needs no CUDA context), for the tune's engine
process: the GPU times one candidate while the pool compiles the next ones into the kernel cache.

Closing waits for the compiles in flight (about a second) after cancelling the queued ones: a pool
shut down without waiting keeps its engine process alive at exit, and its workers, holding the
caller's stdout, keep a pipe on `tui tune --json | ...` open."""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
from collections.abc import Callable
from typing import Any

WORKERS = 12
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """A pool worker is killed with its engine process (Linux ``prctl``): an engine process killed
    for a hung kernel must not leave compile workers behind holding the caller's terminal."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    except (AttributeError, OSError):  # not Linux: the close() path still ends them
        pass


class CompilePool:
    """``submit(key, fn, *args)`` once per key; ``wait(key)`` for its result (None when never
    submitted or failed); ``close()`` before the process exits. Without processes (a daemonic
    caller) it does nothing and each caller compiles for itself."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, min(workers or WORKERS, (os.cpu_count() or 2) - 1))
        self._pool: Any = None
        self._futures: dict[str, cf.Future[Any]] = {}

    def submit(self, key: str, fn: Callable[..., Any], *args: Any) -> None:
        if key in self._futures or self._pool is False:
            return
        if self._pool is None:
            try:
                self._pool = cf.ProcessPoolExecutor(self.workers, mp_context=mp.get_context("spawn"),
                                                    initializer=_die_with_parent)
            except Exception:  # no child processes here (e.g. a daemonic process)
                self._pool = False
                return
        self._futures[key] = self._pool.submit(fn, *args)

    def wait(self, key: str, timeout: float = 120.0) -> Any:
        fut = self._futures.pop(key, None)
        if fut is None:
            return None
        try:
            return fut.result(timeout=timeout)
        except Exception:  # the caller compiles again and reports the error itself
            return None

    def close(self) -> None:
        if self._pool:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool = None
        self._futures.clear()
