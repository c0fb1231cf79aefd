"""Cross-process run lock: one crawl writes at a time (scheduler, manual runs, tests).

An advisory `flock` on `<db>.lock`: the kernel drops it when the holding process dies, so a
lock left by a crashed or killed run is taken over without any stale-PID guessing. The holder's
PID is written into the file for people reading it.
"""
from __future__ import annotations

import fcntl
import logging
import os
import time
from pathlib import Path

from .errors import RunLockTimeout

log = logging.getLogger(__name__)


class RunLock:
    def __init__(self, db_path: str, timeout_s: float | None = None):
        self.path = None if db_path == ":memory:" else Path(f"{db_path}.lock")
        self.timeout_s = timeout_s
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        """Take the lock if free; False when another process holds it."""
        if self.path is None:
            return True
        self._open()
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        self._stamp()
        return True

    def acquire(self) -> None:
        """Block until the lock is ours (or raise RunLockTimeout)."""
        if self.path is None:
            return
        self._open()
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() > deadline:
                    raise RunLockTimeout(f"another crawl (pid {self.holder_pid()}) still held {self.path} "
                                         f"after {self.timeout_s:.0f}s")
                time.sleep(0.1)
        self._stamp()

    def holder_pid(self) -> int | None:
        if self.path is None or not self.path.exists():
            return None
        try:
            return int(self.path.read_text().strip() or 0) or None
        except (ValueError, OSError):
            return None

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def _open(self) -> None:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)

    def _stamp(self) -> None:
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()
