"""Stage progress of one run: compile, load, inputs, warm-up, timed, verify, peers, collect."""

from __future__ import annotations

from rich.text import Text

from engine import STAGES

LABELS = {"compile": "compile", "load": "load", "inputs": "inputs", "warmup": "warm-up",
          "timed": "timed", "verify": "verify", "peers": "peers", "collect": "collect"}
MARKS = {"pending": ("·", "dim"), "start": ("▶", "bold yellow"), "done": ("✓", "green"),
         "skip": ("-", "dim"), "fail": ("✗", "bold red"), "stopped": ("■", "yellow")}


def render_stages(states: dict[str, str], progress: dict[str, tuple[int, int]] | None = None) -> Text:
    """One line: ``✓ compile  ✓ load  ▶ timed 60/100  · verify ...``; states are the StageEvent
    states ('start', 'done', 'skip', 'fail'), missing = pending."""
    progress = progress or {}
    out = Text(no_wrap=False)
    for i, stage in enumerate(STAGES):
        state = states.get(stage, "pending")
        mark, style = MARKS.get(state, MARKS["pending"])
        if i:
            out.append("  ")
        out.append(f"{mark} {LABELS[stage]}", style=style)
        if state == "start" and stage in progress:
            done, total = progress[stage]
            out.append(f" {done}/{total}", style=style)
    return out


class StageTracker:
    """Folds engine events into stage states (pure; the Run screen renders it)."""

    def __init__(self) -> None:
        self.states: dict[str, str] = {}
        self.progress: dict[str, tuple[int, int]] = {}

    def reset(self) -> None:
        self.states.clear()
        self.progress.clear()

    def apply(self, event) -> None:
        kind = getattr(event, "kind", None)
        if kind == "stage":
            self.states[event.stage] = event.state
        elif kind == "progress":
            self.progress[event.stage] = (event.done, event.total)

    def stop(self, failed: bool) -> None:
        """The run ended without finishing its stages (cancelled, timed out, crashed): a stage still
        marked as running is marked stopped (or failed), never left as ``▶``."""
        for stage, state in self.states.items():
            if state == "start":
                self.states[stage] = "fail" if failed else "stopped"
        self.progress.clear()

    def fraction(self) -> float:
        """Share of stages finished (done, skipped or failed), for a progress bar."""
        finished = sum(1 for s in STAGES if self.states.get(s) in ("done", "skip", "fail"))
        return finished / len(STAGES)

    def render(self) -> Text:
        return render_stages(self.states, self.progress)
