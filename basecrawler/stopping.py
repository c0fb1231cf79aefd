"""The stop request of a run: a threading.Event that also runs hooks when it is set.

A SIGINT/SIGTERM handler sets it (runner.stop_on_signals). Code that may be blocked where no
flag is looked at registers a hook: the HTTP client shuts its sockets down, so a read waiting
on a server that sends one byte a second returns at once instead of at the next item boundary.
Hooks run inside the signal handler: they must be quick, take no lock the interrupted code may
hold, and never raise (an exception is logged and the other hooks still run).
"""
from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger(__name__)


class StopEvent(threading.Event):
    def __init__(self):
        super().__init__()
        # A dict keyed by the hook (bound methods compare by object and function): adding and
        # removing are single atomic operations under the GIL, so a handler interrupting either
        # still sees a consistent mapping (no lock needed).
        self._hooks: dict[Callable[[], None], None] = {}

    def add_hook(self, hook: Callable[[], None]) -> None:
        """Run `hook()` when the stop is set (at once if it is set already)."""
        self._hooks[hook] = None
        if self.is_set():
            self._run(hook)

    def remove_hook(self, hook: Callable[[], None]) -> None:
        self._hooks.pop(hook, None)

    def set(self) -> None:
        super().set()
        for hook in list(self._hooks):
            self._run(hook)

    @staticmethod
    def _run(hook) -> None:
        try:
            hook()
        except Exception as exc:  # one hook failing must not keep the others from stopping
            log.warning("stop hook %r failed: %s", hook, exc)


def add_stop_hook(stop, hook: Callable[[], None]) -> bool:
    """Register `hook` on `stop` when it takes hooks (a plain threading.Event does not: then
    the stop is only seen where code checks it). Returns whether it was registered."""
    if stop is not None and hasattr(stop, "add_hook"):
        stop.add_hook(hook)
        return True
    return False


__all__ = ["StopEvent", "add_stop_hook"]
