"""The sweep's one progress line: done / running / diverged / failed / ETA.

On a terminal the line is redrawn in place and finished runs scroll above it; in a log (not a TTY)
every finished run prints one plain line that ends with the same counts.
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
    counts: dict[str, int] = field(default_factory=lambda: {"completed": 0, "diverged": 0, "failed": 0})
    durations: list[float] = field(default_factory=list)  # of runs finished by this invocation
    running: dict[str, float] = field(default_factory=dict)  # run id -> start (monotonic)
    pending: int = 0
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if self.tty is None:
            self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._drawn = False

    @property
    def finished(self) -> int:
        return sum(self.counts.values())

    def eta(self) -> float | None:
        """Work left (pending runs at the mean duration, running ones at what remains of it) / workers."""
        if not self.durations:
            return None if (self.pending or self.running) else 0.0
        mean = sum(self.durations) / len(self.durations)
        now = time.monotonic()
        left = self.pending * mean + sum(max(mean - (now - t), 0.0) for t in self.running.values())
        return left / max(1, min(self.workers, self.pending + len(self.running)))

    def line(self) -> str:
        width = 20
        filled = int(width * self.finished / self.total) if self.total else width
        bar = "#" * filled + "-" * (width - filled)
        c = self.counts
        return (f"{self.name} [{bar}] {c['completed']}/{self.total} done | {len(self.running)} running | "
                f"{c['diverged']} diverged | {c['failed']} failed | "
                f"{duration(time.monotonic() - self.started)} elapsed, ETA {duration(self.eta())}")

    def _clear(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\r\x1b[2K")
            self._drawn = False

    def draw(self) -> None:
        """Redraw the line in place (terminal only; a log gets lines at events)."""
        if self.tty:
            self._clear()
            self.stream.write(self.line())
            self.stream.flush()
            self._drawn = True

    def say(self, text: str) -> None:
        """A line that stays (above the progress line on a terminal)."""
        self._clear()
        self.stream.write(text + "\n")
        self.stream.flush()
        self.draw()

    def start(self, run_id: str) -> None:
        self.running[run_id] = time.monotonic()
        self.pending = max(0, self.pending - 1)

    def finish(self, run_id: str, outcome: str, text: str) -> None:
        started = self.running.pop(run_id, None)
        if outcome in self.counts:
            self.counts[outcome] += 1
        if started is not None and outcome in ("completed", "diverged"):
            self.durations.append(time.monotonic() - started)
        took = f" ({time.monotonic() - started:.1f} s)" if started is not None else ""
        done = f"[{self.finished}/{self.total}]"
        if self.tty:
            self.say(f"{done} {outcome:<9} {text}{took}")
        else:
            self.say(f"{done} {outcome:<9} {text}{took} | {self.line()}")

    def close(self) -> None:
        self._clear()
        self.stream.flush()
