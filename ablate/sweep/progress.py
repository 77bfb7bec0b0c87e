"""The sweep's progress: done / running / waiting / diverged / failed / ETA.

On a terminal one line with a bar is redrawn in place (every second, for the ETA) and finished runs
scroll above it. In a log (not a TTY) there is no bar and no carriage return: one plain line is
printed when something changes (a run starts, waits for another process, or ends), with the counts.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TextIO


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


@dataclass
class Progress:
    name: str
    total: int
    workers: int
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    tty: bool | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"completed": 0, "diverged": 0, "stopped": 0,
                                                            "failed": 0, "interrupted": 0})
    durations: list[float] = field(default_factory=list)  # of runs finished by this invocation
    running: dict[str, float] = field(default_factory=dict)  # run id -> start (monotonic)
    held: dict[str, float] = field(default_factory=dict)  # run id -> time trained before it paused (early termination)
    waiting: set[str] = field(default_factory=set)  # run ids another process is training
    pending: int = 0
    unplanned: int = 0  # a tuned sweep's stage-2 runs whose variant has not chosen its value yet: still to come
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if self.tty is None:
            self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._drawn = False

    @property
    def finished(self) -> int:
        return self.counts["completed"] + self.counts["diverged"] + self.counts["stopped"] + self.counts["failed"]

    def eta(self) -> float | None:
        """Work left (pending runs and stage-2 runs still to be planned at the mean duration, running ones at
        what remains of it) / workers."""
        waiting = self.pending + self.unplanned
        if not self.durations:
            return None if (waiting or self.running) else 0.0
        mean = sum(self.durations) / len(self.durations)
        now = time.monotonic()
        left = waiting * mean + sum(max(mean - (now - t), 0.0) for t in self.running.values())
        return left / max(1, min(self.workers, waiting + len(self.running)))

    def status(self) -> str:
        """The counts, in words (no bar)."""
        c = self.counts
        parts = [f"{c['completed']}/{self.total} done", f"{len(self.running)} running"]
        if self.waiting:
            parts.append(f"{len(self.waiting)} waiting for another process")
        parts += [f"{c['diverged']} diverged", f"{c['failed']} failed"]
        if c["stopped"]:
            parts.append(f"{c['stopped']} stopped early")
        if c["interrupted"]:
            parts.append(f"{c['interrupted']} interrupted")
        return " | ".join(parts) + (f" | {duration(time.monotonic() - self.started)} elapsed, "
                                    f"ETA {duration(self.eta())}")

    def line(self) -> str:
        """The terminal's line: the bar, then the counts."""
        width = 20
        filled = int(width * self.finished / self.total) if self.total else width
        return f"{self.name} [{'#' * filled}{'-' * (width - filled)}] {self.status()}"

    def _clear(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\r\x1b[2K")
            self._drawn = False

    def draw(self) -> None:
        """Redraw the bar in place (terminal only; a log gets plain lines at events)."""
        if self.tty:
            self._clear()
            self.stream.write(self.line())
            self.stream.flush()
            self._drawn = True

    def say(self, text: str) -> None:
        """A line that stays (above the bar on a terminal)."""
        self._clear()
        self.stream.write(text + "\n")
        self.stream.flush()
        self.draw()

    def _event(self, text: str) -> None:
        """A change: on a terminal the bar shows it; a log gets one plain line with the counts."""
        if self.tty:
            self.draw()
        else:
            self.say(f"{text} | {self.status()}")

    def start(self, run_id: str, label: str = "") -> None:
        self.running[run_id] = time.monotonic()
        self.waiting.discard(run_id)
        self.pending = max(0, self.pending - 1)
        self._event(f"started   {label or run_id}")

    def wait(self, run_id: str, label: str = "") -> None:
        """The run is being trained by another process: this one waits for its result."""
        if self.running.pop(run_id, None) is None:
            self.pending = max(0, self.pending - 1)
        self.waiting.add(run_id)
        self._event(f"waiting   {label or run_id}: another process is training it")

    def requeue(self, run_id: str) -> None:
        """A run this process waited for is to be run here after all (the other process left it)."""
        self.waiting.discard(run_id)
        self.pending += 1

    def finish(self, run_id: str, outcome: str, text: str) -> None:
        started = self.running.pop(run_id, None)
        self.waiting.discard(run_id)
        if outcome in self.counts:
            self.counts[outcome] += 1
        if started is not None and outcome == "paused":  # resumes later: its time counts once it ends
            self.held[run_id] = self.held.get(run_id, 0.0) + time.monotonic() - started
        if started is not None and outcome in ("completed", "diverged"):  # a resumed run: all its stretches
            self.durations.append(self.held.pop(run_id, 0.0) + time.monotonic() - started)
        took = f" ({time.monotonic() - started:.1f} s)" if started is not None else ""
        done = f"[{self.finished}/{self.total}]"
        if self.tty:
            self.say(f"{done} {outcome:<9} {text}{took}")
        else:
            self.say(f"{done} {outcome:<9} {text}{took} | {self.status()}")

    def close(self) -> None:
        self._clear()
        self.stream.flush()
