"""The HTTP policy put together: throttle → send → classify → decide, until an answer or an error.

Each layer is its own module and tested alone: hosts.py (the per-host throttle), classify.py
(what an outcome means), decide.py (what to do next). `Policy.run` is only the loop that joins
them and carries out the decision: sleep, pause the host, or raise.
"""
from __future__ import annotations

import contextlib
import logging
import random
import threading
from collections import Counter
from pathlib import Path
from typing import Callable

import httpx

from basecrawler.errors import FetchError, Interrupted, ReplayMiss
from basecrawler.fetch.classify import Failure, classify, classify_exception, failure_of
from basecrawler.fetch.decide import Action, Budget, decide
from basecrawler.fetch.hosts import HostThrottles

log = logging.getLogger("basecrawler.fetch.http")   # the client's logger: one name for all its warnings


class Stats:
    """The client's counters ("requests", "retries/transient", "status/200"…), thread-safe."""

    def __init__(self):
        self.counter: Counter = Counter()
        self.lock = threading.Lock()

    def count(self, *keys: str) -> None:
        with self.lock:
            for key in keys:
                self.counter[key] += 1

    def snapshot(self) -> dict:
        with self.lock:
            return dict(sorted(self.counter.items()))


class Policy:
    """Runs one request's attempts under the policy.

    `send()` makes one attempt and returns an httpx.Response with its body read, or a tuple
    whose first item is a streamed response and second the temp file holding its body.
    `credentials()` says whether the client itself sends credentials; `keep_refused(url,
    response, body)` archives a refused body and returns its sha256."""

    def __init__(self, *, budget: Budget, throttles: HostThrottles, stats: Stats, clock, sleep,
                 stopped: Callable[[], bool], credentials: Callable[[], bool],
                 keep_refused: Callable[[str, httpx.Response, bytes], str | None], jitter=random.random):
        self.budget, self.throttles, self.stats = budget, throttles, stats
        self.clock, self.sleep, self.stopped, self.jitter = clock, sleep, stopped, jitter
        self.credentials, self.keep_refused = credentials, keep_refused

    def run(self, method: str, url: str, send, *, expect: str | None, credentials: bool = False,
            deadline: float | None = None):
        throttle = self.throttles.for_url(url)
        tries: Counter = Counter()
        while True:
            if self.stopped():
                raise Interrupted()
            with throttle.turn():
                self.stats.count("requests")
                result, failure, response = self.attempt(send, expect=expect, credentials=credentials)
            if failure is None:
                return result
            tries[failure.kind] += 1
            action = decide(failure, tries[failure.kind], self.budget, now=self.clock(), jitter=self.jitter(),
                            method=method, url=url, expect=expect, deadline=deadline)
            self.stats.count(*action.counts)
            if action.pause_host_s:
                throttle.pause(action.pause_host_s)
            if action.warning:
                log.warning("%s", action.warning)
            if not action.retry:
                raise self.error(action, failure, url, response)
            if action.sleep_s:
                self.sleep(action.sleep_s)

    def attempt(self, send, *, expect: str | None, credentials: bool):
        """One attempt: (result, None, response) for a usable answer, else (None, the failure,
        the refused response with its body in memory, or None)."""
        try:
            result = send()
        except (ReplayMiss, FetchError, Interrupted):
            raise   # classified already (too_large, too_slow, a foreign host, a refused encoding…)
        except httpx.HTTPError as exc:
            if self.stopped():   # the stop hook shut the socket down under this read
                raise Interrupted() from None
            return None, classify_exception(exc), None
        response = result[0] if isinstance(result, tuple) else result
        body = _content(response)
        kind = classify(response.status_code, body=body if body is not None else _peek_file(result[1]),
                        content_type=response.headers.get("content-type", ""), expect=expect,
                        has_credentials=credentials or self.credentials())
        if kind is None:
            self.stats.count(f"status/{response.status_code}")
            return result, None, response
        if isinstance(result, tuple):  # a streamed body we will not use
            with contextlib.suppress(FileNotFoundError):
                result[1].unlink()
        return None, failure_of(kind, response.status_code, response.headers), response

    def error(self, action: Action, failure: Failure, url: str, response: httpx.Response | None) -> FetchError:
        body = (_content(response) or b"") if response is not None and action.with_body else None
        sha = self.keep_refused(url, response, body) if action.archive_body and body else None
        return action.give_up(action.message, url=url, status=failure.status, body=body, response_sha256=sha)


def _content(response: httpx.Response) -> bytes | None:
    """The body held in memory, None for a body streamed to a file."""
    try:
        return response.content
    except httpx.ResponseNotRead:
        return None


def _peek_file(path: Path, size: int = 1024) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(size)


__all__ = ["Policy", "Stats"]
