"""A run, soak or tune that Ctrl-C, SIGTERM or SIGHUP (a closed terminal) stops still leaves its
record: the work runs in a thread with a cancel event, the signal (raised in the main thread by
``tui.cli.main``) sets the event, the engine cancels and returns its cancelled result, and the
command stores it before the exit status says how it was stopped (issue 47, defect 19)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

GRACE_S = 15.0
"""How long a cancelled job may take to hand back its result before the command gives up on it."""


class Stopped(KeyboardInterrupt):
    """The signal that stopped the work (``signum``, as ``tui.cli.main.Signalled`` has it), with
    the cancelled result, or None when the work had not returned one within ``GRACE_S``."""

    def __init__(self, cause: KeyboardInterrupt, result: Any) -> None:
        super().__init__(*cause.args)
        self.cause = cause
        self.result = result
        self.signum = getattr(cause, "signum", 2)


def run_cancellable(work: Callable[[threading.Event], Any]) -> Any:
    """``work(cancel)``'s value; on Ctrl-C or a stop signal, cancel it, wait for what it returns,
    and raise ``Stopped`` carrying it."""
    cancel, done = threading.Event(), threading.Event()
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            box["value"] = work(cancel)
        except BaseException as exc:  # handed to the main thread as it is
            box["error"] = exc
        finally:
            done.set()

    # Waited on with an Event, not Thread.join: a join that a signal interrupts can leave the
    # thread marked as ended while it still runs (CPython), and the result would be lost.
    threading.Thread(target=body, name="sol-cli-job", daemon=True).start()
    try:
        while not done.wait(0.2):
            pass
    except KeyboardInterrupt as exc:
        cancel.set()
        done.wait(GRACE_S)
        raise Stopped(exc, box.get("value")) from None
    if "error" in box:
        raise box["error"]
    return box.get("value")
