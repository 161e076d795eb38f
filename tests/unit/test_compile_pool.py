"""The tune's compile pool lets its engine process exit as soon as the tune is done: a pool shut
down without waiting kept that process alive, and its workers kept `tui tune --json | ...`'s pipe
open, so a shell pipeline never ended."""

from __future__ import annotations

import multiprocessing as mp
import time

from engine.backends.compile_pool import CompilePool


def _slow(x: int) -> int:
    time.sleep(0.3)
    return x


def _child(conn) -> None:  # an engine process that compiles ahead, then finishes early
    from engine.process import die_with_parent

    die_with_parent()  # a failing test must not leave this process behind
    pool = CompilePool(workers=2)
    for i in range(50):
        pool.submit(f"k{i}", _slow, i)
    assert pool.wait("k0") == 0 and pool.wait("never") is None
    pool.close()
    conn.send("done")
    conn.close()


def test_an_engine_process_with_a_pool_exits_promptly():
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send,), daemon=False)
    t0 = time.monotonic()
    proc.start()
    send.close()
    assert recv.recv() == "done"
    proc.join(20)
    try:
        assert proc.exitcode == 0, "the engine process did not exit after closing its pool"
        assert time.monotonic() - t0 < 20
    finally:
        if proc.is_alive():
            proc.kill()


def test_a_pool_that_cannot_start_processes_does_nothing():
    pool = CompilePool()
    pool._pool = False  # what a daemonic process gets
    pool.submit("k", _slow, 1)
    assert pool.wait("k") is None
    pool.close()


def _child_killed(conn) -> None:
    from engine.process import die_with_parent

    die_with_parent()
    pool = CompilePool(workers=2)
    for i in range(50):
        pool.submit(f"k{i}", _slow, i)
    pool.wait("k0")
    import os

    conn.send([p.pid for p in pool._pool._processes.values()] + [os.getpid()])
    time.sleep(60)


def test_killing_the_engine_process_kills_its_compile_workers():
    import os

    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child_killed, args=(send,), daemon=False)
    proc.start()
    pids = recv.recv()
    proc.kill()
    proc.join(5)
    deadline = time.monotonic() + 10
    alive = pids[:-1]
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _alive(p)]
        time.sleep(0.1)
    for p in alive:
        os.kill(p, 9)
    assert not alive, f"compile workers outlived their engine process: {alive}"


def _alive(pid: int) -> bool:
    import os

    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False
    finally:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
