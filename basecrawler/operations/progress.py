"""A one-line progress display on stderr for terminals (no dependency); silent otherwise.
Used by long work: crawls (count only, the total is unknown) and translation (a bar)."""
from __future__ import annotations

import sys
import time


class ProgressBar:
    """Call with (done, total); redraws at most ten times a second, `close()` ends the line."""

    def __init__(self, label: str = "translate", stream=None, width: int = 30, unit: str = "rows"):
        self.unit = unit
        self.label = label
        self.stream = stream or sys.stderr
        self.width = width
        self._last = 0.0
        self._drawn = False
        self._started = time.monotonic()

    @classmethod
    def for_terminal(cls, label: str = "translate", unit: str = "rows"):
        """A bar when stderr is a terminal, else None (plain log lines only)."""
        return cls(label, unit=unit) if sys.stderr.isatty() else None

    def __call__(self, done: int, total: int | None = None) -> None:
        now = time.monotonic()
        if (total is None or done < total) and now - self._last < 0.1:
            return
        self._last = now
        rate = done / max(now - self._started, 1e-6)
        if total is None:  # unknown total: a running count
            self.stream.write(f"\r{self.label}: {done} {self.unit} {rate:.1f}/s ")
            self.stream.flush()
            self._drawn = True
            return
        share = done / total if total else 1.0
        filled = int(self.width * min(share, 1.0))
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (self.width - filled)}] "
                          f"{done}/{total} {self.unit} {rate:.1f}/s ")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
