"""The third layer of the HTTP policy: per-host politeness, and which hosts may be asked at all.

- `HostThrottles`: one `HostThrottle` per host, shared by every thread of a client: a request
  rate, a concurrency cap, and pauses (429 Retry-After, block pages) during which nothing at
  all is sent to that host;
- `host_key(url)` / `host_allowed(url, allowed)`: the name a host is declared by, and whether
  a request stays on the declared hosts.
"""
from __future__ import annotations

import contextlib
import threading
from urllib.parse import urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}


def host_key(url: str) -> str:
    """"host" for a URL on its scheme's default port (or with no port), else "host:port"."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port
    if port is None or port == _DEFAULT_PORTS.get(parts.scheme):
        return host
    return f"{host}:{port}"


def host_allowed(url: str, allowed: set[str] | frozenset[str] | None) -> bool:
    """Whether a request to `url` stays on the allowed hosts (None: no restriction). A host
    allowed without a port is allowed on the default ports only: a different port on the same
    machine is another server."""
    if allowed is None:
        return True
    parts = urlsplit(str(url))
    if parts.scheme not in _DEFAULT_PORTS:
        return False
    return host_key(str(url)) in allowed


class HostThrottle:
    """Rate, concurrency and pauses for one host, shared by every thread of the client."""

    def __init__(self, rate_per_s: float, concurrency: int, clock, sleep):
        self.interval = 1.0 / rate_per_s if rate_per_s and rate_per_s > 0 else 0.0
        self.slots = threading.BoundedSemaphore(max(1, concurrency))
        self.lock = threading.Lock()
        self.next_slot = 0.0
        self.paused_until = 0.0
        self.clock = clock
        self.sleep = sleep

    def pause(self, seconds: float) -> None:
        with self.lock:
            self.paused_until = max(self.paused_until, self.clock() + seconds)

    @contextlib.contextmanager
    def turn(self):
        """Wait for a concurrency slot, the end of any pause, and the next rate slot."""
        self.slots.acquire()
        try:
            while True:
                with self.lock:
                    now = self.clock()
                    start = max(now, self.next_slot, self.paused_until)
                    if start <= now:
                        self.next_slot = now + self.interval
                        break
                    # Reserve nothing while waiting: a pause set meanwhile must still apply.
                    wait = start - now
                self.sleep(min(wait, 1.0))
            yield
        finally:
            self.slots.release()


class HostThrottles:
    """The throttle of each host (scheme-less `host:port`), made on first use."""

    def __init__(self, rate_per_s: float, concurrency: int, clock, sleep):
        self.rate_per_s, self.concurrency, self.clock, self.sleep = rate_per_s, concurrency, clock, sleep
        self.by_host: dict[str, HostThrottle] = {}
        self.lock = threading.Lock()

    def for_url(self, url: str) -> HostThrottle:
        host = urlsplit(url).netloc.lower()
        with self.lock:
            throttle = self.by_host.get(host)
            if throttle is None:
                throttle = self.by_host[host] = HostThrottle(self.rate_per_s, self.concurrency, self.clock, self.sleep)
            return throttle


__all__ = ["HostThrottle", "HostThrottles", "host_key", "host_allowed"]
