"""Backend requests on daemon threads, waited for with an eye on the stop event.

A request can take up to the backend's timeout (60 s by default). The worker waits for its
answer in short slices and gives up the moment `stop` is set (SIGTERM), so a stop takes a
fraction of a second; the request finishes on its own thread and its answer is dropped. Daemon
threads, unlike ThreadPoolExecutor's, never keep the process alive at exit."""
from __future__ import annotations

import queue
import threading
from concurrent.futures import Future

from .errors import TranslationError

POLL_S = 0.1


class Stopped(TranslationError):
    """The stop event was set while waiting for the backend."""

    kind = "translation_stopped"


class DaemonPool:
    def __init__(self, size: int):
        self.size = size
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"translate-{n}", daemon=True) for n in range(size)]
        for thread in self._threads:
            thread.start()

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        self._jobs.put((future, fn, args))
        return future

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            future, fn, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:   # handed to whoever waits for the future
                future.set_exception(exc)

    def shutdown(self) -> None:
        """Let the threads end after their current job; never waits."""
        for _ in self._threads:
            self._jobs.put(None)


def wait_for(future: Future, stop) -> object:
    """The future's result; raises Stopped as soon as `stop` is set."""
    while True:
        if stop is not None and stop.is_set():
            future.cancel()
            raise Stopped()
        try:
            return future.result(timeout=POLL_S)
        except TimeoutError:
            continue
